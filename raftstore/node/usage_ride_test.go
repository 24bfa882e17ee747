package node_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// runningOwner starts Run on a one-node cluster's owner lease of m1 and
// returns once Run waits on its timer between renewals. The clock then
// holds three waiters: the lapse timer, Run's timer, and the timer of
// Run's first wait, which the assignment (applied before Run started)
// cut short for a second renewal; while that renewal is in flight there
// are two.
func runningOwner(t *testing.T) (*node.Node, *node.OwnerLease, *clocktesting.FakeClock, context.Context) {
	t.Helper()
	l, o, clk := newOwnerLease(t, node.FeatureMemberUsage)
	ctx := tu.Ctx(t, 2*time.Minute)
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: l.ServerID()})
	go o.Run(ctx)
	tu.Eventually(t, 30*time.Second, func() error {
		if _, ok := o.Permitted("m1"); !ok {
			return errors.New("m1 not permitted yet")
		}
		if n := clk.Waiters(); n != 3 {
			return fmt.Errorf("%d waiters on the clock, want 3 (Run idle)", n)
		}
		return nil
	})
	return l, o, clk, ctx
}

// publishQueued starts PublishUsage of m1 and returns its outcome's
// channel once the usage waits for a renewal.
func publishQueued(t *testing.T, ctx context.Context, o *node.OwnerLease, usage string) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- o.PublishUsage(ctx, "m1", []byte(usage)) }()
	tu.Eventually(t, 30*time.Second, func() error {
		if n := o.QueuedUsages(); n != 1 {
			return fmt.Errorf("%d usages queued, want 1", n)
		}
		return nil
	})
	return done
}

// wait returns the outcome of a publication, failing after a minute.
func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatal("PublishUsage still waiting")
		return nil
	}
}

// TestUsageRidesRenewal: while Run renews, a published usage takes no
// entry of its own: it waits for the next renewal, periodic or riding a
// round (RideRenewal), and commits in that renewal's entry, and
// PublishUsage returns its result.
func TestUsageRidesRenewal(t *testing.T) {
	const interval = ownerLease / 3
	l, o, clk, ctx := runningOwner(t)
	self := l.ServerID()

	done := publishQueued(t, ctx, o, "u1")
	if _, ok := l.MemberUsage("m1"); ok {
		t.Fatal("the usage committed before a renewal carried it")
	}
	select {
	case err := <-done:
		t.Fatalf("PublishUsage returned %v before a renewal carried it", err)
	default:
	}
	clk.Step(interval) // Run's periodic renewal carries it
	if err := wait(t, done); err != nil {
		t.Fatalf("usage riding Run's renewal: %v", err)
	}
	u, ok := l.MemberUsage("m1")
	if !ok || string(u.Usage) != "u1" || u.Index != renewalIndex(l, self) {
		t.Fatalf("usage %q at index %d (%v), want u1 in the renewal's entry %d", u.Usage, u.Index, ok, renewalIndex(l, self))
	}

	done = publishQueued(t, ctx, o, "u2")
	clk.Step(interval / 2) // a ride is offered again, Run is not due
	cmds, finish := o.RideRenewal()
	if len(cmds) != 2 {
		t.Fatalf("a ride offered %d commands, want the renewal and the usage", len(cmds))
	}
	res, err := l.ApplyAll(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	finish(res)
	if err := wait(t, done); err != nil {
		t.Fatalf("usage riding a round's renewal: %v", err)
	}
	if u, _ := l.MemberUsage("m1"); string(u.Usage) != "u2" || u.Index != renewalIndex(l, self) {
		t.Fatalf("usage %q at index %d, want u2 in the ridden renewal's entry %d", u.Usage, u.Index, renewalIndex(l, self))
	}
}

// TestRiddenUsageErrors: a usage whose ownership changed while it waited
// comes back as fsm.ErrStale; one waiting while a server stops listing
// FeatureMemberUsage as ErrFeatureMissing, and the renewal still commits.
func TestRiddenUsageErrors(t *testing.T) {
	const interval = ownerLease / 3
	l, o, clk, ctx := runningOwner(t)
	self := l.ServerID()

	done := publishQueued(t, ctx, o, "u1")
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: "elsewhere"})
	clk.Step(interval / 2)
	cmds, finish := o.RideRenewal()
	res, err := l.ApplyAll(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	finish(res)
	if err := wait(t, done); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("usage whose ownership moved while it waited: %v, want %v", err, fsm.ErrStale)
	}
	if _, ok := l.MemberUsage("m1"); ok {
		t.Fatal("a stale usage committed")
	}

	// Back to this replica (Run renews at once for the new epoch).
	// From the owner that never renewed: no handover wait.
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self, From: "elsewhere"})
	tu.Eventually(t, 30*time.Second, func() error {
		if _, ok := o.Permitted("m1"); !ok {
			return errors.New("m1 not permitted again yet")
		}
		return nil
	})
	done = publishQueued(t, ctx, o, "u2")
	l.WithoutFeature(node.FeatureMemberUsage)
	tu.Eventually(t, 30*time.Second, func() error {
		l.CheckFeatures()
		if l.AllServersHave(node.FeatureMemberUsage) {
			return errors.New("the node does not know yet that the feature is gone")
		}
		return nil
	})
	before := renewalIndex(l, self)
	clk.Step(interval / 2)
	cmds, finish = o.RideRenewal()
	if len(cmds) != 1 {
		t.Fatalf("a ride offered %d commands without the feature, want the renewal alone", len(cmds))
	}
	if err := wait(t, done); !errors.Is(err, node.ErrFeatureMissing) {
		t.Fatalf("usage queued while the feature went away: %v, want %v", err, node.ErrFeatureMissing)
	}
	res, err = l.ApplyAll(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	finish(res)
	if renewalIndex(l, self) == before {
		t.Fatal("the renewal did not commit")
	}
	if _, ok := l.MemberUsage("m1"); ok {
		t.Fatal("a usage committed without the feature")
	}
}
