package planner

import (
	"math/rand"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

const propertyRuns = 3000

// Every random plan satisfies the invariants (min/max, failed at 0, held
// never growing, total within replicas+surge, accounting).
func TestPropertyInvariants(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for range propertyRuns {
		in := genInput(rng, genOpts{})
		r := Plan(in)
		checkInvariants(t, in, r)
		if t.Failed() {
			t.Fatalf("input:\n%s", describe(in))
		}
	}
}

// House monotone: raising replicas, everything else equal, never lowers any
// member. Guaranteed under moveBack Never; under OnRecovery whenever the
// budget is the same, so the budget here is absolute.
func TestPropertyMonotoneInReplicas(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for run := range propertyRuns / 10 {
		in := genInput(rng, genOpts{policy: alternatePolicy(run)})
		in.MoveBudget = budget(2, 1)
		checkMonotoneInReplicas(t, in, describe)
	}
}

// Sum equals replicas and nothing is short when capacity suffices.
func TestPropertySumEqualsReplicas(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for range propertyRuns {
		in := genInput(rng, genOpts{ample: true, allHealthy: true, policy: v1alpha1.MoveBackNever})
		r := Plan(in)
		checkInvariants(t, in, r)
		if r.Total() != int64(in.Replicas) || r.Shortfall != 0 || r.Unplaced != 0 {
			t.Fatalf("total %d shortfall %d unplaced %d for %d replicas (%s)\ninput:\n%s",
				r.Total(), r.Shortfall, r.Unplaced, in.Replicas, targetsString(r), describe(in))
		}
	}
}

// Same input, same output; member order does not matter.
func TestPropertyDeterministic(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for range propertyRuns {
		in := genInput(rng, genOpts{})
		r1 := Plan(in)
		r2 := Plan(in)
		shuffled := in
		shuffled.Members = slices.Clone(in.Members)
		rng.Shuffle(len(shuffled.Members), func(i, j int) {
			shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
		})
		r3 := Plan(shuffled)
		if diff := cmp.Diff(r1, r2, equateErrorText); diff != "" {
			t.Fatalf("not deterministic: planning again gave (-first +again):\n%s\ninput:\n%s", diff, describe(in))
		}
		checkOrderFree(t, in, r1, r3, false, describe)
	}
}

// A settled fleet is a fixed point: once members run their targets, planning
// again changes nothing (no flapping), under both policies.
func TestPropertySettledIsStable(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	for run := range propertyRuns {
		in := genInput(rng, genOpts{allHealthy: true, noHistory: true, policy: alternatePolicy(run)})
		r := Plan(in)
		for range 20 { // converge the move-back, if any
			if r.MovesPending == 0 && r.Surge == 0 {
				break
			}
			in = settle(in, r)
			r = Plan(in)
		}
		next := settle(in, r)
		r2 := Plan(next)
		if diff := cmp.Diff(r.TargetMap(), r2.TargetMap()); diff != "" || len(r2.Changes) != 0 {
			t.Fatalf("settled plan moved (-settled +replanned):\n%s\nchanges %v\ninput:\n%s", diff, r2.Changes, describe(next))
		}
	}
}

// Minimal movement when one weight changes. Never: nothing that runs moves.
// OnRecovery with a large budget: the fleet converges to the new weighted
// division, moving exactly the replicas the division changed (no extra
// churn), the member whose weight rose never loses and no other member gains.
func TestPropertyOneWeightChange(t *testing.T) {
	rng := rand.New(rand.NewSource(6))
	for run := range propertyRuns / 3 {
		policy := alternatePolicy(run)
		in := genInput(rng, genOpts{allHealthy: true, noHistory: true, ample: true, policy: policy})
		in.MoveBudget = budget(1000, 0)
		r := Plan(in)
		in = settle(in, r)
		before := r.TargetMap()

		// Change one listed member's weight.
		k := rng.Intn(len(in.Placement.Clusters))
		in.Placement.Clusters = slices.Clone(in.Placement.Clusters)
		old := int32(1)
		if w := in.Placement.Clusters[k].Weight; w != nil {
			old = *w
		}
		// 1..5: weight 0 means "drain this member", a deliberate move.
		nw := int32(1 + rng.Intn(5))
		in.Placement.Clusters[k].Weight = ptr(nw)
		changed := in.Placement.Clusters[k].Name

		r = Plan(in)
		if policy == v1alpha1.MoveBackNever {
			if len(r.Changes) != 0 {
				t.Fatalf("weight change moved running replicas: %v\ninput:\n%s", r.Changes, describe(in))
			}
			continue
		}
		var moved int64
		for range 10 {
			for _, c := range r.Changes {
				if c.To > c.From {
					moved += int64(c.To - c.From)
				}
			}
			if r.MovesPending == 0 && r.Surge == 0 {
				break
			}
			in = settle(in, r)
			r = Plan(in)
		}
		after := r.TargetMap()
		fresh := in
		fresh.Previous = nil
		for i := range fresh.Members {
			fresh.Members[i].Current, fresh.Members[i].Ready = 0, 0
		}
		if diff := cmp.Diff(Plan(fresh).TargetMap(), after); diff != "" {
			t.Fatalf("did not converge to the weighted division (-division +converged):\n%s\ninput:\n%s", diff, describe(in))
		}
		var need int64
		for name, v := range after {
			need += int64(max(v-before[name], 0))
			up := nw > old
			switch {
			case name == changed && up && v < before[name]:
				t.Fatalf("%s weight %d->%d but lost %d->%d", name, old, nw, before[name], v)
			case name == changed && !up && nw != old && v > before[name]:
				t.Fatalf("%s weight %d->%d but gained %d->%d", name, old, nw, before[name], v)
			case name != changed && nw > old && v > before[name]:
				t.Fatalf("%s gained %d->%d when %s's weight rose", name, before[name], v, changed)
			case name != changed && nw < old && v < before[name]:
				t.Fatalf("%s lost %d->%d when %s's weight fell", name, before[name], v, changed)
			}
		}
		if moved != need {
			t.Fatalf("moved %d replicas in, the division needed %d\ninput:\n%s", moved, need, describe(in))
		}
	}
}
