package ownership

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"
)

// TestWatch: the leader counts an owner live until lease plus margin has
// passed on its own clock since it saw the owner's latest renewal, and a
// new leader starts that clock at its election.
func TestWatch(t *testing.T) {
	const lease, margin = 3 * time.Second, time.Second
	type step struct {
		advance  time.Duration
		renewals map[string]uint64
		want     map[string]bool // Live
	}
	tests := []struct {
		name  string
		steps []step
	}{
		{
			name: "a new leader moves nothing before lease plus margin",
			steps: []step{
				{0, map[string]uint64{"a": 5}, map[string]bool{"a": true, "b": true}},
				{lease + margin - time.Millisecond, nil, map[string]bool{"a": true, "b": true}},
				{time.Millisecond, nil, map[string]bool{"a": false, "b": false}},
			},
		},
		{
			name: "a renewal seen restarts the owner's clock; the same index does not",
			steps: []step{
				{2 * time.Second, map[string]uint64{"a": 5, "b": 6}, map[string]bool{"a": true, "b": true}},
				{3 * time.Second, map[string]uint64{"a": 9, "b": 6}, map[string]bool{"a": true, "b": true}},
				{time.Second, map[string]uint64{"a": 9, "b": 6}, map[string]bool{"a": true, "b": false}},
				{lease + margin - time.Second, nil, map[string]bool{"a": false, "b": false}},
			},
		},
		{
			name: "an owner that stopped renewing lapses exactly at lease plus margin",
			steps: []step{
				{10 * time.Second, map[string]uint64{"a": 1}, map[string]bool{"a": true}},
				{lease + margin - time.Nanosecond, map[string]uint64{"a": 1}, map[string]bool{"a": true}},
				{time.Nanosecond, map[string]uint64{"a": 1}, map[string]bool{"a": false}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			w := NewWatch(clk, lease, margin)
			for i, s := range tc.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				w.Observe(s.renewals)
				got := map[string]bool{}
				for o := range s.want {
					got[o] = w.Live(o)
				}
				if diff := cmp.Diff(s.want, got); diff != "" {
					t.Fatalf("step %d: Live (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestWatchCandidates: only replicas seen renewing get members; a current
// owner not seen yet keeps its members through the grace; Handover asks
// the new owner to wait while the previous one may still hold a lease.
func TestWatchCandidates(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	w := NewWatch(clk, 3*time.Second, time.Second)
	// What the first Observe finds was committed before the election: it
	// does not make c a candidate; a renewal after it makes a one.
	w.Observe(map[string]uint64{"c": 1})
	w.Observe(map[string]uint64{"a": 1})
	owners := map[string]string{"m1": "b"}
	want := []Candidate{{"a", true, false}, {"b", true, false}, {"c", false, false}}
	if diff := cmp.Diff(want, w.Candidates([]string{"a", "b", "c"}, owners)); diff != "" {
		t.Errorf("Candidates at election (-want +got):\n%s", diff)
	}
	if !w.Handover(Move{Member: "m1", From: "b", To: "a"}) || w.Handover(Move{Member: "m2", To: "a"}) {
		t.Errorf("Handover: want a wait only when the previous owner may hold a lease")
	}
	clk.SetTime(clk.Now().Add(4 * time.Second))
	w.Observe(map[string]uint64{"a": 2})
	want = []Candidate{{"a", true, false}, {"b", false, false}, {"c", false, false}}
	if diff := cmp.Diff(want, w.Candidates([]string{"a", "b", "c"}, owners)); diff != "" {
		t.Errorf("Candidates after the grace (-want +got):\n%s", diff)
	}
	if w.Handover(Move{Member: "m1", From: "b", To: "a"}) {
		t.Errorf("Handover from a lapsed owner: want no wait")
	}
}

// TestWatchStable: an owner is stable once this leader has seen it renew
// without a lapse for the damping period; a lapse (no renewal seen within
// lease plus margin) starts the count again, and renewals committed before
// the election do not count.
func TestWatchStable(t *testing.T) {
	const lease, margin, damping = 3 * time.Second, time.Second, 6 * time.Second
	type step struct {
		advance  time.Duration
		renewals map[string]uint64
		want     map[string]bool // Stable
	}
	tests := []struct {
		name    string
		damping time.Duration // 0: the default, twice the lease
		steps   []step
	}{
		{
			name: "renewing without a lapse: stable after the damping period",
			steps: []step{
				{0, map[string]uint64{"a": 1}, map[string]bool{"a": false}}, // before the election
				{time.Second, map[string]uint64{"a": 2}, map[string]bool{"a": false}},
				{3 * time.Second, map[string]uint64{"a": 3}, map[string]bool{"a": false}},
				{3*time.Second - time.Nanosecond, map[string]uint64{"a": 4}, map[string]bool{"a": false}},
				{time.Nanosecond, nil, map[string]bool{"a": true}},
				{lease, map[string]uint64{"a": 5}, map[string]bool{"a": true}},
			},
		},
		{
			name: "a lapse starts the count again",
			steps: []step{
				{0, nil, nil},
				{0, map[string]uint64{"a": 1}, map[string]bool{"a": false}},
				{damping, map[string]uint64{"a": 2}, map[string]bool{"a": false}}, // 6s since the last: lapsed
				{lease, map[string]uint64{"a": 3}, map[string]bool{"a": false}},
				{damping - lease, map[string]uint64{"a": 4}, map[string]bool{"a": true}},
				{lease + margin, nil, map[string]bool{"a": false}}, // not live, so not stable
			},
		},
		{
			name: "a custom damping period", damping: time.Second,
			steps: []step{
				{0, nil, nil},
				{0, map[string]uint64{"a": 1}, map[string]bool{"a": false, "b": false}},
				{time.Second, map[string]uint64{"a": 2}, map[string]bool{"a": true, "b": false}},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
			w := NewWatch(clk, lease, margin).WithDamping(tc.damping)
			for i, s := range tc.steps {
				clk.SetTime(clk.Now().Add(s.advance))
				w.Observe(s.renewals)
				got := map[string]bool{}
				for o := range s.want {
					got[o] = w.Stable(o)
				}
				if diff := cmp.Diff(s.want, got, cmpopts.EquateEmpty()); diff != "" {
					t.Fatalf("step %d: Stable (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// TestReturningReplicaDamped: the leader's loop of Watch and Assign on a
// fake clock. Replica c stops renewing; once its lease plus margin has
// passed its members go to a and b at once. When c renews again it gets
// no member moved back before it has renewed for the damping period, and
// its share after it.
func TestReturningReplicaDamped(t *testing.T) {
	const lease, margin, tick = 3 * time.Second, time.Second, time.Second
	members := []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	w := NewWatch(clk, lease, margin)
	current := map[string]string{}
	renewals := map[string]uint64{}
	var index uint64
	// look renews the replicas in renewing, advances the clock one tick
	// and applies the plan; it returns the moves.
	look := func(renewing ...string) []Move {
		for _, id := range renewing {
			index++
			renewals[id] = index
		}
		clk.SetTime(clk.Now().Add(tick))
		w.Observe(renewals)
		plan := Assign(members, w.Candidates([]string{"a", "b", "c"}, current), current)
		current = plan.Owners
		return plan.Moves
	}
	count := func(id string) (n int) {
		for _, o := range current {
			if o == id {
				n++
			}
		}
		return n
	}
	w.Observe(renewals) // the election
	if moves := look("a", "b", "c"); len(moves) != 6 || count("c") != 2 {
		t.Fatalf("a fresh start: moves %v, owners %v; want every member assigned at once, two each", moves, current)
	}
	// c stops renewing: its two members go once lease plus margin passed.
	var elapsed time.Duration
	for count("c") > 0 {
		look("a", "b")
		if elapsed += tick; elapsed > lease+margin+tick {
			t.Fatalf("c's members still with it %v after it stopped renewing: %v", elapsed, current)
		}
	}
	if elapsed < lease+margin {
		t.Fatalf("c's members moved %v after its last renewal, before lease plus margin", elapsed)
	}
	// c comes back: elapsed counts from the look that first sees it renew.
	for elapsed = 0; elapsed < 2*lease; elapsed += tick {
		if moves := look("a", "b", "c"); len(moves) != 0 {
			t.Fatalf("%v after c came back (damping %v): moves %v", elapsed, 2*lease, moves)
		}
	}
	moves := look("a", "b", "c")
	if len(moves) != 2 || count("c") != 2 || moves[0].To != "c" || moves[1].To != "c" {
		t.Fatalf("after the damping period: moves %v, owners %v; want two members moved to c", moves, current)
	}
}
