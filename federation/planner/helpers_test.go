package planner

import (
	"fmt"
	"maps"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

var now = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func ptr[T any](v T) *T { return &v }

type prefOpt func(*v1alpha1.ClusterPreference)

func weight(w int32) prefOpt { return func(p *v1alpha1.ClusterPreference) { p.Weight = &w } }
func minR(n int32) prefOpt   { return func(p *v1alpha1.ClusterPreference) { p.MinReplicas = &n } }
func maxR(n int32) prefOpt   { return func(p *v1alpha1.ClusterPreference) { p.MaxReplicas = &n } }
func cost(n int32) prefOpt   { return func(p *v1alpha1.ClusterPreference) { p.DeletionCost = &n } }

func pref(name string, opts ...prefOpt) v1alpha1.ClusterPreference {
	p := v1alpha1.ClusterPreference{Name: name}
	for _, o := range opts {
		o(&p)
	}
	return p
}

func listed(prefs ...v1alpha1.ClusterPreference) v1alpha1.Placement {
	return v1alpha1.Placement{Clusters: prefs}
}

func healthy(names ...string) []Member {
	ms := make([]Member, len(names))
	for i, n := range names {
		ms[i] = Member{Name: n, Health: Healthy}
	}
	return ms
}

// member returns a pointer to the named member of in, failing the test when
// it is missing.
func member(t testing.TB, in *Input, name string) *Member {
	t.Helper()
	for i := range in.Members {
		if in.Members[i].Name == name {
			return &in.Members[i]
		}
	}
	t.Fatalf("no member %q", name)
	return nil
}

// settle returns the next plan's input after members reached their targets:
// Previous becomes the targets and every healthy member runs exactly its
// target as ready pods (free capacity shrinks by what was added).
func settle(in Input, r Result) Input {
	next := in
	next.Previous = r.TargetMap()
	next.Members = slices.Clone(in.Members)
	for i := range next.Members {
		m := &next.Members[i]
		if m.Health != Healthy {
			continue
		}
		tgt := r.Target(m.Name)
		if m.FreeCapacity != nil {
			room := m.Current + *m.FreeCapacity
			tgt = min(tgt, room)
			m.FreeCapacity = ptr(room - tgt)
		}
		m.Current, m.Ready = tgt, tgt
	}
	return next
}

func targetsString(r Result) string {
	keys := slices.Sorted(maps.Keys(r.TargetMap()))
	s := ""
	for _, k := range keys {
		s += fmt.Sprintf("%s=%d ", k, r.Target(k))
	}
	return s
}

func budget(surge, unavailable int) v1alpha1.MoveBudget {
	return v1alpha1.MoveBudget{MaxSurge: ptr(intstr.FromInt(surge)), MaxUnavailable: ptr(intstr.FromInt(unavailable))}
}

func dur(d time.Duration) *v1alpha1.Duration { return v1alpha1.DurationOf(d) }

// checkInvariants asserts what must hold for every plan: one target per
// candidate, min/max honoured for active members, failed members at 0, held
// members never above their previous target, the total within
// replicas+surge, and the accounting fields consistent.
func checkInvariants(t testing.TB, in Input, r Result) {
	t.Helper()
	sel := Select(&in.Placement, in.Members)
	if len(sel.Candidates) != len(r.Targets) {
		t.Fatalf("%d candidates but %d targets", len(sel.Candidates), len(r.Targets))
	}
	replicas := int64(max(in.Replicas, 0))
	for i, c := range sel.Candidates {
		tg := r.Targets[i]
		if tg.Cluster != c.Member.Name {
			t.Fatalf("target %d is %q, want %q (sorted by name)", i, tg.Cluster, c.Member.Name)
		}
		if tg.Replicas < 0 {
			t.Fatalf("%s: negative target %d", tg.Cluster, tg.Replicas)
		}
		if tg.Replicas > c.MaxReplicas {
			t.Fatalf("%s: target %d above maxReplicas %d", tg.Cluster, tg.Replicas, c.MaxReplicas)
		}
		switch tg.State {
		case StateFailedOver, StateEvicted, StateExcluded:
			if tg.Replicas != 0 {
				t.Fatalf("%s: %v but target %d", tg.Cluster, tg.State, tg.Replicas)
			}
		case StateCordoned:
			if m := memberOf(in, tg.Cluster); tg.Replicas > max(in.Previous[tg.Cluster], 0) || tg.Replicas > max(m.Current, 0) {
				t.Fatalf("%s: cordoned member grew to %d (previous %d, pods %d)", tg.Cluster, tg.Replicas, in.Previous[tg.Cluster], m.Current)
			}
		case StateHeld:
			if tg.Replicas > max(in.Previous[tg.Cluster], 0) {
				t.Fatalf("%s: held member grew from %d to %d", tg.Cluster, in.Previous[tg.Cluster], tg.Replicas)
			}
		}
	}
	total := r.Total()
	replicas32 := int32(replicas)
	if in.Placement.Mode == v1alpha1.PlacementDuplicated {
		for _, tg := range r.Targets {
			if tg.Replicas > replicas32 {
				t.Fatalf("%s: duplicated target %d above replicas %d", tg.Cluster, tg.Replicas, replicas)
			}
		}
		if r.Surge != 0 || r.MovesPending != 0 || r.MinimumsExceedReplicas {
			t.Fatalf("duplicated: surge %d moves %d minimums %t", r.Surge, r.MovesPending, r.MinimumsExceedReplicas)
		}
		return
	}
	if !r.MinimumsExceedReplicas && len(in.Placement.SpreadConstraints) == 0 {
		for i, c := range sel.Candidates {
			tg := r.Targets[i]
			if tg.State == StateActive && tg.Replicas < c.MinReplicas {
				t.Fatalf("%s: target %d below minReplicas %d", tg.Cluster, tg.Replicas, c.MinReplicas)
			}
		}
	}
	surge := int64(0)
	if in.Failover.MoveBack == v1alpha1.MoveBackOnRecovery {
		s, _ := ResolveBudget(in.MoveBudget, in.Replicas)
		surge = int64(s)
	}
	if total > replicas+surge {
		t.Fatalf("targets add up to %d, above replicas %d + surge %d", total, replicas, surge)
	}
	if total+int64(r.Unplaced) < replicas {
		t.Fatalf("targets %d + unplaced %d < replicas %d", total, r.Unplaced, replicas)
	}
	if int64(r.Surge) != max(total-replicas, 0) {
		t.Fatalf("surge %d, targets %d, replicas %d", r.Surge, total, replicas)
	}
	if r.Shortfall < r.Unplaced {
		t.Fatalf("shortfall %d below unplaced %d", r.Shortfall, r.Unplaced)
	}
	for i := 1; i < len(r.Changes); i++ {
		if r.Changes[i-1].Cluster >= r.Changes[i].Cluster {
			t.Fatalf("changes not sorted: %v", r.Changes)
		}
	}
	for _, c := range r.Changes {
		if c.From == c.To {
			t.Fatalf("no-op change %v", c)
		}
	}
}

// memberOf returns the named member of in (the zero Member when missing).
func memberOf(in Input, name string) Member {
	for _, m := range in.Members {
		if m.Name == name {
			return m
		}
	}
	return Member{}
}

// alternatePolicy is MoveBackNever on even runs and MoveBackOnRecovery on odd
// ones, so a property is checked under both.
func alternatePolicy(run int) v1alpha1.MoveBackPolicy {
	if run%2 == 1 {
		return v1alpha1.MoveBackOnRecovery
	}
	return v1alpha1.MoveBackNever
}

// checkDeterministic fails unless planning in again gives r and planning it
// with its members shuffled gives the same targets, changes and spread.
func checkDeterministic(t testing.TB, rng *rand.Rand, in Input, r Result, describe func(Input) string) {
	t.Helper()
	shuffled := in
	shuffled.Members = slices.Clone(in.Members)
	rng.Shuffle(len(shuffled.Members), func(i, j int) {
		shuffled.Members[i], shuffled.Members[j] = shuffled.Members[j], shuffled.Members[i]
	})
	r2, r3 := Plan(in), Plan(shuffled)
	if diff := cmp.Diff(r, r2, equateErrorText); diff != "" {
		t.Fatalf("not deterministic: planning again gave (-first +again):\n%s\ninput:\n%s", diff, describe(in))
	}
	checkOrderFree(t, in, r, r3, true, describe)
}

// checkOrderFree fails unless r, planned from in's members in their order,
// and shuffled, planned from the same members shuffled, agree on targets and
// changes (and on spread when withSpread).
func checkOrderFree(t testing.TB, in Input, r, shuffled Result, withSpread bool, describe func(Input) string) {
	t.Helper()
	check := func(part string, inOrder, shuff any) {
		t.Helper()
		if diff := cmp.Diff(inOrder, shuff); diff != "" {
			t.Fatalf("not deterministic: shuffling the members changed the %s (-in order +shuffled):\n%s\ninput:\n%s", part, diff, describe(in))
		}
	}
	check("targets", r.Targets, shuffled.Targets)
	check("changes", r.Changes, shuffled.Changes)
	if withSpread {
		check("spread", r.Spread, shuffled.Spread)
	}
}

// equateErrorText lets cmp compare a Result's SelectorError: errors of the
// same type with the same text are equal, as DeepEqual had them (their
// unexported fields would make cmp panic).
var equateErrorText = cmp.Comparer(func(x, y error) bool {
	if x == nil || y == nil {
		return x == nil && y == nil
	}
	return reflect.TypeOf(x) == reflect.TypeOf(y) && x.Error() == y.Error()
})

// checkMonotoneInReplicas plans in for 0 to 90 replicas and fails when one
// more replica lowers any member's target.
func checkMonotoneInReplicas(t testing.TB, in Input, describe func(Input) string) {
	t.Helper()
	prev := Result{}
	for n := int32(0); n <= 90; n++ {
		in.Replicas = n
		r := Plan(in)
		for _, tg := range r.Targets {
			if p := prev.Target(tg.Cluster); tg.Replicas < p {
				t.Fatalf("replicas %d -> %d lowered %s from %d to %d\nprev %s\nnow  %s\ninput:\n%s",
					n-1, n, tg.Cluster, p, tg.Replicas, targetsString(prev), targetsString(r), describe(in))
			}
		}
		prev = r
	}
}
