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

// TestRunUnsharded: a leader running without sharding finds owners in the
// table; its unfenced writes to their members are refused. It drops a
// member from the table only once lease plus margin has passed on its
// clock since it saw the owner's latest renewal (counted from its start
// for one it never saw renew), keeps the members of an owner that still
// renews, and after the drop its unfenced writes apply again, with the
// names the old owner reserved handed out first.
func TestRunUnsharded(t *testing.T) {
	const lease, margin, tick = ownerLease, ownerMargin, time.Millisecond
	l, o, clk := newOwnerLease(t)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self}, fsm.OwnerAssignment{Member: "m2", Owner: "gone"})
	if err := o.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	k2 := fsm.Key{Cluster: "m2", Namespace: "ns", Name: "web"}
	gone, _ := l.FSM().Owner("m2")
	reserve := func(k fsm.Key, fence *fsm.OwnerFence) (*fsm.Result, error) {
		_, term, _ := l.Leading()
		m := l.Meta()
		m.Term = term
		return l.Apply(ctx, &fsm.Reserve{Meta: m, Key: k, Target: 5, Count: 1, Prefix: "web-", TTL: 300e9, Fence: fence})
	}
	held, err := reserve(k2, &fsm.OwnerFence{Owner: "gone", Epoch: gone.Epoch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reserve(k2, nil); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("unfenced reserve for an owned member: %v, want %v", err, fsm.ErrStale)
	}

	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.RunUnsharded(loopCtx, node.AssignerConfig{Lease: lease, Margin: margin, Interval: tick, Clock: clk})
	}()
	t.Cleanup(func() { stop(); <-done })
	// step moves the clock by d and waits until the loop has looked again.
	step := func(d time.Duration) {
		t.Helper()
		waitWaiting(t, clk)
		clk.Step(d)
		waitWaiting(t, clk)
	}
	// The loop's watch starts no earlier than now: nothing may be dropped
	// before lease plus margin has passed. (On a loaded machine the loop
	// may see the leadership later, and its watch start later.)
	step(lease + margin - 2*tick)
	if got := len(l.FSM().Owners()); got != 2 {
		t.Fatalf("%d owners left before lease plus margin passed, want 2", got)
	}
	// Time goes on while this replica renews: m2's owner never does.
	tu.Eventually(t, time.Minute, func() error {
		if err := o.Renew(ctx); err != nil {
			return err
		}
		step(lease / 4)
		if got := l.FSM().Owners(); len(got) != 1 || got["m1"].Owner != self {
			return fmt.Errorf("owners %v, want only m1 (its owner renews)", got)
		}
		return nil
	})
	res, err := reserve(k2, nil)
	if err != nil || len(res.Names) != 1 || res.Names[0] != held.Names[0] {
		t.Fatalf("unfenced reserve after the drop: %+v %v, want the held %v", res, err, held.Names)
	}
	if _, err := reserve(fsm.Key{Cluster: "m1", Namespace: "ns", Name: "web"}, nil); !errors.Is(err, fsm.ErrStale) {
		t.Fatalf("unfenced reserve for the renewing owner's member: %v, want %v", err, fsm.ErrStale)
	}
}

// waitWaiting waits until something waits on clk (the loop is between
// two looks).
func waitWaiting(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, func() error {
		if !clk.HasWaiters() {
			return errors.New("the loop is not waiting on the clock")
		}
		return nil
	})
}
