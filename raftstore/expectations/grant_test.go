package expectations_test

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/metrics"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

var webRef = fsm.FRSRef{Namespace: web.Namespace, Name: web.Name}

// grantedNames lists web's granted (not held) names in n's FSM, oldest first.
func grantedNames(n *node.Node) []string {
	var rs []fsm.Reservation
	for _, r := range n.FSM().View(fsm.KeyOf(web)).Reservations {
		if r.Granted && !r.Held {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b fsm.Reservation) int { return int(a.Seq - b.Seq) })
	out := make([]string, 0, len(rs))
	for _, r := range rs {
		out = append(out, r.Name)
	}
	return out
}

func reservesProposed() float64 {
	return testutil.ToFloat64(metrics.RaftCommandsProposed.WithLabelValues(fsm.TypeReserve.String()))
}

// grantOn shares web's first targets (target in m1) through s on l, which
// every server lets mark them, and returns the granted names.
func grantOn(t *testing.T, c *tu.Cluster, l *node.Node, s *expectations.Store, target int32) []string {
	t.Helper()
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if !n.AllServersHave(node.FeatureGrantOnTargets) {
				return errors.New("the grant feature is not known everywhere yet")
			}
		}
		return nil
	})
	ctx := tu.Ctx(t, 30*time.Second)
	term := l.LastLeaderTerm()
	if _, err := s.Share(ctx, &fsm.SetTargets{Meta: l.Meta(), FRS: webRef, Generation: 1, Targets: map[string]int32{web.Cluster: target}}); err != nil {
		skipIfLeadershipMoved(t, l, term)
		t.Fatal(err)
	}
	names := grantedNames(l)
	if len(names) != int(target) {
		skipIfLeadershipMoved(t, l, term)
		t.Fatalf("the SetTargets granted %v, want %d names", names, target)
	}
	return names
}

// TestFirstCreatesTakeGrantedNames: a new key's first sync gets the names
// its SetTargets granted without any raft entry (no Reserve is proposed,
// and its takeover reconcile has nothing to settle); they count as
// outstanding until their pods are seen; a second sync that overlaps the
// first reserves through raft and gets the same names again, never fresh
// ones.
func TestFirstCreatesTakeGrantedNames(t *testing.T) {
	c, l := threeVoters(t)
	s := expectations.New(l, logr.Discard())
	granted := grantOn(t, c, l, s, 3)
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 30*time.Second), term)
	if !s.Satisfied(web) {
		t.Fatal("granted names hold up the key before anyone claimed them")
	}
	other := web
	other.Name = "other"
	if !s.Quiet(ctx, web) || !s.Quiet(ctx, other) {
		t.Fatal("unclaimed grants of this term, or no expectations at all, are not quiet")
	}
	if s.Quiet(ctrlexp.WithFence(ctx, ctrlexp.Fence{Owner: "r1", Epoch: 1}), web) {
		t.Fatal("grants are quiet under an owner fence, which holds them instead")
	}
	before, reserves := l.Raft().LastIndex(), reservesProposed()
	if st, err := s.ReconcileReservations(ctx, web, nil); err != nil || len(st.Completed)+len(st.Held) != 0 {
		skipIfLeadershipMoved(t, l, term)
		t.Fatalf("takeover reconcile of unclaimed grants: %+v %v, want nothing", st, err)
	}
	// One pod already counts (say an orphan to adopt): bounded as a
	// Reserve is, the claim takes two names.
	names, err := s.ExpectCreations(ctx, web, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 3, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, l, term)
		t.Fatal(err)
	}
	if diff := cmp.Diff(granted[:2], names); diff != "" {
		t.Fatalf("first sync's names (-granted +got):\n%s", diff)
	}
	if got := l.Raft().LastIndex() - before; got != 0 {
		t.Fatalf("the reconcile and the first creates took %d raft entries, want none", got)
	}
	if got := reservesProposed() - reserves; got != 0 {
		t.Fatalf("%v Reserve commands proposed, want none", got)
	}
	if s.Satisfied(web) {
		t.Fatal("claimed names do not count as outstanding")
	}
	if s.Quiet(ctx, web) {
		t.Fatal("claimed names are quiet: a takeover would skip settling them")
	}
	// An overlapping sync finds the claim unsettled and reserves: the
	// FSM hands out the granted names again, no fresh one.
	again, err := s.ExpectCreations(ctx, web, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 3, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, l, term)
		t.Fatal(err)
	}
	if diff := cmp.Diff(granted[:2], again); diff != "" || reservesProposed()-reserves != 1 {
		t.Fatalf("overlapping sync (reserves %v) got (-granted +got):\n%s", reservesProposed()-reserves, diff)
	}
	for _, n := range names {
		s.CreationObserved(web, n)
	}
	if !s.Satisfied(web) {
		t.Fatal("not satisfied once every pod was seen")
	}
}

// TestGrantedNamesAfterFailover: the leader that granted and claimed the
// names dies after creating one pod; the next leader's takeover holds the
// other granted names and its Reserve hands out exactly those, never a
// fresh name beside them.
func TestGrantedNamesAfterFailover(t *testing.T) {
	c, old := threeVoters(t)
	s := expectations.New(old, logr.Discard())
	granted := grantOn(t, c, old, s, 4)
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 2*time.Minute), old.LastLeaderTerm())
	names, err := s.ExpectCreations(ctx, web, ctrlexp.CreateIntent{Target: 4, Count: 4, Prefix: "web-"})
	if err != nil || !slices.Equal(names, granted) {
		skipIfLeadershipMoved(t, old, old.LastLeaderTerm())
		t.Fatalf("claim: %v %v, want %v", names, err, granted)
	}
	c.Kill(c.Index(old)) // it created only the first pod
	next := c.WaitLeader(30*time.Second, old)
	term := next.LastLeaderTerm()
	ctx = ctrlexp.WithTerm(tu.Ctx(t, time.Minute), term)
	s2 := expectations.New(next, logr.Discard())
	tu.Eventually(t, 30*time.Second, func() error {
		if keys := s2.KeysToReconcile(web.Cluster); len(keys) != 1 || keys[0] != web {
			return errors.New("the granted names are not listed for the takeover")
		}
		return nil
	})
	if s2.Quiet(ctx, web) {
		t.Fatal("an earlier term's claimed grants are quiet for the new leader")
	}
	st, err := s2.ReconcileReservations(ctx, web, map[string]ctrlexp.ListedPod{names[0]: {UID: "a"}})
	if err != nil {
		skipIfLeadershipMoved(t, next, term)
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{names[0]}, st.Completed); diff != "" || len(st.Held) != 3 {
		t.Fatalf("takeover: held %v, completed (-want +got):\n%s", st.Held, diff)
	}
	// Asked for more than the missing slots: only the granted names come.
	again, err := s2.ExpectCreations(ctx, web, ctrlexp.CreateIntent{Target: 4, Active: 1, Count: 10, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, next, term)
		t.Fatal(err)
	}
	if diff := cmp.Diff(names[1:], again); diff != "" {
		t.Fatalf("the new leader's names (-granted +got):\n%s", diff)
	}
	for _, n := range again {
		if r := next.FSM().View(fsm.KeyOf(web)).Reservations[n]; r.Granted || r.Held || !r.Reissued || r.Term != term {
			t.Fatalf("reissued %+v: want reserved for term %d and marked reissued", r, term)
		}
	}
	if more, err := s2.ExpectCreations(ctx, web, ctrlexp.CreateIntent{Target: 4, Active: 1, Count: 1, Prefix: "web-"}); !errors.Is(err, fsm.ErrRefused) {
		skipIfLeadershipMoved(t, next, term)
		t.Fatalf("a fresh name beside the granted ones: %v %v, want ErrRefused", more, err)
	}
}
