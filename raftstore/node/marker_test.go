package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestStoreMarksHoldReissuedOnlyWhenAllServersHaveIt: the expectations
// store marks its Reserve and Settle commands HoldReissued only while every
// server lists the feature. Marked, a reissued name whose create failed is
// held and handed out again; with a server of an older version in the
// configuration, the commands go unmarked and the name is released, as
// that version would apply it. Every replica ends in the same state.
// (Here, beside WithoutFeature, not in package expectations.)
func TestStoreMarksHoldReissuedOnlyWhenAllServersHaveIt(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older server %v", older), func(t *testing.T) {
			c := tu.NewCluster(t, 3, tu.StableTimers)
			c.StartAll()
			l := c.WaitVoters(3, 60*time.Second)
			waitAllHave(t, c.Live(), node.FeatureHoldReissued)
			if older {
				for _, n := range c.Live() {
					if n != l {
						n.WithoutFeature(node.FeatureHoldReissued)
						break
					}
				}
				tu.Eventually(t, 30*time.Second, func() error {
					if l.CheckFeatures(); l.AllServersHave(node.FeatureHoldReissued) {
						return fmt.Errorf("the leader still sees %q everywhere", node.FeatureHoldReissued)
					}
					return nil
				})
			}
			reissueAndFail(t, c, l, !older)
		})
	}
}

// reissueAndFail holds two reserved names (their pods never appeared),
// reserves them again, fails one's create and checks what the FSM did with
// it: held and handed out again when marked, released when not.
func reissueAndFail(t *testing.T, c *tu.Cluster, l *node.Node, marked bool) {
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, time.Minute), term)
	s := expectations.New(l, logr.Discard())
	check := func(err error) {
		t.Helper()
		if err != nil && (l.LastLeaderTerm() != term || !l.IsLeader()) {
			t.Skipf("leadership moved during the test (term %d -> %d): %v", term, l.LastLeaderTerm(), err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	check(l.SetTargets(ctx, fsm.FRSRef{Namespace: k.Namespace, Name: k.Name}, 1, map[string]int32{k.Cluster: 2}))
	names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 2, Count: 2, Prefix: "web-"})
	check(err)
	// Neither pod appeared: this term's reconcile holds both names.
	st, err := s.ReconcileReservations(ctx, k, nil)
	check(err)
	if len(st.Held) != 2 {
		t.Fatalf("reconcile held %v, want both names", st.Held)
	}
	again, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 2, Count: 2, Prefix: "web-"})
	check(err)
	if !sameSet(again, names) {
		t.Fatalf("reserve gave %v, want the held names %v", again, names)
	}
	if r := l.FSM().View(fsm.KeyOf(k)).Reservations[again[0]]; r.Reissued != marked {
		t.Fatalf("reissued name: Reissued %v, want %v", r.Reissued, marked)
	}
	// One create fails before it is sent; the other's pod appears.
	s.CreationFailed(k, again[0])
	s.CreationObserved(k, again[1])
	check(s.Flush(ctx))
	retry, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 2, Active: 1, Count: 1, Prefix: "web-"})
	check(err)
	if reused := len(retry) == 1 && retry[0] == again[0]; reused != marked {
		t.Fatalf("after the failed create of %s the next reserve gave %v: reused %v, want %v", again[0], retry, reused, marked)
	}
	if !marked && slices.Contains(names, retry[0]) {
		t.Fatalf("the released name's slot got %v, want a fresh name", retry)
	}
	want := l.FSM().View(fsm.KeyOf(k)).Reservations
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if diff := cmp.Diff(want, n.FSM().View(fsm.KeyOf(k)).Reservations); diff != "" {
				return fmt.Errorf("%s differs from the leader (-leader +replica):\n%s", n.ServerID(), diff)
			}
		}
		return nil
	})
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
