package planner

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func packed(prefs ...v1alpha1.ClusterPreference) v1alpha1.Placement {
	return v1alpha1.Placement{Strategy: v1alpha1.StrategyPacked, Clusters: prefs}
}

// Packed fills one member up to its capacity or maxReplicas before the
// next; the higher weight opens first, members running replicas grow
// before another is opened, and scale-down empties the smallest first.
func TestPackedFillAndDrain(t *testing.T) {
	placement := packed(pref("a"), pref("b", weight(3)), pref("c", maxR(4)), pref("d", weight(0)))
	members := withFree(healthy("a", "b", "c", "d"), 50, 6, 50, 50)
	cases := []struct {
		name     string
		replicas int32
		want     map[string]int32
	}{
		{"nothing", 0, map[string]int32{"a": 0, "b": 0, "c": 0, "d": 0}},
		{"the highest weight first", 5, map[string]int32{"a": 0, "b": 5, "c": 0, "d": 0}},
		{"up to its capacity", 6, map[string]int32{"a": 0, "b": 6, "c": 0, "d": 0}},
		// a and c tie on weight; the hash of the UID picks c here.
		{"then the next", 10, map[string]int32{"a": 0, "b": 6, "c": 4, "d": 0}},
		{"c at its maxReplicas, then a", 11, map[string]int32{"a": 1, "b": 6, "c": 4, "d": 0}},
		{"a full", 60, map[string]int32{"a": 50, "b": 6, "c": 4, "d": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{UID: "pack", Replicas: tc.replicas, Members: members, Placement: placement}
			r := Plan(in)
			checkInvariants(t, in, r)
			if diff := cmp.Diff(tc.want, r.TargetMap()); diff != "" {
				t.Fatalf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// A member already running replicas grows first, whatever the weights say
// now; a scale-down keeps the largest member and empties the smaller.
func TestPackedStickyAndConsolidating(t *testing.T) {
	members := healthy("a", "b", "c")
	in := Input{UID: "sticky", Replicas: 10, Members: members, Placement: packed(pref("a"), pref("b"), pref("c"))}
	first := Plan(in)
	var home string
	for m, n := range first.TargetMap() {
		if n == 10 {
			home = m
		}
	}
	if home == "" {
		t.Fatalf("10 replicas over 3 members of unknown capacity: %s, want all on one", targetsString(first))
	}
	next := settle(in, first)
	// Another member now outweighs home: the growth still goes to home.
	other := map[string]string{"a": "b", "b": "c", "c": "a"}[home]
	prefs := []v1alpha1.ClusterPreference{pref("a"), pref("b"), pref("c")}
	for i := range prefs {
		if prefs[i].Name == other {
			prefs[i].Weight = ptr[int32](9)
		}
	}
	next.Placement = packed(prefs...)
	next.Replicas = 14
	r := Plan(next)
	checkInvariants(t, next, r)
	if r.Target(home) != 14 {
		t.Fatalf("scale-up 10 -> 14 with %s at weight 9: %s, want all 14 on %s", other, targetsString(r), home)
	}

	// Spread 6 + 4 (b holds at most 4): scale-down to 5 empties b.
	spread := Input{UID: "drain", Replicas: 10, Members: withFree(healthy("a", "b"), 50, 4),
		Placement: packed(pref("a"), pref("b", weight(2)))}
	settled := settle(spread, Plan(spread))
	if diff := cmp.Diff(map[string]int32{"a": 6, "b": 4}, settled.Previous); diff != "" {
		t.Fatalf("before the scale-down (-want +got):\n%s", diff)
	}
	settled.Replicas = 5
	r = Plan(settled)
	checkInvariants(t, settled, r)
	if diff := cmp.Diff(map[string]int32{"a": 5, "b": 0}, r.TargetMap()); diff != "" {
		t.Fatalf("scale-down 10 -> 5 (-want +got):\n%s", diff)
	}
}

func TestPackedEdges(t *testing.T) {
	cases := []struct {
		name string
		in   Input
		want map[string]int32
	}{
		{"minimums first, then the member holding most grows",
			Input{UID: "m", Replicas: 8, Members: healthy("a", "b", "c"),
				Placement: packed(pref("a", minR(1)), pref("b", minR(3)), pref("c", weight(5)))},
			map[string]int32{"a": 1, "b": 7, "c": 0}},
		{"weight zero gets only its minimum",
			Input{UID: "z", Replicas: 5, Members: withFree(healthy("a", "b"), 10, 2),
				Placement: packed(pref("a", weight(0), minR(1)), pref("b"))},
			map[string]int32{"a": 1, "b": 4}}, // b over its capacity: Pending, reported
		{"the higher deletionCost keeps its pods on scale-down",
			Input{UID: "k", Replicas: 3, Members: readyPods(healthy("a", "b"), 2, 6), Previous: map[string]int32{"a": 2, "b": 6},
				Placement: packed(pref("a", cost(10)), pref("b"))},
			map[string]int32{"a": 2, "b": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(tc.in)
			checkInvariants(t, tc.in, r)
			if diff := cmp.Diff(tc.want, r.TargetMap()); diff != "" {
				t.Fatalf("targets (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("failover packs the moved replicas", func(t *testing.T) {
		in := Input{UID: "f", Replicas: 6, Members: healthy("a", "b", "c"), Now: now,
			Placement: packed(pref("a", weight(3)), pref("b", weight(2)), pref("c"))}
		next := settle(in, Plan(in))
		next.Members[0].Health, next.Members[0].UnhealthySince = Unhealthy, now.Add(-DefaultUnreachableGracePeriod)
		r := Plan(next)
		checkInvariants(t, next, r)
		if diff := cmp.Diff(map[string]int32{"a": 0, "b": 6, "c": 0}, r.TargetMap()); diff != "" {
			t.Fatalf("targets (-want +got):\n%s", diff)
		}
	})
}

// readyPods sets each member's current and ready pods.
func readyPods(ms []Member, pods ...int32) []Member {
	for i := range ms {
		ms[i].Current, ms[i].Ready = pods[i], pods[i]
	}
	return ms
}

// The point of Packed for many small FRS: each lands on one member, and
// the FRS spread over the members by their UIDs.
func TestPackedSmallWorkloadsSpreadOverTheFleet(t *testing.T) {
	members := healthy("m0", "m1", "m2", "m3")
	perMember := map[string]int{}
	for i := range 400 {
		in := Input{UID: fmt.Sprintf("frs-%d", i), Replicas: 10, Members: members, Placement: packed()}
		r := Plan(in)
		used := 0
		for m, n := range r.TargetMap() {
			if n > 0 {
				used++
				perMember[m]++
			}
		}
		if used != 1 {
			t.Fatalf("FRS %d: %s, want one member", i, targetsString(r))
		}
	}
	for _, m := range []string{"m0", "m1", "m2", "m3"} {
		// 100 each on average; a binomial spread is about 9.
		if n := perMember[m]; n < 60 || n > 140 {
			t.Errorf("%s holds %d of 400 FRS, want 60..140: %v", m, n, perMember)
		}
	}
}

// packedInput draws a random fleet under Packed.
func packedInput(rng *rand.Rand, o genOpts) Input {
	in := genInput(rng, o)
	in.Placement.Strategy = v1alpha1.StrategyPacked
	return in
}

func TestPackedPropertyInvariantsAndDeterminism(t *testing.T) {
	rng := rand.New(rand.NewSource(51))
	for range propertyRuns {
		in := packedInput(rng, genOpts{})
		r := Plan(in)
		checkInvariants(t, in, r)
		checkDeterministic(t, rng, in, r, describe)
		if t.Failed() {
			t.Fatalf("input:\n%s", describe(in))
		}
	}
}

// House-monotone under moveBack Never: one more replica never lowers a
// target. Under OnRecovery a move back in progress may take its victim
// from another member when the division without history gains a seat (the
// victim changes with the set of members above that division); the seats
// lowered then stay within the move budget's maxUnavailable.
func TestPackedPropertyMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(52))
	for run := range propertyRuns / 10 {
		policy := alternatePolicy(run)
		in := packedInput(rng, genOpts{policy: policy})
		in.MoveBudget = budget(2, 1)
		if policy == v1alpha1.MoveBackNever {
			checkMonotoneInReplicas(t, in, describe)
			continue
		}
		prev := Result{}
		for n := int32(0); n <= 90; n++ {
			in.Replicas = n
			r := Plan(in)
			var lowered int32
			for _, tg := range r.Targets {
				lowered += max(prev.Target(tg.Cluster)-tg.Replicas, 0)
			}
			if lowered > 1 {
				t.Fatalf("replicas %d -> %d lowered %d seats, more than maxUnavailable 1\nprev %s\nnow  %s\ninput:\n%s",
					n-1, n, lowered, targetsString(prev), targetsString(r), describe(in))
			}
			prev = r
		}
	}
}

// Fewest members: on a fresh healthy fleet, at most one member holds more
// than its minimum and less than its room (maxReplicas, capacity), so the
// replicas run on as few members as the order allows.
func TestPackedPropertyOnePartlyFilledMember(t *testing.T) {
	rng := rand.New(rand.NewSource(53))
	for range propertyRuns {
		in := packedInput(rng, genOpts{allHealthy: true, noHistory: true, policy: v1alpha1.MoveBackNever})
		in.Placement.SpreadConstraints = nil
		r := Plan(in)
		checkInvariants(t, in, r)
		sel := Select(&in.Placement, in.Members)
		var partly []string
		for i, c := range sel.Candidates {
			room := c.MaxReplicas
			if m := c.Member; m.FreeCapacity != nil {
				room = min(room, m.Current+*m.FreeCapacity)
			}
			if n := r.Targets[i].Replicas; c.Weight > 0 && n > c.MinReplicas && n < room {
				partly = append(partly, c.Member.Name)
			}
		}
		if len(partly) > 1 {
			t.Fatalf("%d members partly filled (%v): %s\ninput:\n%s", len(partly), partly, targetsString(r), describe(in))
		}
	}
}
