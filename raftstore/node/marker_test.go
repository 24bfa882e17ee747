package node_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestStoreMarksOnlyWhenAllServersHaveIt: the expectations store marks
// its commands for a rule that changes what they do only while every
// server lists the rule's feature; with a server of an older version in
// the configuration the commands go unmarked and apply as that version
// would. Every replica ends in the same state. (Here, beside
// WithoutFeature, not in package expectations.)
//
//   - hold-reissued: Reserve and Settle are marked HoldReissued. Marked, a
//     reissued name whose create failed is held and handed out again;
//     unmarked, it is released.
//   - grant-on-targets: the shared SetTargets is marked Grant. Marked, a
//     new key's first names are granted and its first reservation commits
//     nothing; unmarked, nothing is granted and they take a Reserve.
func TestStoreMarksOnlyWhenAllServersHaveIt(t *testing.T) {
	tests := []struct {
		feature string
		run     func(t *testing.T, c *tu.Cluster, l *node.Node, marked bool)
	}{
		{node.FeatureHoldReissued, reissueAndFail},
		{node.FeatureGrantOnTargets, firstNames},
	}
	for _, tc := range tests {
		for _, older := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/older server %v", tc.feature, older), func(t *testing.T) {
				c := tu.NewCluster(t, 3, tu.StableTimers)
				c.StartAll()
				l := c.WaitVoters(3, 60*time.Second)
				waitAllHave(t, c.Live(), tc.feature)
				if older {
					withOlderFollower(t, c, l, tc.feature)
				}
				tc.run(t, c, l, !older)
			})
		}
	}
}

// withOlderFollower makes one follower answer as a version without
// feature and waits until the leader l knows.
func withOlderFollower(t *testing.T, c *tu.Cluster, l *node.Node, feature string) {
	t.Helper()
	for _, n := range c.Live() {
		if n != l {
			n.WithoutFeature(feature)
			break
		}
	}
	tu.Eventually(t, 30*time.Second, func() error {
		if l.CheckFeatures(); l.AllServersHave(feature) {
			return fmt.Errorf("the leader still sees %q everywhere", feature)
		}
		return nil
	})
}

// leaderCheck returns a check of an error from l's store calls in term:
// the test skips when the leadership moved under load, and fails on any
// other error.
func leaderCheck(t *testing.T, l *node.Node, term uint64) func(error) {
	return func(err error) {
		t.Helper()
		if err != nil && (l.LastLeaderTerm() != term || !l.IsLeader()) {
			t.Skipf("leadership moved during the test (term %d -> %d): %v", term, l.LastLeaderTerm(), err)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// sameReservations waits until every live replica has k's reservations as
// the leader l has them.
func sameReservations(t *testing.T, c *tu.Cluster, l *node.Node, k fsm.Key) {
	t.Helper()
	want := l.FSM().View(k).Reservations
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if diff := cmp.Diff(want, n.FSM().View(k).Reservations); diff != "" {
				return fmt.Errorf("%s differs from the leader (-leader +replica):\n%s", n.ServerID(), diff)
			}
		}
		return nil
	})
}

// reissueAndFail holds two reserved names (their pods never appeared),
// reserves them again, fails one's create and checks what the FSM did with
// it: held and handed out again when marked, released when not.
func reissueAndFail(t *testing.T, c *tu.Cluster, l *node.Node, marked bool) {
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, time.Minute), term)
	s := expectations.New(l, logr.Discard())
	check := leaderCheck(t, l, term)
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
	sameReservations(t, c, l, fsm.KeyOf(k))
}

// firstNames shares a new FRS's targets and takes its key's first names:
// granted and claimed without a Reserve when marked, reserved when not.
func firstNames(t *testing.T, c *tu.Cluster, l *node.Node, marked bool) {
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, time.Minute), term)
	s := expectations.New(l, logr.Discard())
	check := leaderCheck(t, l, term)
	_, err := s.Share(ctx, &fsm.SetTargets{Meta: l.Meta(), FRS: fsm.FRSRef{Namespace: k.Namespace, Name: k.Name}, Generation: 1, Targets: map[string]int32{k.Cluster: 2}})
	check(err)
	var granted int
	for _, r := range l.FSM().View(fsm.KeyOf(k)).Reservations {
		if r.Granted {
			granted++
		}
	}
	if want := map[bool]int{true: 2, false: 0}[marked]; granted != want {
		t.Fatalf("the SetTargets granted %d names, want %d", granted, want)
	}
	reserves := testutil.ToFloat64(metrics.RaftCommandsProposed.WithLabelValues(fsm.TypeReserve.String()))
	names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 2, Count: 2, Prefix: "web-"})
	check(err)
	got := testutil.ToFloat64(metrics.RaftCommandsProposed.WithLabelValues(fsm.TypeReserve.String())) - reserves
	if want := map[bool]float64{true: 0, false: 1}[marked]; len(names) != 2 || got != want {
		t.Fatalf("first names %v took %v Reserve commands, want 2 names and %v", names, got, want)
	}
	sameReservations(t, c, l, fsm.KeyOf(k))
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
