package planner

import (
	"math/rand"
	"testing"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func costOrdered(prefs ...v1alpha1.ClusterPreference) v1alpha1.Placement {
	return v1alpha1.Placement{Strategy: v1alpha1.StrategyCostOrdered, Clusters: prefs}
}

func withFree(ms []Member, free ...int32) []Member {
	for i := range ms {
		ms[i].FreeCapacity = ptr(free[i])
	}
	return ms
}

// The motivating case of issue 14: reserved capacity (high deletionCost)
// fills first, pay-as-you-go last; scale-down empties pay-as-you-go first.
func TestCostOrderedFillAndDrain(t *testing.T) {
	placement := costOrdered(
		pref("reserved-a", cost(100)), pref("reserved-b", cost(100), weight(3)),
		pref("payg", cost(0), weight(2)), pref("spot", cost(0), maxR(5)))
	members := withFree(healthy("payg", "reserved-a", "reserved-b", "spot"), 50, 4, 12, 50)
	cases := []struct {
		replicas int32
		want     map[string]int32
	}{
		{0, map[string]int32{"reserved-a": 0, "reserved-b": 0, "payg": 0, "spot": 0}},
		{4, map[string]int32{"reserved-a": 1, "reserved-b": 3, "payg": 0, "spot": 0}},
		// The reserved tier shares by weight 1:3 until reserved-a is full.
		{16, map[string]int32{"reserved-a": 4, "reserved-b": 12, "payg": 0, "spot": 0}},
		{17, map[string]int32{"reserved-a": 4, "reserved-b": 12, "payg": 1, "spot": 0}},
		// The pay-as-you-go tier shares 2:1.
		{26, map[string]int32{"reserved-a": 4, "reserved-b": 12, "payg": 7, "spot": 3}},
		// spot stops at maxReplicas, payg takes the rest of the tier.
		{40, map[string]int32{"reserved-a": 4, "reserved-b": 12, "payg": 19, "spot": 5}},
	}
	for _, tc := range cases {
		in := Input{UID: "cost", Replicas: tc.replicas, Members: members, Placement: placement}
		r := Plan(in)
		checkInvariants(t, in, r)
		wantTargets(t, r, tc.want)
	}

	// Settled at 40, scale down to 20: the pay-as-you-go tier shrinks first
	// (payg and spot by weight), reserved keeps all 16.
	in := Input{UID: "cost", Replicas: 40, Members: members, Placement: placement}
	next := settle(in, Plan(in))
	next.Replicas = 20
	r := Plan(next)
	checkInvariants(t, next, r)
	if r.Target("reserved-a") != 4 || r.Target("reserved-b") != 12 || r.Target("payg")+r.Target("spot") != 4 {
		t.Fatalf("scale-down to 20: %s, want reserved 4+12 kept", targetsString(r))
	}
	next.Replicas = 10
	r = Plan(next)
	if r.Target("payg")+r.Target("spot") != 0 || r.Target("reserved-a")+r.Target("reserved-b") != 10 {
		t.Fatalf("scale-down to 10: %s, want only reserved", targetsString(r))
	}
}

// minReplicas is a floor in every tier; unknown capacity makes a tier take all
// the growth that reaches it; without room anywhere the rest goes Pending by
// static weight and is reported.
func TestCostOrderedEdges(t *testing.T) {
	t.Run("minimums first", func(t *testing.T) {
		in := Input{UID: "m", Replicas: 6, Members: withFree(healthy("a", "b"), 10, 10),
			Placement: costOrdered(pref("a", cost(5)), pref("b", minR(2)))}
		r := Plan(in)
		checkInvariants(t, in, r)
		wantTargets(t, r, map[string]int32{"a": 4, "b": 2})
	})
	t.Run("unknown capacity takes the tier", func(t *testing.T) {
		in := Input{UID: "u", Replicas: 30, Members: healthy("a", "b"),
			Placement: costOrdered(pref("a", cost(5)), pref("b"))}
		r := Plan(in)
		wantTargets(t, r, map[string]int32{"a": 30, "b": 0})
	})
	t.Run("fleet short", func(t *testing.T) {
		in := Input{UID: "s", Replicas: 10, Members: withFree(healthy("a", "b"), 2, 2),
			Placement: costOrdered(pref("a", cost(5)), pref("b"))}
		r := Plan(in)
		checkInvariants(t, in, r)
		if r.Total() != 10 || r.Shortfall != 6 || r.Target("a") < 2 || r.Target("b") < 2 {
			t.Fatalf("%s shortfall %d, want 10 placed, 6 short", targetsString(r), r.Shortfall)
		}
	})
	t.Run("weight zero gets only its minimum", func(t *testing.T) {
		in := Input{UID: "z", Replicas: 5, Members: withFree(healthy("a", "b"), 10, 10),
			Placement: costOrdered(pref("a", cost(5), weight(0), minR(1)), pref("b"))}
		r := Plan(in)
		wantTargets(t, r, map[string]int32{"a": 1, "b": 4})
	})
	t.Run("failover moves the share to the next tier", func(t *testing.T) {
		in := Input{UID: "f", Replicas: 6, Members: withFree(healthy("a", "b"), 10, 10),
			Placement: costOrdered(pref("a", cost(5)), pref("b")), Now: now}
		next := settle(in, Plan(in))
		next.Members[0].Health, next.Members[0].UnhealthySince = Unhealthy, now.Add(-DefaultUnreachableGracePeriod)
		r := Plan(next)
		checkInvariants(t, next, r)
		wantTargets(t, r, map[string]int32{"a": 0, "b": 6})
	})
}

// costOrderedInput draws a random fleet under CostOrdered (genInput gives
// about a third of the listed members a deletionCost of 0..2).
func costOrderedInput(rng *rand.Rand, o genOpts) Input {
	in := genInput(rng, o)
	in.Placement.Strategy = v1alpha1.StrategyCostOrdered
	return in
}

func TestCostOrderedPropertyInvariantsAndDeterminism(t *testing.T) {
	rng := rand.New(rand.NewSource(41))
	for range propertyRuns {
		in := costOrderedInput(rng, genOpts{})
		r := Plan(in)
		checkInvariants(t, in, r)
		checkDeterministic(t, rng, in, r, describe)
		if t.Failed() {
			t.Fatalf("input:\n%s", describe(in))
		}
	}
}

func TestCostOrderedPropertyMonotone(t *testing.T) {
	rng := rand.New(rand.NewSource(42))
	for run := range propertyRuns / 10 {
		in := costOrderedInput(rng, genOpts{policy: alternatePolicy(run)})
		in.MoveBudget = budget(2, 1)
		checkMonotoneInReplicas(t, in, describe)
	}
}

func TestCostOrderedPropertySumEqualsReplicas(t *testing.T) {
	rng := rand.New(rand.NewSource(43))
	for range propertyRuns {
		in := costOrderedInput(rng, genOpts{ample: true, allHealthy: true, policy: v1alpha1.MoveBackNever})
		r := Plan(in)
		checkInvariants(t, in, r)
		if r.Total() != int64(in.Replicas) || r.Shortfall != 0 || r.Unplaced != 0 {
			t.Fatalf("total %d shortfall %d unplaced %d for %d replicas\ninput:\n%s", r.Total(), r.Shortfall, r.Unplaced, in.Replicas, describe(in))
		}
	}
	// With limited capacity: what is not placed within capacity is reported.
	for range propertyRuns {
		in := costOrderedInput(rng, genOpts{allHealthy: true, noHistory: true, policy: v1alpha1.MoveBackNever})
		r := Plan(in)
		var room int64
		for _, tg := range r.Targets {
			room += int64(tg.Replicas - tg.OverCapacity)
		}
		if room+int64(r.Shortfall) != int64(in.Replicas) {
			t.Fatalf("placed within capacity %d + shortfall %d != replicas %d (%s)\ninput:\n%s", room, r.Shortfall, in.Replicas, targetsString(r), describe(in))
		}
	}
}

// Tier order: no member of a lower deletionCost has a seat beyond its
// minimum while a member of a higher cost with weight still has room within
// its maxReplicas and capacity. Checked on fresh fleets (both move-back
// policies) and after settling and rescaling under Never.
func TestCostOrderedPropertyTierOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(44))
	for run := range propertyRuns {
		policy := alternatePolicy(run)
		in := costOrderedInput(rng, genOpts{allHealthy: true, noHistory: true, policy: policy})
		r := Plan(in)
		checkTierOrder(t, in, r)
		if policy == v1alpha1.MoveBackNever {
			next := settle(in, r)
			next.Replicas = int32(rng.Intn(2*int(in.Replicas) + 2))
			checkTierOrder(t, next, Plan(next))
		}
	}
}

func checkTierOrder(t *testing.T, in Input, r Result) {
	t.Helper()
	sel := Select(&in.Placement, in.Members)
	for i, hi := range sel.Candidates {
		room := hi.MaxReplicas
		if m := hi.Member; m.FreeCapacity != nil {
			room = min(room, m.Current+*m.FreeCapacity)
		}
		if hi.Weight == 0 || r.Targets[i].Replicas >= room {
			continue
		}
		for j, lo := range sel.Candidates {
			if lo.DeletionCost < hi.DeletionCost && r.Targets[j].Replicas > lo.MinReplicas {
				t.Fatalf("%s (cost %d) has %d beyond its minimum %d while %s (cost %d) has room (%d of %d)\n%s\ninput:\n%s",
					lo.Member.Name, lo.DeletionCost, r.Targets[j].Replicas, lo.MinReplicas, hi.Member.Name, hi.DeletionCost,
					r.Targets[i].Replicas, room, targetsString(r), describe(in))
			}
		}
	}
}
