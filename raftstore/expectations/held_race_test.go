package expectations_test

import (
	"testing"
	"time"

	"github.com/go-logr/logr"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestHeldPodSeenAfterListIsNotReplaced: creates whose outcome is unknown
// hold their names; their pods land after the engine listed its pods but
// before it reserves again. The next reservation must account for them
// (hand the names out again or leave their slots alone), never grant fresh
// names for their slots: the chaos suite's leadership-transfer round ran 106
// pods for a target of 100 this way. Both ways the observation can reach the
// reservation are covered: carried by it, or committed by a flush first.
func TestHeldPodSeenAfterListIsNotReplaced(t *testing.T) {
	for _, flush := range []bool{false, true} {
		name := map[bool]string{false: "carried", true: "flushed"}[flush]
		t.Run(name, func(t *testing.T) {
			c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) { cfg.ObservationFlushInterval = time.Hour })
			c.StartAll()
			n := c.WaitLeader(10 * time.Second)
			s := expectations.New(n, logr.Discard())
			ctx := ctrlexp.WithTerm(tu.Ctx(t, 10*time.Second), leaderTerm(t, n))
			const target = 20
			k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
			if err := n.SetTargets(ctx, fsm.FRSRef{Namespace: "ns", Name: "web"}, 1, map[string]int32{"m1": target}); err != nil {
				t.Fatal(err)
			}
			pods := map[string]bool{} // the member's pods
			names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: target, Active: 0, Count: target, Prefix: "web-"})
			if err != nil || len(names) != target {
				t.Fatalf("got %d names, %v", len(names), err)
			}
			// Slow start: 7 created and seen, a batch of 8 times out
			// (unknown), 5 never sent.
			for _, nm := range names[:7] {
				pods[nm] = true
				s.CreationObserved(k, nm)
			}
			for _, nm := range names[7:15] {
				s.CreationUnknown(k, nm)
			}
			for _, nm := range names[15:] {
				s.CreationFailed(k, nm)
			}
			if !s.Satisfied(k) {
				t.Fatal("held names hold up the key")
			}
			// The next sync lists 7 pods; right after, the timed-out creates
			// land and the informer reports them.
			active := len(pods)
			for _, nm := range names[7:15] {
				pods[nm] = true
				s.CreationObserved(k, nm)
			}
			if flush {
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
			more, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: target, Active: active, Count: target - active, Prefix: "web-"})
			if err != nil {
				t.Fatal(err)
			}
			for _, nm := range more {
				pods[nm] = true // created, or AlreadyExists
			}
			if len(pods) > target {
				t.Fatalf("%d pods for a target of %d: the reservation granted %d names after %d held pods landed", len(pods), target, len(more), 8)
			}
		})
	}
}

// TestFailedReissueOfUnknownCreateIsHeld: one leader, one term, a live
// leader context. A create times out (outcome unknown: the name is held),
// the next sync hands the name out again and that create is refused or
// never sent (a 4xx, the write fence's ErrNotSent after a lease lapse, a
// slow-start skip). The first create can still land, so the name must stay
// for the slot: released (as by commands without fsm.Meta.HoldReissued, and
// on versions before it), the sync after grants a fresh name and the late
// create adds a second pod for the slot.
func TestFailedReissueOfUnknownCreateIsHeld(t *testing.T) {
	c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) { cfg.ObservationFlushInterval = time.Hour })
	c.StartAll()
	n := c.WaitLeader(10 * time.Second)
	s := expectations.New(n, logr.Discard())
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 30*time.Second), leaderTerm(t, n))
	const target = 2
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	if err := n.SetTargets(ctx, fsm.FRSRef{Namespace: "ns", Name: "web"}, 1, map[string]int32{"m1": target}); err != nil {
		t.Fatal(err)
	}
	pods := map[string]bool{} // the member's pods
	reserve := func(count int) []string {
		t.Helper()
		names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: target, Active: len(pods), Count: count, Prefix: "web-"})
		if err != nil {
			t.Fatal(err)
		}
		return names
	}
	first := reserve(target)
	pods[first[0]] = true
	s.CreationObserved(k, first[0])
	late := first[1]
	s.CreationUnknown(k, late) // timed out; it may still land
	if again := reserve(1); len(again) != 1 || again[0] != late {
		t.Fatalf("the next sync got %v, want the held name %s again", again, late)
	}
	s.CreationFailed(k, late) // this time refused, or never sent
	retry := reserve(1)
	if len(retry) != 1 {
		t.Fatalf("the sync after got %v, want one name", retry)
	}
	pods[retry[0]] = true // created, or AlreadyExists
	pods[late] = true     // the first create lands
	if len(pods) > target {
		t.Fatalf("%d pods for a target of %d: after the failed reissue of %s the slot got the fresh name %s", len(pods), target, late, retry[0])
	}
}
