package node_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// deadTimeout is short so the cleanup happens within the test, yet several
// heartbeat timeouts (300ms with tu.FastTimers) long so a slow heartbeat
// under -race is not mistaken for a dead server.
const deadTimeout = 2 * time.Second

// voterIDs returns the voter IDs in the configuration of the current leader.
func voterIDs(t *testing.T, c *tu.Cluster) (map[string]bool, *node.Node) {
	t.Helper()
	l := c.WaitLeader(time.Minute)
	s, err := l.Servers()
	if err != nil {
		t.Fatalf("reading configuration: %v", err)
	}
	ids := map[string]bool{}
	for _, x := range s {
		if x.Voter {
			ids[x.ID] = true
		}
	}
	return ids, l
}

// keepsVoters watches, for d, the configuration every running node holds and
// fails the test as soon as one of them lacks one of the given voters. A
// removal followed by a re-join ends with the same voters, and raft's
// GetConfiguration reports no index to tell, so it is caught in between:
// the removed replica needs a heartbeat timeout and a join interval to come
// back, far longer than the poll interval.
func keepsVoters(t *testing.T, c *tu.Cluster, ids []string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, n := range c.Live() {
			s, err := n.Servers()
			if err != nil {
				continue // shutting down
			}
			have := map[string]bool{}
			for _, x := range s {
				have[x.ID] = x.Voter
			}
			for _, id := range ids {
				if !have[id] {
					t.Fatalf("%s's configuration lacks voter %s: %v", n.ServerID(), id, s)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// killFollowers kills count followers of the current leader and returns their
// indexes and server IDs.
func killFollowers(t *testing.T, c *tu.Cluster, leader *node.Node, count int) (idx []int, ids []string) {
	t.Helper()
	for i := range c.Cfgs {
		if len(idx) == count {
			break
		}
		if n := c.Node(i); n != nil && n != leader {
			idx = append(idx, i)
			ids = append(ids, n.ServerID())
			c.Kill(i)
		}
	}
	if len(idx) != count {
		t.Fatalf("found %d followers to kill, want %d", len(idx), count)
	}
	return idx, ids
}

// commits checks that the cluster still commits a write.
func commits(t *testing.T, c *tu.Cluster, generation int64) {
	t.Helper()
	frs := fsm.FRSRef{Namespace: "ns", Name: "dead", UID: "u1"}
	l := c.WaitLeader(time.Minute)
	if err := l.SetTargets(tu.Ctx(t, time.Minute), frs, generation, map[string]int32{"m1": int32(generation)}); err != nil {
		t.Fatalf("write after losing a voter: %v", err)
	}
}

func TestDeadServerCleanup(t *testing.T) {
	withCleanup := func(minVoters int) func(int, *node.NodeConfig) {
		return func(_ int, cfg *node.NodeConfig) {
			cfg.DeadServerTimeout = deadTimeout
			cfg.MinVoters = minVoters
		}
	}

	t.Run("dead follower removed, returns when restarted", func(t *testing.T) {
		c := tu.NewCluster(t, 5, withCleanup(0)) // MinVoters default 3
		c.StartAll()
		leader := c.WaitVoters(5, time.Minute)
		idx, dead := killFollowers(t, c, leader, 1)
		killed := time.Now()
		tu.Eventually(t, 2*time.Minute, func() error {
			ids, _ := voterIDs(t, c)
			if ids[dead[0]] {
				return fmt.Errorf("dead voter %s still in the configuration %v", dead[0], ids)
			}
			if len(ids) != 4 {
				return fmt.Errorf("configuration has %d voters, want 4: %v", len(ids), ids)
			}
			return nil
		})
		t.Logf("dead voter removed %s after the kill (DeadServerTimeout %s)", time.Since(killed).Round(100*time.Millisecond), deadTimeout)
		commits(t, c, 1)
		for _, n := range c.Live() {
			if n.ServerID() == dead[0] {
				t.Fatal("killed node still listed as live")
			}
		}
		// The membership loop of a replica that comes back adds it again.
		back := c.Start(idx[0])
		c.WaitVoters(5, time.Minute)
		ids, _ := voterIDs(t, c)
		if !ids[back.ServerID()] {
			t.Fatalf("restarted %s not a voter again: %v", back.ServerID(), ids)
		}
		commits(t, c, 2)
	})

	// Removal stops at MinVoters: the dead voters beyond it stay in the
	// configuration, and the survivors still form a quorum.
	floors := []struct {
		name             string
		voters, minVoter int
		kill             int
	}{
		{name: "3 voters MinVoters 3 keep a dead one", voters: 3, minVoter: 3, kill: 1},
		{name: "5 voters MinVoters 4 remove only one of two dead", voters: 5, minVoter: 4, kill: 2},
	}
	for _, tc := range floors {
		t.Run(tc.name, func(t *testing.T) {
			c := tu.NewCluster(t, tc.voters, withCleanup(tc.minVoter))
			c.StartAll()
			leader := c.WaitVoters(tc.voters, time.Minute)
			_, dead := killFollowers(t, c, leader, tc.kill)
			want := max(tc.voters-tc.kill, tc.minVoter)
			// Removals happen up to MinVoters; wait for them (if any), then
			// long past DeadServerTimeout to see that no more follow.
			tu.Eventually(t, 2*time.Minute, func() error {
				if ids, _ := voterIDs(t, c); len(ids) != want {
					return fmt.Errorf("configuration has %d voters, want %d: %v", len(ids), want, ids)
				}
				return nil
			})
			ids, _ := voterIDs(t, c)
			var keep []string
			for id := range ids {
				keep = append(keep, id)
			}
			keepsVoters(t, c, keep, 3*deadTimeout)
			ids, _ = voterIDs(t, c)
			if len(ids) != want {
				t.Fatalf("configuration has %d voters after %s, want %d (MinVoters %d): %v", len(ids), 3*deadTimeout, want, tc.minVoter, ids)
			}
			kept := 0
			for _, id := range dead {
				if ids[id] {
					kept++
				}
			}
			if wantKept := want - (tc.voters - tc.kill); kept != wantKept {
				t.Fatalf("%d dead voters kept, want %d: %v", kept, wantKept, ids)
			}
			commits(t, c, 1)
		})
	}

	t.Run("voter back before the timeout is kept", func(t *testing.T) {
		// The leader's heartbeats to a failed peer back off exponentially
		// (10ms doubling), so the first one to reach the restarted replica
		// may come seconds after the restart, later still when the restart
		// is slow under load: a timeout of several backoff steps keeps
		// "back before the timeout" true on a loaded machine.
		const timeout = 3 * deadTimeout
		c := tu.NewCluster(t, 5, func(_ int, cfg *node.NodeConfig) { cfg.DeadServerTimeout = timeout })
		c.StartAll()
		leader := c.WaitVoters(5, time.Minute)
		idx, dead := killFollowers(t, c, leader, 1)
		time.Sleep(deadTimeout / 4) // down for a while, far less than the timeout
		back := c.Start(idx[0])
		if back.ServerID() != dead[0] {
			t.Fatalf("restarted node has server ID %s, want %s", back.ServerID(), dead[0])
		}
		// Well past the point where the first failure would have expired.
		keepsVoters(t, c, dead, 2*timeout)
		if ids, _ := voterIDs(t, c); !ids[dead[0]] || len(ids) != 5 {
			t.Fatalf("returning voter %s: configuration %v", dead[0], ids)
		}
		tu.Eventually(t, 10*time.Second, func() error {
			if err := back.Ready(); err != nil {
				return errors.New("returning voter not ready: " + err.Error())
			}
			return nil
		})
		commits(t, c, 1)
	})

	// The leader remembers a failed heartbeat until it sees the voter resume.
	// If it stops leading in between, the resume is observed by someone else;
	// when it leads again the old failure must not count against a voter
	// that has been healthy all along.
	t.Run("failure seen in an earlier term does not remove a healthy voter", func(t *testing.T) {
		c := tu.NewCluster(t, 5, withCleanup(0))
		c.StartAll()
		a := c.WaitVoters(5, time.Minute)
		var b, other *node.Node
		for _, n := range c.Live() {
			switch {
			case n == a:
			case b == nil:
				b = n
			case other == nil:
				other = n
			}
		}
		// b is unreachable for ~1.5s in all, less than DeadServerTimeout.
		isolated := time.Now()
		b.SetIsolated(true)
		time.Sleep(deadTimeout / 4) // a's heartbeats to b fail meanwhile
		transferTo(t, c, other)
		// Keep b cut off a little longer, so a's last heartbeat goroutine
		// for it ends on a failure rather than reporting its resumption.
		time.Sleep(deadTimeout / 2)
		b.SetIsolated(false)
		tu.Eventually(t, 10*time.Second, func() error { return b.Ready() })
		// a hands leadership back only once its old record of b's failure
		// is older than DeadServerTimeout.
		time.Sleep(time.Until(isolated.Add(deadTimeout + deadTimeout/4)))
		transferTo(t, c, a)
		keepsVoters(t, c, []string{b.ServerID()}, deadTimeout) // several cleanup ticks on the returning leader
		commits(t, c, 1)
	})
}

// transferTo hands leadership to target, retrying: a transfer fails when
// the target does not win within an election timeout, which a loaded
// machine can cause.
func transferTo(t *testing.T, c *tu.Cluster, target *node.Node) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, func() error {
		if _, ok := target.Allowed(); ok {
			return nil
		}
		l := c.WaitLeader(time.Minute)
		if l != target {
			if err := l.Raft().LeadershipTransferToServer(raftID(target), raftAddr(target)).Error(); err != nil {
				return fmt.Errorf("transferring leadership to %s: %w", target.ServerID(), err)
			}
		}
		return errors.New("target does not lead yet")
	})
}

func raftID(n *node.Node) raft.ServerID        { return raft.ServerID(n.ServerID()) }
func raftAddr(n *node.Node) raft.ServerAddress { return raft.ServerAddress(n.Address()) }
