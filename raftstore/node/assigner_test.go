package node_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestAssignerDampsReturningReplica: the leader's assignment loop on real
// raft with a fake clock, the replicas' renewals committed by the test. A
// fresh start assigns every member at once; a replica that stops renewing
// loses its members once lease plus margin passed; when it renews again
// it gets no member moved back before it has renewed for the damping
// period (twice the lease), and its share after it.
func TestAssignerDampsReturningReplica(t *testing.T) {
	const lease, margin, tick = ownerLease, ownerMargin, time.Second
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureOwnership)
	ids := make([]string, 0, 3)
	for _, n := range c.Live() {
		ids = append(ids, n.ServerID())
	}
	back := ids[0] // the replica that goes and comes back
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	ctx := tu.Ctx(t, 2*time.Minute)
	loopCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.RunAssigner(loopCtx, node.AssignerConfig{Lease: lease, Margin: margin, Interval: tick, Clock: clk,
			Members: func() []string { return shardMembers }})
	}()
	t.Cleanup(func() { stop(); <-done })
	// round commits a renewal of each of renewing, moves the clock one
	// tick and waits until the loop has looked again.
	round := func(renewing ...string) map[string]int {
		t.Helper()
		for _, id := range renewing {
			if _, err := l.Apply(ctx, &fsm.RenewOwnership{Meta: l.Meta(), Owner: id}); err != nil {
				t.Fatal(err)
			}
		}
		waitWaiting(t, clk)
		clk.Step(tick)
		waitWaiting(t, clk)
		if !l.IsLeader() {
			t.Skip("leadership moved under load")
		}
		counts := map[string]int{}
		for _, o := range l.FSM().Owners() {
			counts[o.Owner]++
		}
		return counts
	}
	want := func(what string, got map[string]int, ofBack, each int) {
		t.Helper()
		for _, id := range ids {
			if n := map[bool]int{true: ofBack, false: each}[id == back]; got[id] != n {
				t.Fatalf("%s: owners hold %v, want %d for %s", what, got, n, id)
			}
		}
	}
	waitWaiting(t, clk) // the loop's first look: what it finds predates the term
	want("a fresh start", round(ids...), 2, 2)
	var got map[string]int
	for range (lease + margin) / tick {
		got = round(ids[1:]...)
	}
	want(back+" stopped renewing, lease plus margin passed", got, 0, 3)
	for i := range 2 * lease / tick {
		got = round(ids...)
		want(fmt.Sprintf("%s renewing again for %v", back, time.Duration(i)*tick), got, 0, 3)
	}
	got = round(ids...)
	if got[back] != 2 || got[ids[1]]+got[ids[2]] != 4 {
		t.Fatalf("after the damping period: owners hold %v, want two members moved to %s", got, back)
	}
}
