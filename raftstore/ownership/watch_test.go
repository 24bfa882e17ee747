package ownership

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
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
	want := []Candidate{{"a", true}, {"b", true}, {"c", false}}
	if diff := cmp.Diff(want, w.Candidates([]string{"a", "b", "c"}, owners)); diff != "" {
		t.Errorf("Candidates at election (-want +got):\n%s", diff)
	}
	if !w.Handover(Move{Member: "m1", From: "b", To: "a"}) || w.Handover(Move{Member: "m2", To: "a"}) {
		t.Errorf("Handover: want a wait only when the previous owner may hold a lease")
	}
	clk.SetTime(clk.Now().Add(4 * time.Second))
	w.Observe(map[string]uint64{"a": 2})
	want = []Candidate{{"a", true}, {"b", false}, {"c", false}}
	if diff := cmp.Diff(want, w.Candidates([]string{"a", "b", "c"}, owners)); diff != "" {
		t.Errorf("Candidates after the grace (-want +got):\n%s", diff)
	}
	if w.Handover(Move{Member: "m1", From: "b", To: "a"}) {
		t.Errorf("Handover from a lapsed owner: want no wait")
	}
}
