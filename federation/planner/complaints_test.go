package planner

import (
	"maps"
	"testing"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func wantTargets(t *testing.T, r Result, want map[string]int32) {
	t.Helper()
	if got := r.TargetMap(); !maps.Equal(got, want) {
		t.Fatalf("targets %v, want %v (changes %v, notes %v)", got, want, r.Changes, r.Notes)
	}
}

// karmada#6735: scaling 5 -> 6 lowered a member. Raising replicas step by step
// from a settled fleet never lowers any member.
func TestScaleUpNeverLowersAMember(t *testing.T) {
	in := Input{UID: "llm", Replicas: 5, Members: healthy("a", "b", "c"),
		Placement: listed(pref("a", weight(170)), pref("b", weight(110)), pref("c", weight(60)))}
	r := Plan(in)
	for n := int32(6); n <= 60; n++ {
		next := settle(in, r)
		next.Replicas = n
		r2 := Plan(next)
		checkInvariants(t, next, r2)
		for _, tg := range r2.Targets {
			if tg.Replicas < r.Target(tg.Cluster) {
				t.Fatalf("%d -> %d lowered %s from %d to %d", n-1, n, tg.Cluster, r.Target(tg.Cluster), tg.Replicas)
			}
		}
		in, r = next, r2
	}
}

// karmada#4805/#5527/#2843/#4708: static weights ignored capacity and left pods
// Pending while other members had room.
func TestCapacitySpillsToMembersWithRoom(t *testing.T) {
	in := Input{UID: "cap", Replicas: 12, Members: []Member{
		{Name: "a", Health: Healthy, FreeCapacity: ptr[int32](2)},
		{Name: "b", Health: Healthy, FreeCapacity: ptr[int32](100)},
		{Name: "c", Health: Healthy},
	}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 2, "b": 5, "c": 5})
	if r.Shortfall != 0 {
		t.Fatalf("shortfall %d, want 0", r.Shortfall)
	}
}

// AvailableCapacity never sends more to a member than fits (karmada#4708).
func TestAvailableCapacityWeights(t *testing.T) {
	in := Input{UID: "ac", Replicas: 30, Placement: v1alpha1.Placement{Strategy: v1alpha1.StrategyAvailableCapacity},
		Members: []Member{
			{Name: "big", Health: Healthy, FreeCapacity: ptr[int32](40)},
			{Name: "small", Health: Healthy, Current: 2, Ready: 2, FreeCapacity: ptr[int32](8)},
			{Name: "full", Health: Healthy, FreeCapacity: ptr[int32](0)},
		}}
	in.Previous = map[string]int32{"small": 2}
	r := Plan(in)
	checkInvariants(t, in, r)
	// Weights 40 : 10 : 0, 2 pods kept in small: 24 / 6 / 0.
	wantTargets(t, r, map[string]int32{"big": 24, "small": 6, "full": 0})
}

// When the whole fleet is short, the rest is placed by weight (visible as
// Pending pods and a Shortfall), never dropped.
func TestFleetShortReportsShortfall(t *testing.T) {
	in := Input{UID: "short", Replicas: 12, Members: []Member{
		{Name: "a", Health: Healthy, FreeCapacity: ptr[int32](2)},
		{Name: "b", Health: Healthy, FreeCapacity: ptr[int32](2)},
		{Name: "c", Health: Healthy, FreeCapacity: ptr[int32](2)},
	}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 4, "b": 4, "c": 4})
	if r.Shortfall != 6 || r.Unplaced != 0 {
		t.Fatalf("shortfall %d unplaced %d, want 6 and 0", r.Shortfall, r.Unplaced)
	}
	for _, tg := range r.Targets {
		if tg.OverCapacity != 2 || r.Note(tg.Cluster) == "" {
			t.Fatalf("%s: over capacity %d note %q, want 2 and a note", tg.Cluster, tg.OverCapacity, r.Note(tg.Cluster))
		}
	}
}

// karmada#4910: scale-down removed ready replicas while others were not ready.
// Fleet-wide, unscheduled pods go first, then not-ready, then ready.
func TestScaleDownRemovesUnavailableFirst(t *testing.T) {
	base := Input{UID: "sd", Replicas: 15,
		Previous: map[string]int32{"a": 5, "b": 5, "c": 5},
		Members: []Member{
			{Name: "a", Health: Healthy, Current: 5, Ready: 5},
			{Name: "b", Health: Healthy, Current: 5, Ready: 3},                                            // 2 starting
			{Name: "c", Health: Healthy, Current: 5, Ready: 4, Unschedulable: 1, UnschedulableSince: now}, // 1 Pending
		}, Now: now}
	cases := []struct {
		replicas int32
		want     map[string]int32
	}{
		{14, map[string]int32{"a": 5, "b": 5, "c": 4}}, // the Pending pod first
		{12, map[string]int32{"a": 5, "b": 3, "c": 4}}, // then the not-ready ones
		{15, map[string]int32{"a": 5, "b": 5, "c": 5}}, // unchanged input, unchanged output
	}
	for _, tc := range cases {
		in := base
		in.Replicas = tc.replicas
		r := Plan(in)
		checkInvariants(t, in, r)
		wantTargets(t, r, tc.want)
	}
}

// karmada#2583/#5997 (overflow affinities, "cloud shrinks first"): with equal
// weights, the member with the lowest deletionCost shrinks first; within one
// cost, the member above its weighted share shrinks first.
func TestScaleDownFollowsDeletionCost(t *testing.T) {
	in := Input{UID: "cost", Replicas: 10,
		Placement: listed(pref("idc", cost(100)), pref("cloud", cost(0))),
		Members:   healthy("idc", "cloud")}
	r := Plan(in)
	wantTargets(t, r, map[string]int32{"idc": 5, "cloud": 5})
	in = settle(in, r)
	in.Replicas = 6
	r = Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"idc": 5, "cloud": 1})
	in = settle(in, r)
	in.Replicas = 4
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"idc": 4, "cloud": 0})
	// Growing again goes by weight, on top of what runs.
	in = settle(in, r)
	in.Replicas = 10
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"idc": 5, "cloud": 5})

	// Same cost: the over-weight member shrinks first.
	in = Input{UID: "w", Replicas: 8, Previous: map[string]int32{"a": 6, "b": 4},
		Members: []Member{{Name: "a", Health: Healthy, Current: 6, Ready: 6}, {Name: "b", Health: Healthy, Current: 4, Ready: 4}}}
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"a": 4, "b": 4})
}

// karmada#6511/#6424: a minimum per member (an HA floor).
func TestMinReplicasFloor(t *testing.T) {
	in := Input{UID: "floor", Replicas: 3, Members: healthy("a", "b", "c"),
		Placement: listed(pref("a", weight(10), minR(1)), pref("b", weight(1), minR(1)), pref("c", weight(1), minR(1)))}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 1, "b": 1, "c": 1}) // weights alone: 3/0/0
	in.Replicas = 12
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"a": 10, "b": 1, "c": 1})

	// A minimum is honoured even beyond the member's capacity (reported).
	in = Input{UID: "floor-cap", Replicas: 6, Members: []Member{
		{Name: "a", Health: Healthy, FreeCapacity: ptr[int32](1)}, {Name: "b", Health: Healthy}},
		Placement: listed(pref("a", minR(3)), pref("b"))}
	r = Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 3, "b": 3})
	if r.Targets[0].OverCapacity != 2 || r.Shortfall != 2 {
		t.Fatalf("over capacity %d shortfall %d, want 2 and 2", r.Targets[0].OverCapacity, r.Shortfall)
	}
}

// The written rule when minimums exceed replicas: replicas are divided in
// proportion to the minimums (Webster with the minimums as votes), ties to
// the higher weight and then the hash. Every member with a minimum gets a
// replica before any gets a second, as far as replicas allow.
func TestMinimumsExceedReplicas(t *testing.T) {
	cases := []struct {
		name     string
		replicas int32
		prefs    []v1alpha1.ClusterPreference
		want     map[string]int32
	}{
		{"equal minimums spread", 3, []v1alpha1.ClusterPreference{pref("a", minR(2)), pref("b", minR(2)), pref("c", minR(2))},
			map[string]int32{"a": 1, "b": 1, "c": 1}},
		{"proportional to minimums", 3, []v1alpha1.ClusterPreference{pref("a", minR(4)), pref("b", minR(2))},
			map[string]int32{"a": 2, "b": 1}},
		{"tie goes to the higher weight", 2, []v1alpha1.ClusterPreference{pref("a", minR(3)), pref("b", minR(1), weight(5)), pref("c", minR(1), weight(1))},
			map[string]int32{"a": 1, "b": 1, "c": 0}},
		{"weight 0 member still gets its minimum share", 2, []v1alpha1.ClusterPreference{pref("a", minR(2), weight(0)), pref("b", minR(2))},
			map[string]int32{"a": 1, "b": 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{UID: "mins", Replicas: tc.replicas, Placement: listed(tc.prefs...)}
			for _, p := range tc.prefs {
				in.Members = append(in.Members, Member{Name: p.Name, Health: Healthy})
			}
			r := Plan(in)
			checkInvariants(t, in, r)
			wantTargets(t, r, tc.want)
			if !r.MinimumsExceedReplicas || len(r.Notes) == 0 {
				t.Fatalf("MinimumsExceedReplicas %v notes %v, want reported", r.MinimumsExceedReplicas, r.Notes)
			}
		})
	}
}

// A listed member with weight 0 gets replicas only for its minimum, and its
// running pods beyond the minimum are not kept.
func TestWeightZeroOnlyMinimum(t *testing.T) {
	in := Input{UID: "w0", Replicas: 10, Previous: map[string]int32{"drain": 4, "b": 6},
		Placement: listed(pref("drain", weight(0), minR(1)), pref("b")),
		Members:   []Member{{Name: "drain", Health: Healthy, Current: 4, Ready: 4}, {Name: "b", Health: Healthy, Current: 6, Ready: 6}}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"drain": 1, "b": 9})

	// All weights 0 and no minimums: nothing can be placed, and it says so.
	in = Input{UID: "w00", Replicas: 3, Placement: listed(pref("a", weight(0)), pref("b", weight(0))), Members: healthy("a", "b")}
	r = Plan(in)
	checkInvariants(t, in, r)
	if r.Unplaced != 3 || r.Shortfall != 3 {
		t.Fatalf("unplaced %d shortfall %d, want 3 and 3", r.Unplaced, r.Shortfall)
	}
}

// Failover: unhealthy within the grace period keeps its target (karmada#1640:
// a briefly unhealthy member lost replicas on scale-up); past it, the target
// is 0 and the share moves to healthy members within max and capacity.
func TestFailover(t *testing.T) {
	in := Input{UID: "fo", Replicas: 9, Now: now, Members: healthy("a", "b", "c"),
		Placement: listed(pref("a", maxR(4)), pref("b"), pref("c"))}
	r := Plan(in)
	wantTargets(t, r, map[string]int32{"a": 3, "b": 3, "c": 3})
	in = settle(in, r)

	// c unreachable for 30s of a 60s grace, and a scale-up to 12 meanwhile.
	held := in
	held.Replicas = 12
	held.Members = append([]Member(nil), in.Members...)
	member(t, &held, "c").Health = Unhealthy
	member(t, &held, "c").UnhealthySince = now.Add(-30 * time.Second)
	r = Plan(held)
	checkInvariants(t, held, r)
	wantTargets(t, r, map[string]int32{"a": 4, "b": 5, "c": 3})
	if r.Targets[2].State != StateHeld || r.Note("c") == "" {
		t.Fatalf("c: state %v note %q, want Held with a note", r.Targets[2].State, r.Note("c"))
	}

	// Past the grace period: c goes to 0; a is capped at 4, b takes the rest.
	failed := held
	failed.Now = now.Add(31 * time.Second)
	r = Plan(failed)
	checkInvariants(t, failed, r)
	wantTargets(t, r, map[string]int32{"a": 4, "b": 8, "c": 0})
	if c := r.Changes[len(r.Changes)-1]; c.Cluster != "c" || c.Reason != ReasonFailover {
		t.Fatalf("changes %v, want c Failover", r.Changes)
	}

	// A custom grace period.
	failed.Failover.UnreachableGracePeriod = dur(5 * time.Minute)
	r = Plan(failed)
	if r.Target("c") != 3 {
		t.Fatalf("c=%d within a 5m grace, want 3", r.Target("c"))
	}
}

// karmada#7455: eviction with no room elsewhere silently deleted everything.
// Here the share goes beyond capacity (Pending, reported), never to nothing.
func TestFailoverWithoutRoom(t *testing.T) {
	in := Input{UID: "noroom", Replicas: 6, Now: now,
		Previous: map[string]int32{"a": 3, "b": 3},
		Members: []Member{
			{Name: "a", Health: Unhealthy, UnhealthySince: now.Add(-time.Hour)},
			{Name: "b", Health: Healthy, Current: 3, Ready: 3, FreeCapacity: ptr[int32](0)},
		}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 0, "b": 6})
	if r.Shortfall != 3 {
		t.Fatalf("shortfall %d, want 3", r.Shortfall)
	}
}

// kubefed#1369 and the karmada descheduler: pods unschedulable past the
// threshold count as missing capacity; before it they stay (moving Pending
// pods early fights the cluster-autoscaler, kubernetes#30999).
func TestUnschedulableThreshold(t *testing.T) {
	in := Input{UID: "us", Replicas: 10, Now: now, Previous: map[string]int32{"a": 5, "b": 5},
		Members: []Member{
			{Name: "a", Health: Healthy, Current: 5, Ready: 5},
			{Name: "b", Health: Healthy, Current: 5, Ready: 3, Unschedulable: 2, UnschedulableSince: now.Add(-30 * time.Second)},
		}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 5})

	in.Now = now.Add(40 * time.Second) // 70s > 60s threshold
	r = Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 7, "b": 3})
	if c := r.Changes[1]; c.Cluster != "b" || c.Reason != ReasonUnschedulable {
		t.Fatalf("changes %v, want b Unschedulable", r.Changes)
	}
}

// karmada#3272/#7662: do not disturb ready replicas. With moveBack Never a
// weight change moves nothing that runs; it only steers growth.
func TestWeightChangeKeepsReadyReplicas(t *testing.T) {
	in := Input{UID: "wc", Replicas: 10, Members: healthy("a", "b"), Placement: listed(pref("a"), pref("b"))}
	in = settle(in, Plan(in))
	in.Placement = listed(pref("a", weight(3)), pref("b", weight(1)))
	r := Plan(in)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 5})
	if len(r.Changes) != 0 {
		t.Fatalf("changes %v, want none", r.Changes)
	}
	in.Replicas = 14 // the delta goes where the weights are short: all to a.
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"a": 9, "b": 5})
}

// karmada#2769: after a member recovers, its stale pods plus the replacements
// elsewhere over-provisioned the workload. moveBack Never: the recovered
// member's target stays 0, so its stale pods are removed and the total stays
// at replicas; it gets only new growth (kubefed#763 is the opposite wish,
// served by OnRecovery below).
func TestRecoveryNeverDoesNotOverProvision(t *testing.T) {
	in := Input{UID: "rec", Replicas: 9, Now: now, Previous: map[string]int32{"a": 5, "b": 4, "c": 0},
		Members: []Member{
			{Name: "a", Health: Healthy, Current: 5, Ready: 5},
			{Name: "b", Health: Healthy, Current: 4, Ready: 4},
			{Name: "c", Health: Healthy, Current: 3, Ready: 3}, // stale pods from before the failover
		}}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 4, "c": 0})
	if r.Total() != 9 {
		t.Fatalf("total %d, want 9", r.Total())
	}
	in.Replicas = 12 // growth goes to the recovered member first
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 4, "c": 3})
}

// kubefed#763 / karmada#1189: replicas never moved back. moveBack OnRecovery
// returns them within the budget: the fleet never runs more than
// replicas+maxSurge targets and never removes a ready replica before its
// replacement is ready (maxUnavailable 0; karmada#3736).
func TestRecoveryOnRecoveryWithinBudget(t *testing.T) {
	in := Input{UID: "back", Replicas: 12, Now: now,
		Failover:   v1alpha1.Failover{MoveBack: v1alpha1.MoveBackOnRecovery},
		MoveBudget: budget(2, 0),
		Previous:   map[string]int32{"a": 6, "b": 6, "c": 0},
		Members: []Member{
			{Name: "a", Health: Healthy, Current: 6, Ready: 6},
			{Name: "b", Health: Healthy, Current: 6, Ready: 6},
			{Name: "c", Health: Healthy}, // recovered, empty
		}}
	for plan := 1; ; plan++ {
		r := Plan(in)
		checkInvariants(t, in, r)
		if r.Total() > 14 {
			t.Fatalf("plan %d: total %d above 12+2", plan, r.Total())
		}
		// Ready replicas kept by the plan never drop below replicas.
		var ready int32
		for _, tg := range r.Targets {
			ready += min(tg.Replicas, member(t, &in, tg.Cluster).Ready)
		}
		if ready < 12 {
			t.Fatalf("plan %d: %v keeps only %d ready", plan, r.TargetMap(), ready)
		}
		if r.MovesPending == 0 {
			wantTargets(t, r, map[string]int32{"a": 4, "b": 4, "c": 4})
			if r.Surge != 0 {
				t.Fatalf("settled with surge %d", r.Surge)
			}
			if plan > 4 {
				t.Fatalf("took %d plans, want at most 4 for 4 replicas at surge 2", plan)
			}
			break
		}
		if plan > 10 {
			t.Fatalf("no convergence: %v", r.TargetMap())
		}
		for _, c := range r.Changes {
			if c.Reason != ReasonRebalance && c.Reason != ReasonScaleDown {
				t.Fatalf("plan %d: unexpected change %v", plan, c)
			}
		}
		in = settle(in, r)
	}

	// With maxUnavailable 1 a ready replica may go before its replacement.
	in2 := in
	in2.MoveBudget = budget(1, 1)
	in2.Previous = map[string]int32{"a": 6, "b": 6, "c": 0}
	in2.Members = []Member{
		{Name: "a", Health: Healthy, Current: 6, Ready: 6},
		{Name: "b", Health: Healthy, Current: 6, Ready: 6},
		{Name: "c", Health: Healthy},
	}
	r := Plan(in2)
	checkInvariants(t, in2, r)
	if r.Total() != 13 || r.Target("c") != 2 {
		t.Fatalf("got %v, want c=2 (1 surge + 1 unavailable) and total 13", r.TargetMap())
	}
}

// A recovered member whose stale pods are still running and ready gets them
// back at once under OnRecovery (no new pods to wait for).
func TestRecoveryOnRecoveryReusesStalePods(t *testing.T) {
	in := Input{UID: "stale", Replicas: 9, Now: now,
		Failover: v1alpha1.Failover{MoveBack: v1alpha1.MoveBackOnRecovery},
		Previous: map[string]int32{"a": 5, "b": 4, "c": 0},
		Members: []Member{
			{Name: "a", Health: Healthy, Current: 5, Ready: 5},
			{Name: "b", Health: Healthy, Current: 4, Ready: 4},
			{Name: "c", Health: Healthy, Current: 3, Ready: 3},
		}}
	r := Plan(in) // default surge 25% of 9 = 3
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 4, "c": 3})
	in.Previous = r.TargetMap()
	r = Plan(in)
	wantTargets(t, r, map[string]int32{"a": 3, "b": 3, "c": 3})
	if r.MovesPending != 0 {
		t.Fatalf("moves pending %d", r.MovesPending)
	}
}

// Unknown health holds the previous target and gets nothing new.
func TestUnknownHealthHolds(t *testing.T) {
	in := Input{UID: "unk", Replicas: 9, Previous: map[string]int32{"a": 3, "b": 3, "c": 3},
		Members: []Member{{Name: "a", Health: Healthy, Current: 3, Ready: 3}, {Name: "b", Health: Healthy, Current: 3, Ready: 3}, {Name: "c"}}}
	in.Replicas = 12
	r := Plan(in)
	checkInvariants(t, in, r)
	if r.Target("c") != 3 || r.Target("a")+r.Target("b") != 9 {
		t.Fatalf("got %v, want c held at 3", r.TargetMap())
	}
	// Scale-down may lower a held target; nothing is deleted until it is seen.
	in.Replicas = 2
	r = Plan(in)
	checkInvariants(t, in, r)
	if r.Total() != 2 {
		t.Fatalf("got %v", r.TargetMap())
	}
}

func TestBudgetResolution(t *testing.T) {
	cases := []struct {
		b          v1alpha1.MoveBudget
		replicas   int32
		surge, max int32
	}{
		{v1alpha1.MoveBudget{}, 10, 3, 0}, // 25% of 10 rounded up; 0
		{v1alpha1.MoveBudget{}, 1, 1, 0},  // 25% of 1 rounds up to 1
		{v1alpha1.MoveBudget{}, 0, 1, 0},  // both 0: surge 1 so moves can progress
		{budget(0, 2), 10, 0, 2},          // absolute values
		{budget(5, 5), 10, 5, 5},          //
		{budget(0, 0), 10, 1, 0},          // both 0
	}
	for _, tc := range cases {
		s, u := ResolveBudget(tc.b, tc.replicas)
		if s != tc.surge || u != tc.max {
			t.Errorf("%+v of %d: got %d/%d want %d/%d", tc.b, tc.replicas, s, u, tc.surge, tc.max)
		}
	}
}
