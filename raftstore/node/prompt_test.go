package node_test

import (
	"testing"
	"time"

	"github.com/hashicorp/raft"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/node"
)

func TestFollowerRank(t *testing.T) {
	voters := []raft.ServerID{"r0", "r1", "r2", "r3", "r4"}
	cases := []struct {
		self, leader raft.ServerID
		want         int
	}{
		{"r0", "r4", 0},
		{"r1", "r0", 0}, // the leader does not count
		{"r2", "r0", 1},
		{"r4", "r2", 3},
		{"r3", "", 3}, // no leader known: every other voter ranks
	}
	for _, c := range cases {
		if got := node.FollowerRank(c.self, c.leader, voters); got != c.want {
			t.Errorf("FollowerRank(%s, leader %s) = %d, want %d", c.self, c.leader, got, c.want)
		}
	}
}

func TestPromptDue(t *testing.T) {
	t0 := time.Date(2026, 11, 26, 20, 0, 0, 0, time.UTC)
	hb := time.Second // stagger 250ms
	cases := []struct {
		name  string
		since time.Duration
		rank  int
		last  time.Time
		want  bool
	}{
		{"fresh contact", 100 * time.Millisecond, 0, t0, false},
		{"just under the timeout", hb - time.Millisecond, 0, t0, false},
		{"at the timeout, rank 0", hb, 0, t0, true},
		{"at the timeout, rank 1 waits", hb, 1, t0, false},
		{"rank 1 after its stagger", hb + 250*time.Millisecond, 1, t0, true},
		{"rank 2 before its stagger", hb + 400*time.Millisecond, 2, t0, false},
		{"never heard a leader", 10 * hb, 0, time.Time{}, false},
	}
	for _, c := range cases {
		now := t0.Add(c.since)
		if got := node.PromptDue(now, c.last, hb, c.rank); got != c.want {
			t.Errorf("%s: PromptDue = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestPromptedElectionAfterLeaderKill: with raft's own heartbeat checks
// and election retries pushed out to a minute on the followers (behind the
// nodes' backs: their configured timeout stays 1s), only the prompter can
// start an election within that minute after the leader is killed.
func TestPromptedElectionAfterLeaderKill(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	for _, n := range c.Live() {
		if n == leader {
			continue
		}
		rc := n.Raft().ReloadableConfig()
		rc.HeartbeatTimeout, rc.ElectionTimeout = time.Minute, time.Minute
		if err := n.Raft().ReloadConfig(rc); err != nil {
			t.Fatal(err)
		}
	}
	// The followers' armed timers read the timeout when they fire, so
	// none of raft's own checks can elect from here on.
	if now := c.WaitLeader(10 * time.Second); now != leader {
		t.Fatalf("leadership moved from %s to %s while the test set the followers up", leader.ServerID(), now.ServerID())
	}
	killed := time.Now()
	c.Kill(c.Index(leader))
	next := c.WaitLeader(20*time.Second, leader)
	took := time.Since(killed)
	var prompts int64
	for _, n := range c.Live() {
		prompts += n.Prompts()
	}
	t.Logf("new leader %s %s after the kill, %d prompts", next.ServerID(), took.Round(time.Millisecond), prompts)
	if prompts == 0 {
		t.Error("a new leader, but no heartbeat check was prompted")
	}
	if took > 50*time.Second {
		t.Errorf("the new leader came %s after the kill: raft's own minute-long timers, not the prompt", took.Round(time.Millisecond))
	}
}
