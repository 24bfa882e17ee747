package node_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// TestOwnerLeaseRideRenewal: a renewal built by RideRenewal and sent in a
// batch extends the leases it accepted to when it was built plus the
// lease, never later (the batch went out after that); none is offered
// again within half the renewal interval; one whose result is unknown
// extends nothing.
func TestOwnerLeaseRideRenewal(t *testing.T) {
	const lease, interval = ownerLease, ownerLease / 3
	l, o, clk := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self})
	cmds, done := o.RideRenewal()
	if len(cmds) != 1 {
		t.Fatalf("%d commands offered to ride before any renewal, want the renewal", len(cmds))
	}
	built := clk.Now()
	clk.Step(100 * time.Millisecond) // the batch goes out a little later
	res, err := l.ApplyAll(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	done(res)
	if got, want := o.Until("m1"), built.Add(lease); !got.Equal(want) {
		t.Fatalf("lease until %v, want %v (from when the renewal was built)", got, want)
	}
	if _, ok := o.Permitted("m1"); !ok {
		t.Fatal("not permitted after the ridden renewal was accepted")
	}
	if cmds, _ := o.RideRenewal(); len(cmds) != 0 {
		t.Fatal("a renewal offered again within half the interval")
	}
	clk.Step(interval/2 - 100*time.Millisecond)
	cmds, done = o.RideRenewal()
	if len(cmds) == 0 {
		t.Fatal("no renewal offered half an interval after the last")
	}
	done(nil) // the batch failed: nothing known committed
	if got, want := o.Until("m1"), built.Add(lease); !got.Equal(want) {
		t.Fatalf("lease until %v after an unknown result, want %v", got, want)
	}
}

// TestOwnerLeaseRunCountsRiddenRenewal: Run skips its periodic renewal
// while an accepted ridden renewal is less than the interval old, and
// renews at the tick of the shared basis (multiples of the interval since
// the Unix epoch; the fake clock starts on one) nearest an interval after
// that renewal's send. (No member is owned, so Run's timer is the only
// one on the clock.)
func TestOwnerLeaseRunCountsRiddenRenewal(t *testing.T) {
	const interval = ownerLease / 3
	l, o, clk := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	go o.Run(ctx)
	// idle waits until Run waits on its timer: between renewals.
	idle := func() {
		t.Helper()
		tu.Eventually(t, 30*time.Second, func() error {
			if n := clk.Waiters(); n != 1 {
				return fmt.Errorf("%d waiters on the clock, want Run's", n)
			}
			return nil
		})
	}
	idle()
	if renewalIndex(l, self) == 0 {
		t.Fatal("Run waits without having renewed")
	}
	clk.Step(interval / 2)
	cmds, done := o.RideRenewal()
	if len(cmds) == 0 {
		t.Fatal("no renewal offered half an interval after Run's")
	}
	res, err := l.ApplyAll(ctx, cmds)
	if err != nil {
		t.Fatal(err)
	}
	done(res)
	ridden := renewalIndex(l, self)
	clk.Step(interval / 2) // Run's timer fires: the ridden renewal is half an interval old
	idle()
	if got := renewalIndex(l, self); got != ridden {
		t.Fatalf("Run renewed (index %d) although a renewal rode half an interval ago (index %d)", got, ridden)
	}
	clk.Step(interval / 2) // an interval after the ride: between two ticks, not due
	idle()
	if got := renewalIndex(l, self); got != ridden {
		t.Fatalf("Run renewed (index %d) off the shared ticks", got)
	}
	clk.Step(interval / 2) // the tick nearest an interval after the ride
	tu.Eventually(t, 30*time.Second, func() error {
		if renewalIndex(l, self) == ridden {
			return errors.New("no renewal at the tick after the ridden one")
		}
		return nil
	})
}
