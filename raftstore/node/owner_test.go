package node_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// assignOwners commits an assignment on the leader l.
func assignOwners(t *testing.T, l *node.Node, set ...fsm.OwnerAssignment) {
	t.Helper()
	_, term, ok := l.Leading()
	if !ok {
		t.Fatal("not leading")
	}
	m := l.Meta()
	m.Term = term
	if _, err := l.Apply(tu.Ctx(t, 30*time.Second), &fsm.AssignOwners{Meta: m, Set: set}); err != nil {
		t.Fatal(err)
	}
}

// newOwnerLease starts a one-node cluster, waits until it knows that
// every server lists the ownership feature and features, and returns the
// node and its owner lease (ownerLease, ownerMargin) on a fake clock.
func newOwnerLease(t *testing.T, features ...string) (*node.Node, *node.OwnerLease, *clocktesting.FakeClock) {
	t.Helper()
	c := tu.NewCluster(t, 1, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(1, 60*time.Second)
	waitAllHave(t, []*node.Node{l}, append([]string{node.FeatureOwnership}, features...)...)
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	return l, l.NewOwnerLease(ownerLease, ownerMargin, clk), clk
}

// renewalIndex is the raft index of owner's latest committed renewal.
func renewalIndex(n *node.Node, owner string) uint64 { return n.FSM().Renewals()[owner].Index }

// TestOwnerLease: a replica may write to a member only while it owns it at
// the committed epoch and a renewal it sent less than a lease ago (its own
// clock, from the send) accepted that epoch; after a handover from a live
// owner it also waits lease plus margin from when it saw the assignment.
func TestOwnerLease(t *testing.T) {
	const lease, margin = ownerLease, ownerMargin
	l, o, clk := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	permitted := func(m string) bool { _, ok := o.Permitted(m); return ok }
	renew := func() {
		t.Helper()
		if err := o.Renew(ctx); err != nil {
			t.Fatal(err)
		}
	}
	steps := []struct {
		name string
		do   func()
		want map[string]bool
	}{
		{"owned but never renewed", func() { assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self}) },
			map[string]bool{"m1": false, "m2": false}},
		{"renewed", renew, map[string]bool{"m1": true, "m2": false}},
		{"just before the lease from the send lapses", func() { clk.Step(lease - time.Nanosecond) },
			map[string]bool{"m1": true}},
		{"lapsed: no renewal within the lease", func() { clk.Step(time.Nanosecond) }, map[string]bool{"m1": false}},
		{"renewed again", renew, map[string]bool{"m1": true}},
		{"moved to another replica", func() {
			assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: "other", From: self, FromRenewal: renewalIndex(l, self)})
		},
			map[string]bool{"m1": false}},
		{"moved back (a new epoch): the old renewal does not cover it",
			func() { assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self, From: "other"}) }, map[string]bool{"m1": false}},
		{"renewed at the new epoch", renew, map[string]bool{"m1": true}},
		{"a handover from a live owner, renewed", func() {
			assignOwners(t, l, fsm.OwnerAssignment{Member: "m2", Owner: self, Handover: true})
			renew()
		}, map[string]bool{"m1": true, "m2": false}},
		{"lease plus margin after seeing the handover", func() {
			clk.Step(lease + margin - time.Second)
			renew()
			clk.Step(time.Second)
		}, map[string]bool{"m1": true, "m2": true}},
	}
	for _, s := range steps {
		s.do()
		for m, want := range s.want {
			if got := permitted(m); got != want {
				t.Fatalf("%s: Permitted(%s) = %v, want %v", s.name, m, got, want)
			}
		}
	}
	if f, ok := o.Permitted("m1"); !ok || f.Owner != self || f.Epoch == 0 {
		t.Fatalf("the fence of a permitted write: %+v", f)
	}
}

// TestOwnershipNeedsEveryServer: while one server of the configuration does
// not list the ownership feature (an older version), no node proposes the
// sharding commands or an owner-fenced write, from the leader or a follower.
func TestOwnershipNeedsEveryServer(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureOwnership)
	var old, follower *node.Node
	for _, n := range c.Live() {
		switch {
		case n == l:
		case old == nil:
			old = n
		default:
			follower = n
		}
	}
	old.WithoutFeature(node.FeatureOwnership)
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			n.CheckFeatures()
			if n.AllServersHave(node.FeatureOwnership) {
				return fmt.Errorf("%s would use ownership although %s does not list it", n.ServerID(), old.ServerID())
			}
		}
		return nil
	})
	_, term, _ := l.Leading()
	m := l.Meta()
	m.Term = term
	fence := &fsm.OwnerFence{Owner: "a", Epoch: 1}
	k := fsm.Key{Cluster: "m1", Namespace: "ns", Name: "web"}
	cmds := []fsm.Command{
		&fsm.AssignOwners{Meta: m, Set: []fsm.OwnerAssignment{{Member: "m1", Owner: l.ServerID()}}},
		&fsm.RenewOwnership{Meta: l.Meta(), Owner: l.ServerID()},
		&fsm.Reserve{Meta: l.Meta(), Key: k, Target: 1, Count: 1, TTL: 1e9, Fence: fence},
		&fsm.Settle{Meta: l.Meta(), Items: []fsm.Settlement{{Kind: fsm.SettleFailed, Key: k, Name: "p", Fence: fence}}},
	}
	before := l.Raft().AppliedIndex()
	for _, n := range []*node.Node{l, follower} {
		for _, cmd := range cmds {
			if _, err := n.Apply(tu.Ctx(t, 30*time.Second), cmd); !errors.Is(err, node.ErrFeatureMissing) {
				t.Errorf("%s proposing %s: %v, want %v", n.ServerID(), cmd.Type(), err, node.ErrFeatureMissing)
			}
		}
		if _, err := n.ApplyAll(tu.Ctx(t, 30*time.Second), cmds[1:2]); !errors.Is(err, node.ErrFeatureMissing) {
			t.Errorf("%s: ApplyAll: %v, want %v", n.ServerID(), err, node.ErrFeatureMissing)
		}
	}
	if got := l.FSM().Owners(); len(got) != 0 {
		t.Fatalf("owners %v committed", got)
	}
	// Unfenced writes go on as before.
	if _, err := follower.Apply(tu.Ctx(t, 30*time.Second), &fsm.SetHealth{Meta: l.Meta(), Cluster: "m1", Healthy: true}); err != nil {
		t.Fatal(err)
	}
	if l.Raft().AppliedIndex() == before {
		t.Fatal("nothing committed")
	}
}

// TestOwnerLeaseDeadlineAndChanges: PermittedFor admits a write only when
// the lease still holds at its deadline; Changed closes after a renewal's
// result, when a lease lapses unrenewed, and when an AssignOwners is
// applied.
func TestOwnerLeaseDeadlineAndChanges(t *testing.T) {
	const lease = ownerLease
	l, o, clk := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	closes := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(30 * time.Second):
			t.Fatalf("Changed did not close after %s", what)
		}
	}
	ch := o.Changed()
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self})
	closes("an assignment", ch)
	ch = o.Changed()
	if err := o.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	closes("a renewal", ch)
	ch = o.Changed()
	for _, s := range []struct {
		step time.Duration
		d    time.Duration
		want bool
	}{
		{0, 0, true},
		{0, lease - time.Nanosecond, true},
		{0, lease, false},
		{lease / 2, lease/2 - time.Nanosecond, true},
		{0, lease / 2, false},
	} {
		clk.Step(s.step)
		if _, ok := o.PermittedFor("m1", s.d); ok != s.want {
			t.Fatalf("%v after the renewal, PermittedFor(m1, %v) = %v, want %v", clk.Since(time.Unix(1000, 0)), s.d, ok, s.want)
		}
	}
	select {
	case <-ch:
		t.Fatal("Changed closed while nothing changed")
	default:
	}
	clk.Step(lease / 2)
	closes("the lease lapsed", ch)
	if _, ok := o.Permitted("m1"); ok {
		t.Fatal("permitted after the lease lapsed")
	}
	ch = o.Changed()
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: "other", From: self, FromRenewal: renewalIndex(l, self)})
	closes("a move away", ch)
}

// TestOwnerLeaseRenewsOnGain: Run renews at once when an assignment gives
// this replica a member, so the member is permitted without waiting for
// the next periodic renewal (the fake clock never moves here, so the
// periodic one never comes).
func TestOwnerLeaseRenewsOnGain(t *testing.T) {
	l, o, _ := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	go o.Run(ctx)
	renewed := func() uint64 { return renewalIndex(l, self) }
	tu.Eventually(t, 30*time.Second, func() error {
		if renewed() == 0 {
			return errors.New("no first renewal")
		}
		return nil
	})
	first := renewed()
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self})
	tu.Eventually(t, 30*time.Second, func() error {
		if _, ok := o.Permitted("m1"); !ok {
			return errors.New("m1 not permitted: no renewal since it was gained")
		}
		return nil
	})
	if got := renewed(); got == first {
		t.Fatalf("renewal index still %d: m1 permitted without a renewal", got)
	}
}

// TestOwnerLeaseRelease: a handover's wait ends when the previous owner
// releases the member, without lease plus margin passing on the new
// owner's clock; Release from this replica ends the wait of a member moved
// away from it.
func TestOwnerLeaseRelease(t *testing.T) {
	l, o, _ := newOwnerLease(t, node.FeatureOwnerRelease)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()

	assignOwners(t, l, fsm.OwnerAssignment{Member: "m2", Owner: "other"})
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m2", Owner: self, Handover: true})
	if err := o.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Permitted("m2"); ok {
		t.Fatal("permitted during the handover wait")
	}
	epoch := l.FSM().Owners()["m2"].Epoch
	res, err := l.Apply(ctx, &fsm.ReleaseOwnership{Meta: l.Meta(), Owner: "other", Member: "m2", Epoch: epoch})
	if err != nil || !res.HandoverEnded {
		t.Fatalf("release by the previous owner: %+v, %v", res, err)
	}
	if _, ok := o.Permitted("m2"); !ok {
		t.Fatal("not permitted once the previous owner released the member")
	}

	assignOwners(t, l, fsm.OwnerAssignment{Member: "m3", Owner: self})
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m3", Owner: "other", Handover: true})
	moved := l.FSM().Owners()["m3"]
	if ended, err := o.Release(ctx, "m3", moved.Epoch-1); err != nil || ended {
		t.Fatalf("release at an old epoch: ended %v, %v; want false, nil", ended, err)
	}
	if ended, err := o.Release(ctx, "m3", moved.Epoch); err != nil || !ended {
		t.Fatalf("release of a member moved away: ended %v, %v; want true, nil", ended, err)
	}
	if l.FSM().Owners()["m3"].Handover {
		t.Error("the handover of m3 is still waiting after its release")
	}
}
