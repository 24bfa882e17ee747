package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// shardedVoters is threeVoters once every replica knows that every server
// applies member ownership; it returns the leader and the two followers.
func shardedVoters(t *testing.T) (leader, a, b *node.Node) {
	t.Helper()
	c, l := threeVoters(t)
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if !n.AllServersHave(node.FeatureOwnership) {
				return fmt.Errorf("%s does not know yet that every server applies ownership", n.ServerID())
			}
		}
		return nil
	})
	for _, n := range c.Live() {
		switch {
		case n == l:
		case a == nil:
			a = n
		default:
			b = n
		}
	}
	return l, a, b
}

// assignMember gives member m1 to owner on the leader l and returns the
// fence of the new ownership, once owner's FSM has applied it.
func assignMember(t *testing.T, l, owner *node.Node, from string) ctrlexp.Fence {
	t.Helper()
	_, term, ok := l.Leading()
	if !ok {
		t.Skip("leadership moved during the test; nothing to check")
	}
	m := l.Meta()
	m.Term = term
	set := fsm.OwnerAssignment{Member: web.Cluster, Owner: owner.ServerID(), From: from, FromRenewal: l.FSM().Renewals()[from].Index}
	if _, err := l.Apply(tu.Ctx(t, 30*time.Second), &fsm.AssignOwners{Meta: m, Set: []fsm.OwnerAssignment{set}}); err != nil {
		skipIfLeadershipMoved(t, l, term)
		t.Fatal(err)
	}
	own, _ := l.FSM().Owner(web.Cluster)
	waitApplied(t, owner, l.Raft().AppliedIndex())
	return ctrlexp.Fence{Owner: own.Owner, Epoch: own.Epoch}
}

// waitApplied waits until n's FSM has applied index.
func waitApplied(t *testing.T, n *node.Node, index uint64) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, func() error {
		if got := n.Raft().AppliedIndex(); got < index {
			return fmt.Errorf("%s applied %d, want %d", n.ServerID(), got, index)
		}
		return nil
	})
}

// TestOwnerFencedStore: a follower that owns a member reserves, settles,
// deletes and reconciles under its fence (no leader term); after the
// member moves, the old owner's fence is refused as a stale term is
// (fsm.ErrStale: the engine's sync stops and creates nothing), its release
// of a name changes nothing, and the new owner's first reservation hands
// out the names the old owner held before any fresh one.
func TestOwnerFencedStore(t *testing.T) {
	l, a, b := shardedVoters(t)
	ctx := tu.Ctx(t, 2*time.Minute)
	setTarget(t, ctx, l, 3)
	k := fsm.KeyOf(web)
	fa := assignMember(t, l, a, "")
	term := l.LastLeaderTerm()
	sa := expectations.New(a, logr.Discard())
	actx := ctrlexp.WithFence(ctx, fa)

	names, err := sa.ExpectCreations(actx, web, ctrlexp.CreateIntent{Target: 3, Count: 3, Prefix: "web-"})
	if err != nil || len(names) != 3 {
		t.Fatalf("fenced reserve on the owning follower: %v %v", names, err)
	}
	if r := l.FSM().View(k).Reservations[names[0]]; r.Epoch != fa.Epoch {
		t.Fatalf("reservation %+v, want epoch %d", r, fa.Epoch)
	}
	// The owner's observations settle what it reserved: one pod seen, one
	// create refused (its name released under the fence).
	sa.CreationObserved(web, names[0])
	sa.CreationFailed(web, names[1])
	if err := sa.ExpectDeletions(actx, web, []ctrlexp.PodRef{{Name: "old-pod", UID: "u-old"}}); err != nil {
		t.Fatalf("fenced expect deletes: %v", err)
	}
	if err := sa.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	v := l.FSM().View(k)
	if _, ok := v.Reservations[names[1]]; ok || len(v.Reservations) != 1 || len(v.Deletes) != 1 {
		// A deposed l may not have applied the settle yet.
		skipIfLeadershipMoved(t, l, term)
		t.Fatalf("after the owner's settlements: %+v", v)
	}
	// Its takeover reconcile: the pending delete's pod is gone, names[2]
	// has no pod and is held.
	st, err := sa.ReconcileReservations(actx, web, map[string]ctrlexp.ListedPod{names[0]: {UID: "u0"}})
	if err != nil || !slices.Equal(st.Held, names[2:]) {
		t.Fatalf("fenced reconcile: %+v %v", st, err)
	}
	// The held name and a fresh one, under the fence.
	again, err := sa.ExpectCreations(actx, web, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 2, Prefix: "web-"})
	if err != nil || len(again) != 2 || again[0] != names[2] {
		t.Fatalf("fenced reserve after the reconcile: %v %v", again, err)
	}

	// The member moves to b: everything a reserved is held for b.
	fb := assignMember(t, l, b, a.ServerID())
	if fb.Epoch <= fa.Epoch {
		t.Fatalf("epoch %d after %d", fb.Epoch, fa.Epoch)
	}
	waitApplied(t, a, l.Raft().AppliedIndex())
	if _, err := sa.ExpectCreations(actx, web, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 1, Prefix: "web-"}); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("old owner's reserve: %v, want %v", err, fsm.ErrStale)
	}
	if err := sa.ExpectDeletions(actx, web, []ctrlexp.PodRef{{Name: names[0], UID: "u0"}}); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("old owner's expect deletes: %v, want %v", err, fsm.ErrStale)
	}
	if _, err := sa.ReconcileReservations(actx, web, nil); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("old owner's reconcile: %v, want %v", err, fsm.ErrStale)
	}
	// Its late release of a name it reserved, and its forget of the key,
	// change nothing.
	before := l.FSM().View(k)
	sa.CreationFailed(web, again[1])
	sa.Delete(web)
	if err := sa.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	waitApplied(t, l, a.Raft().LastIndex())
	if after := l.FSM().View(k); len(after.Reservations) != len(before.Reservations) || len(after.Reservations) != 2 {
		t.Fatalf("the old owner changed the reservations: %+v -> %+v", before, after)
	}
	// The new owner gets the held names first.
	sb := expectations.New(b, logr.Discard())
	got, err := sb.ExpectCreations(ctrlexp.WithFence(ctx, fb), web, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 2, Prefix: "web-"})
	if err != nil || !sameSet(got, again) {
		t.Fatalf("new owner's reserve: %v %v, want the held %v", got, err, again)
	}
}

// TestUnfencedStoreUnchanged: without a fence in the context the store's
// commands carry none (the term applies as before), and a follower's
// store still records nothing.
func TestUnfencedStoreUnchanged(t *testing.T) {
	l, a, _ := shardedVoters(t)
	ctx := tu.Ctx(t, time.Minute)
	setTarget(t, ctx, l, 2)
	s := expectations.New(l, logr.Discard())
	term := l.LastLeaderTerm()
	names, err := s.ExpectCreations(ctrlexp.WithTerm(ctx, term), web, ctrlexp.CreateIntent{Target: 2, Count: 1, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, l, term)
	}
	if err != nil || len(names) != 1 {
		t.Fatalf("%v %v", names, err)
	}
	if r := l.FSM().View(fsm.KeyOf(web)).Reservations[names[0]]; r.Epoch != 0 || r.Term == 0 {
		t.Fatalf("unfenced reservation %+v", r)
	}
	fs := expectations.New(a, logr.Discard())
	if _, err := fs.ReconcileReservations(context.Background(), web, nil); !errors.Is(err, node.ErrNotLeader) {
		t.Fatalf("follower's unfenced reconcile: %v", err)
	}
}
