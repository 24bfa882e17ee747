package node_test

import (
	"fmt"
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

// TestStoreMarksGrantOnlyWhenAllServersHaveIt: the expectations store
// marks the SetTargets it shares for the grant-on-targets rule only while
// every server lists the feature. Marked, a new key's first names are
// granted and its first reservation commits nothing; with a server of an
// older version in the configuration, the SetTargets goes unmarked,
// nothing is granted and the first names take a Reserve, as before. Every
// replica ends in the same state. (Here, beside WithoutFeature.)
func TestStoreMarksGrantOnlyWhenAllServersHaveIt(t *testing.T) {
	for _, older := range []bool{false, true} {
		t.Run(fmt.Sprintf("older server %v", older), func(t *testing.T) {
			c := tu.NewCluster(t, 3, tu.StableTimers)
			c.StartAll()
			l := c.WaitVoters(3, 60*time.Second)
			waitAllHave(t, c.Live(), node.FeatureGrantOnTargets)
			if older {
				for _, n := range c.Live() {
					if n != l {
						n.WithoutFeature(node.FeatureGrantOnTargets)
						break
					}
				}
				tu.Eventually(t, 30*time.Second, func() error {
					if l.CheckFeatures(); l.AllServersHave(node.FeatureGrantOnTargets) {
						return fmt.Errorf("the leader still sees %q everywhere", node.FeatureGrantOnTargets)
					}
					return nil
				})
			}
			firstNames(t, c, l, !older)
		})
	}
}

// firstNames shares a new FRS's targets and takes its key's first names:
// granted and claimed without a Reserve when marked, reserved when not.
func firstNames(t *testing.T, c *tu.Cluster, l *node.Node, marked bool) {
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
