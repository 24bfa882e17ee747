package node_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
)

// A stepped-down node keeps its raft running until Shutdown, so raft can
// elect it again (here a transfer to it forces that). It must not keep the
// leadership with its gate closed for good: nobody could act, and the
// other voters, hearing from it, would never stand. It hands it back.
func TestSteppedDownNodeHandsLeadershipBack(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	old := c.WaitVoters(3, 20*time.Second)
	if err := old.StepDown(); err != nil {
		t.Fatalf("step down: %v", err)
	}
	c.WaitLeader(20*time.Second, old)

	// Watch old's raft for its own election.
	var ledAgain atomic.Bool
	obs := make(chan raft.Observation, 64)
	observer := raft.NewObserver(obs, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	old.Raft().RegisterObserver(observer)
	done := make(chan struct{})
	defer func() { old.Raft().DeregisterObserver(observer); close(done) }()
	go func() {
		for {
			select {
			case o := <-obs:
				if o.Data.(raft.LeaderObservation).LeaderID == raftID(old) {
					ledAgain.Store(true)
				}
			case <-done:
				return
			}
		}
	}()
	tu.Eventually(t, 30*time.Second, func() error {
		if ledAgain.Load() {
			return nil
		}
		if l := c.WaitLeader(time.Minute, old); l.Raft().State() == raft.Leader {
			// Retried: a transfer fails when the target does not win in
			// time, which a loaded machine can cause.
			_ = l.Raft().LeadershipTransferToServer(raftID(old), raftAddr(old)).Error()
		}
		return errors.New("the stepped-down node has not been elected again yet")
	})
	// Another node leads and lets its workers act; the stepped-down one
	// grants nothing and leaves raft's leadership.
	c.WaitLeader(20*time.Second, old)
	if _, _, _, ok := old.Enter(); ok {
		t.Fatal("stepped-down node grants permits")
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if old.Raft().State() == raft.Leader {
			return errors.New("stepped-down node still leads raft")
		}
		return nil
	})
}
