package node_test

import (
	"errors"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestVerifyLeaderCountsStaleAnswers shows why the write lease needs
// contact rounds. The leader reads its followers' answers 300 ms late, as
// a process that was paused or starved does; then nothing it sends
// reaches them any more. hashicorp/raft's VerifyLeader, asked after that,
// still succeeds: the answer to a heartbeat sent before it counts. A lease
// measured from the VerifyLeader call would claim a contact no follower
// had. The contact-round lease never reaches past what the followers'
// own last contact allows: a heartbeat timeout after it, less the margin.
func TestVerifyLeaderCountsStaleAnswers(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	c.WaitVoters(3, 30*time.Second)
	hb := c.Cfgs[0].HeartbeatTimeout
	staleVerified := false
	for attempt := 0; attempt < 20 && !staleVerified; attempt++ {
		leader := c.WaitLeader(30*time.Second, nil)
		var followers []*node.Node
		for _, n := range c.Live() {
			if n != leader {
				followers = append(followers, n)
			}
		}
		tu.Eventually(t, 20*time.Second, func() error {
			if !leader.WriteLease(0) {
				return errors.New("no write lease yet")
			}
			return nil
		})
		leader.SetRaftFaults(300*time.Millisecond, false)
		// Let a heartbeat's answer be on its way, late, then cut the
		// leader off: its writes are held from here on. (Steps of the
		// fault's timeline, not waits for a condition.)
		time.Sleep(150 * time.Millisecond)
		leader.SetRaftFaults(300*time.Millisecond, true)
		// A write that passed the hold just before it may still land:
		// ask a little later, and count only attempts it did not spoil.
		time.Sleep(50 * time.Millisecond)
		asked := time.Now()
		verified := make(chan error, 1)
		go func() { verified <- leader.Raft().VerifyLeader().Error() }()
		select {
		case err := <-verified:
			if last := latestContact(followers); err == nil && last.Before(asked) {
				staleVerified = true
				t.Logf("attempt %d: VerifyLeader succeeded %v after it was asked; the followers last heard from the leader %v before that",
					attempt, time.Since(asked).Round(time.Millisecond), asked.Sub(last).Round(time.Millisecond))
			}
		case <-time.After(time.Second):
			// No answer was on its way: raft steps down; try again.
		}
		checkLeaseWithinPromises(t, leader, followers, hb, 1500*time.Millisecond)
		leader.SetRaftFaults(0, false)
	}
	if !staleVerified {
		t.Fatal("VerifyLeader never succeeded on a late answer in 20 attempts")
	}
}

// latestContact is the latest time any of followers heard from its leader.
func latestContact(followers []*node.Node) time.Time {
	var last time.Time
	for _, f := range followers {
		if lc := f.Raft().LastContact(); lc.After(last) {
			last = lc
		}
	}
	return last
}

// checkLeaseWithinPromises watches leader's write lease for d while its
// writes are held (the followers' last contacts stand still): it must
// never end later than the best follower's last contact plus hb less the
// margin, the latest instant a quorum of three still votes for nobody
// else.
func checkLeaseWithinPromises(t *testing.T, leader *node.Node, followers []*node.Node, hb, d time.Duration) {
	t.Helper()
	for start := time.Now(); time.Since(start) < d; {
		until := leader.LeaseUntil()
		promise := latestContact(followers).Add(hb - node.ContactMargin(hb))
		if until.After(promise) {
			t.Fatalf("write lease until %v, %v past the followers' promise (%v)",
				until.Format("15:04:05.000"), until.Sub(promise), promise.Format("15:04:05.000"))
		}
		time.Sleep(5 * time.Millisecond) // sampling period of the watch, not a wait for a condition
	}
}
