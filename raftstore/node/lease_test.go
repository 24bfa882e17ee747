package node_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/replicafed/replicafed/internal/metrics"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestWriteLease: only the leader holds the write lease; an isolated leader
// loses it by the time the majority elects another, and the new leader
// gains it.
func TestWriteLease(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	old := c.WaitVoters(3, 20*time.Second)
	tu.Eventually(t, 20*time.Second, func() error {
		if !old.WriteLease(0) {
			return errors.New("leader has no write lease")
		}
		return nil
	})
	for _, n := range c.Live() {
		if n != old && (n.WriteLease(0) || n.LeaseCovers(0)) {
			t.Fatalf("follower %s holds the write lease", n.ServerID())
		}
	}
	old.SetIsolated(true)
	tu.Eventually(t, 10*time.Second, func() error {
		if old.WriteLease(0) {
			return errors.New("isolated leader still holds the write lease")
		}
		return nil
	})
	next := c.WaitLeader(20*time.Second, old)
	if old.WriteLease(0) || old.LeaseCovers(0) {
		t.Fatal("old and new leader both hold the write lease")
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if !next.WriteLease(0) {
			return errors.New("new leader has no write lease")
		}
		return nil
	})
	// Waiting does not help a node that may not write at all.
	if old.WriteLease(200 * time.Millisecond) {
		t.Fatal("isolated node got a write lease by waiting")
	}
}

// TestWriteLeaseCoversTheWrite: the lease a contact round gives ends a
// heartbeat timeout (less the followers' contact age and a margin) after
// the round started, so a write whose deadline reaches that far is never
// permitted, while short ones are.
func TestWriteLeaseCoversTheWrite(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	hb := c.Cfgs[0].HeartbeatTimeout
	tu.Eventually(t, 20*time.Second, func() error {
		if !leader.WriteLease(hb / 3) {
			return errors.New("no write lease for a write of a third of the heartbeat timeout")
		}
		return nil
	})
	if leader.WriteLease(hb) {
		t.Fatalf("a write that may take the whole heartbeat timeout (%v) was permitted", hb)
	}
	// A write in flight gets another deadline on the same terms.
	tu.Eventually(t, 20*time.Second, func() error {
		if !leader.LeaseCovers(hb / 3) {
			return errors.New("lease does not cover another third of the heartbeat timeout")
		}
		return nil
	})
	if leader.LeaseCovers(hb) {
		t.Fatalf("the lease covers a whole heartbeat timeout (%v) from now", hb)
	}
	if n := leader.LegacyContactPeers(); n != 0 {
		t.Fatalf("%d voters counted as predating contact rounds, want 0", n)
	}
	// Rounds reuse one connection per voter rather than a TLS handshake
	// per round.
	var dials, answers int64
	tu.Eventually(t, 20*time.Second, func() error {
		if dials, answers = leader.ContactLinks(); answers < 40 {
			return fmt.Errorf("%d contact answers so far", answers)
		}
		return nil
	})
	if dials > 4 {
		t.Fatalf("%d connections dialled for %d contact answers from 2 voters, want at most 4", dials, answers)
	}
}

// TestWriteLeaseWithOlderVoters: during a rolling upgrade, voters that do
// not answer contact rounds count as VerifyLeader acknowledged them before,
// and the leader says so once per voter.
func TestWriteLeaseWithOlderVoters(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	for _, n := range c.Live() {
		if n != leader {
			n.WithoutFeature(node.FeatureContact)
		}
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if n := leader.LegacyContactPeers(); n != 2 {
			return fmt.Errorf("%d voters counted as predating contact rounds, want 2", n)
		}
		return nil
	})
	// Any lease from rounds before the voters turned old has lapsed now.
	hb := c.Cfgs[0].HeartbeatTimeout
	for waited := time.Now(); time.Since(waited) < hb; {
		leader.WriteLease(hb) // never permits: waits for renewals until then
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if !leader.WriteLease(0) {
			return errors.New("no write lease with older voters")
		}
		return nil
	})
}

// TestHandoverTimes: a leader records its first permitted member write once
// per term, after its election, and counts it in
// replicafed_raft_first_member_write_seconds; the next leader records its
// own.
func TestHandoverTimes(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	old := c.WaitVoters(3, 20*time.Second)
	elected, first := old.Handover()
	if elected.IsZero() || !first.IsZero() {
		t.Fatalf("before any write: elected %v, first write %v; want an election time and no write", elected, first)
	}
	samples := firstWriteSamples(t)
	first = waitFirstWrite(t, old)
	if first.Before(elected) {
		t.Fatalf("first write %v before the election %v", first, elected)
	}
	if got := firstWriteSamples(t); got != samples+1 {
		t.Fatalf("first-write samples %d after the first write, want %d", got, samples+1)
	}
	if !old.WriteLease(0) {
		t.Fatal("leader lost its write lease")
	}
	if _, again := old.Handover(); !again.Equal(first) {
		t.Fatalf("a later write moved the first write from %v to %v", first, again)
	}
	for _, n := range c.Live() {
		if _, f := n.Handover(); n != old && !f.IsZero() {
			t.Fatalf("follower %s recorded a write at %v", n.ServerID(), f)
		}
	}
	old.SetIsolated(true)
	next := c.WaitLeader(20*time.Second, old)
	nextFirst := waitFirstWrite(t, next)
	nextElected, _ := next.Handover()
	if !nextElected.After(elected) || nextFirst.Before(nextElected) {
		t.Fatalf("new leader elected %v (old one %v), first write %v", nextElected, elected, nextFirst)
	}
	if got := firstWriteSamples(t); got != samples+2 {
		t.Fatalf("first-write samples %d after the second leader's write, want %d", got, samples+2)
	}
}

func waitFirstWrite(t *testing.T, n *node.Node) time.Time {
	t.Helper()
	var first time.Time
	tu.Eventually(t, 20*time.Second, func() error {
		if !n.WriteLease(0) {
			return errors.New("no write lease yet")
		}
		_, first = n.Handover()
		return nil
	})
	if first.IsZero() {
		t.Fatalf("%s wrote, but no first write is recorded", n.ServerID())
	}
	return first
}

func firstWriteSamples(t *testing.T) uint64 {
	t.Helper()
	var m dto.Metric
	if err := metrics.RaftFirstMemberWrite.Write(&m); err != nil {
		t.Fatalf("reading the first-write histogram: %v", err)
	}
	return m.GetHistogram().GetSampleCount()
}
