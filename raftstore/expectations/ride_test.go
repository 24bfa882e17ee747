package expectations_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	clocktesting "k8s.io/utils/clock/testing"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// rideLease is the riding tests' owner lease.
const rideLease = 3 * time.Second

// ridingOwner is a one-node cluster whose only replica owns web's member
// with a renewed lease on a fake clock, and a store whose rounds and
// flushes may carry that lease's renewals.
type ridingOwner struct {
	l         *node.Node
	o         *node.OwnerLease
	clk       *clocktesting.FakeClock
	s         *expectations.Store
	self      string
	ctx, fctx context.Context
}

func newRidingOwner(t *testing.T) ridingOwner {
	t.Helper()
	c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) { cfg.ObservationFlushInterval = time.Hour })
	c.StartAll()
	l := c.WaitVoters(1, 60*time.Second)
	tu.Eventually(t, 30*time.Second, func() error {
		if !l.AllServersHave(node.FeatureOwnership) {
			return errors.New("the ownership feature is not known yet")
		}
		return nil
	})
	r := ridingOwner{l: l, ctx: tu.Ctx(t, time.Minute), self: l.ServerID(), clk: clocktesting.NewFakeClock(time.Unix(1000, 0))}
	r.o = l.NewOwnerLease(rideLease, time.Second, r.clk)
	_, term, _ := l.Leading()
	m := l.Meta()
	m.Term = term
	if _, err := l.Apply(r.ctx, &fsm.AssignOwners{Meta: m, Set: []fsm.OwnerAssignment{{Member: web.Cluster, Owner: r.self}}}); err != nil {
		t.Fatal(err)
	}
	if err := r.o.Renew(r.ctx); err != nil {
		t.Fatal(err)
	}
	fence, ok := r.o.Permitted(web.Cluster)
	if !ok {
		t.Fatal("not permitted after the renewal")
	}
	r.s = expectations.New(l, logr.Discard())
	r.s.RideRenewals(r.o)
	r.fctx = ctrlexp.WithFence(r.ctx, ctrlexp.Fence{Owner: fence.Owner, Epoch: fence.Epoch})
	return r
}

// TestRenewalRidesInRound: an owner's round of fenced reservations carries
// its lease renewal in the round's one raft entry, when the renewal is due
// (half an interval after the last); the lease runs from when the renewal
// was built. A round soon after carries none.
func TestRenewalRidesInRound(t *testing.T) {
	r := newRidingOwner(t)
	l, o, clk, s, self, fctx := r.l, r.o, r.clk, r.s, r.self, r.fctx
	reserve := func() (entries uint64) {
		t.Helper()
		before := l.Raft().LastIndex()
		if _, err := s.ExpectCreations(fctx, web, ctrlexp.CreateIntent{Target: 10, Count: 1, Prefix: "web-"}); err != nil {
			t.Fatal(err)
		}
		return l.Raft().LastIndex() - before
	}

	renewed := l.FSM().Renewals()[self].Index
	if n := reserve(); n != 1 || l.FSM().Renewals()[self].Index != renewed {
		t.Fatalf("a round right after a renewal: %d entries, renewal index %d -> %d; want 1 entry, no renewal",
			n, renewed, l.FSM().Renewals()[self].Index)
	}
	clk.Step(rideLease / 6)
	built := clk.Now()
	if n := reserve(); n != 1 || l.FSM().Renewals()[self].Index != l.Raft().LastIndex() {
		t.Fatalf("a round half an interval later: %d entries, renewal at %d, last index %d; want the renewal in the round's one entry",
			n, l.FSM().Renewals()[self].Index, l.Raft().LastIndex())
	}
	// The lease runs to exactly built + lease (the clock has not moved).
	_, almost := o.PermittedFor(web.Cluster, rideLease-time.Nanosecond)
	_, full := o.PermittedFor(web.Cluster, rideLease)
	if !clk.Now().Equal(built) || !almost || full {
		t.Fatalf("PermittedFor(lease-1ns) %v, PermittedFor(lease) %v: want the lease to run to %v", almost, full, built.Add(rideLease))
	}
	renewed = l.FSM().Renewals()[self].Index
	if n := reserve(); n != 1 || l.FSM().Renewals()[self].Index != renewed {
		t.Fatalf("the next round: %d entries, renewal index %d -> %d; want no renewal", n, renewed, l.FSM().Renewals()[self].Index)
	}
}

// An owner's flush of observations carries its renewal when one is due,
// in the flush's one entry, and none when a renewal went out lately.
func TestRenewalRidesInFlush(t *testing.T) {
	r := newRidingOwner(t)
	l, o, clk, s, self, ctx, fctx := r.l, r.o, r.clk, r.s, r.self, r.ctx, r.fctx
	names, err := s.ExpectCreations(fctx, web, ctrlexp.CreateIntent{Target: 100, Count: 2, Prefix: "web-"})
	if err != nil || len(names) != 2 {
		t.Fatalf("reserving: %v %v", names, err)
	}
	// flush observes one created pod and flushes.
	flush := func(name string) (entries uint64) {
		t.Helper()
		s.CreationObserved(web, name)
		before := l.Raft().LastIndex()
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		return l.Raft().LastIndex() - before
	}
	renewed := l.FSM().Renewals()[self].Index
	if n := flush(names[0]); n != 1 || l.FSM().Renewals()[self].Index != renewed {
		t.Fatalf("a flush right after a renewal: %d entries, renewal index %d -> %d; want 1 entry, no renewal", n, renewed, l.FSM().Renewals()[self].Index)
	}
	clk.Step(rideLease / 6)
	if n := flush(names[1]); n != 1 || l.FSM().Renewals()[self].Index != l.Raft().LastIndex() {
		t.Fatalf("a flush with a renewal due: %d entries, renewal at %d, last index %d; want the renewal in the flush's one entry",
			n, l.FSM().Renewals()[self].Index, l.Raft().LastIndex())
	}
	if _, ok := o.PermittedFor(web.Cluster, rideLease-time.Nanosecond); !ok {
		t.Fatal("the renewal that rode in the flush did not extend the lease to a full lease from its send")
	}
}
