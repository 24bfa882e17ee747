package planner

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// withFeatures adds the issue 14 placement features to a generated input,
// drawing from its own source so genInput's sequence (and the golden hash)
// stays as it is: mode, CostOrdered, spread constraints on the zone label and
// a region label, taints and tolerations.
func withFeatures(rng *rand.Rand, in Input, duplicated bool) Input {
	if duplicated {
		in.Placement.Mode = v1alpha1.PlacementDuplicated
	}
	if rng.Intn(3) == 0 {
		in.Placement.Strategy = v1alpha1.StrategyCostOrdered
	}
	in.Members = slices.Clone(in.Members)
	keys := []string{"maintenance", "gpu", "spot"}
	for i := range in.Members {
		m := &in.Members[i]
		labels := map[string]string{"zone": m.Labels["zone"], "region": fmt.Sprint(i % 2)}
		if rng.Intn(8) == 0 {
			delete(labels, "region")
		}
		m.Labels = labels
		if rng.Intn(4) == 0 {
			x := Taint{Key: keys[rng.Intn(len(keys))], Value: fmt.Sprint(rng.Intn(2)), Effect: v1alpha1.TaintNoSchedule}
			if rng.Intn(2) == 0 {
				x.Effect = v1alpha1.TaintNoExecute
			}
			if rng.Intn(4) != 0 {
				x.TimeAdded = now.Add(-time.Duration(rng.Intn(600)) * time.Second)
			}
			m.Taints = []Taint{x}
		}
	}
	for range rng.Intn(3) {
		t := v1alpha1.ClusterToleration{Key: keys[rng.Intn(len(keys))], Operator: v1alpha1.TolerationExists}
		if rng.Intn(2) == 0 {
			t.Operator, t.Value = v1alpha1.TolerationEqual, fmt.Sprint(rng.Intn(2))
		}
		switch rng.Intn(3) {
		case 0:
			t.Effect = v1alpha1.TaintNoSchedule
		case 1:
			t.Effect = v1alpha1.TaintNoExecute
			if rng.Intn(2) == 0 {
				t.TolerationSeconds = ptr(int64(rng.Intn(600)))
			}
		}
		in.Placement.Tolerations = append(in.Placement.Tolerations, t)
	}
	if rng.Intn(2) == 0 {
		in.Placement.SpreadConstraints = append(in.Placement.SpreadConstraints, spreadBy("region", int32(rng.Intn(3)), int32(rng.Intn(3))))
	}
	if rng.Intn(3) == 0 {
		lo := int32(rng.Intn(4))
		in.Placement.SpreadConstraints = append(in.Placement.SpreadConstraints, spreadBy("zone", lo, lo+int32(rng.Intn(2))))
	}
	return in
}

// Every plan with the new features satisfies the invariants, is deterministic
// whatever the member order, and (divided) is house monotone.
func TestPropertyFeatures(t *testing.T) {
	rng := rand.New(rand.NewSource(45))
	for run := range propertyRuns {
		in := withFeatures(rng, genInput(rng, genOpts{}), run%5 == 0)
		r := Plan(in)
		checkInvariants(t, in, r)
		checkDeterministic(t, rng, in, r, describeFeatures)
		if t.Failed() {
			t.Fatalf("input:\n%s", describeFeatures(in))
		}
	}
}

func TestPropertyFeaturesMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(46))
	for run := range propertyRuns / 10 {
		in := withFeatures(rng, genInput(rng, genOpts{policy: alternatePolicy(run)}), run%7 == 0)
		in.MoveBudget = budget(2, 1)
		checkMonotoneInReplicas(t, in, describeFeatures)
	}
}

// describeFeatures adds the issue 14 fields to describe.
func describeFeatures(in Input) string {
	s := describe(in) + fmt.Sprintf("  mode=%q spread=", in.Placement.Mode)
	for _, c := range in.Placement.SpreadConstraints {
		s += fmt.Sprintf("{%s min=%s max=%s} ", c.TopologyKey, deref(c.MinGroups), deref(c.MaxGroups))
	}
	for _, t := range in.Placement.Tolerations {
		secs := "-"
		if t.TolerationSeconds != nil {
			secs = fmt.Sprint(*t.TolerationSeconds)
		}
		s += fmt.Sprintf("\n  toleration %s %s %s %s %s", t.Key, t.Operator, t.Value, t.Effect, secs)
	}
	for _, m := range in.Members {
		s += fmt.Sprintf("\n  %s labels=%v taints=", m.Name, m.Labels)
		for _, x := range m.Taints {
			s += fmt.Sprintf("%s=%s:%s@%s ", x.Key, x.Value, x.Effect, now.Sub(x.TimeAdded))
		}
	}
	return s
}
