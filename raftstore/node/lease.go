package node

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/internal/metrics"
)

// The write lease: why quorum contact alone is not enough.
//
// quorumContactLocked counts bytes read from peers, and raft's own lease
// counts responses, both by the time they are read. A process stopped with
// SIGSTOP (or stalled by a long GC) reads, as it resumes, responses that
// arrived while it stood still, and for a moment looks freshly acknowledged
// while a newer leader already writes to the members. The write lease is
// measured from the time a heartbeat round was sent instead: after
// VerifyLeader succeeds, a quorum acknowledged this term after t0, and none
// of them votes for another candidate before t0 + HeartbeatTimeout >
// t0 + LeaderLeaseTimeout. Go's monotonic clock keeps running while the
// process is stopped, so a resumed leader finds its lease expired.

// leaseVerifier keeps the write lease fresh while this node leads.
func (n *Node) leaseVerifier() {
	interval := n.cfg.LeaderLeaseTimeout / 4
	if interval < 5*time.Millisecond {
		interval = 5 * time.Millisecond
	}
	for {
		if !n.sleep(context.Background(), interval) {
			return
		}
		l := &n.lead
		l.mu.Lock()
		leading := l.ctx != nil
		epoch := l.epoch
		l.mu.Unlock()
		if !leading || n.raft.State() != raft.Leader {
			continue
		}
		sent := time.Now()
		if err := n.awaitVerify(n.raft.VerifyLeader()); err != nil {
			continue
		}
		l.mu.Lock()
		if l.ctx != nil && l.epoch == epoch {
			if until := sent.Add(n.cfg.LeaderLeaseTimeout); until.After(l.leaseUntil) {
				l.leaseUntil = until
				if l.leaseCh != nil {
					close(l.leaseCh)
				}
				l.leaseCh = make(chan struct{})
			}
		}
		l.mu.Unlock()
	}
}

// awaitVerify returns f's error, or raft.ErrRaftShutdown once the node
// stops. hashicorp/raft queues VerifyLeader futures in a buffered channel
// and gives them no shutdown channel: one queued as raft shuts down is
// never answered, and waiting on it alone hung Kill (seen under load in
// TestFailoverCreatesEachSlotOnce). The goroutine left behind then is one
// per node, at its end.
func (n *Node) awaitVerify(f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-n.stopCh:
		return raft.ErrRaftShutdown
	}
}

// WriteLease reports whether a member write may leave now: Allowed holds
// and a quorum acknowledged a heartbeat this node sent less than
// LeaderLeaseTimeout ago. While Allowed holds but the lease has lapsed it
// waits up to wait for the next verification. Callers ask it as late as
// possible, right before the request is sent.
func (n *Node) WriteLease(wait time.Duration) bool {
	deadline := time.Now().Add(wait)
	l := &n.lead
	for {
		l.mu.Lock()
		allowed := n.allowedLocked()
		now := time.Now()
		valid := now.Before(l.leaseUntil)
		if allowed && valid {
			n.markFirstWriteLocked(now)
		}
		if l.leaseCh == nil {
			l.leaseCh = make(chan struct{})
		}
		ch := l.leaseCh
		l.mu.Unlock()
		switch {
		case !allowed:
			return false
		case valid:
			return true
		}
		remaining := deadline.Sub(now)
		if remaining <= 0 {
			return false
		}
		t := time.NewTimer(remaining)
		select {
		case <-ch:
		case <-t.C:
		case <-n.stopCh:
		}
		t.Stop()
	}
}

// markFirstWriteLocked records the first member pod write permitted in this
// term and how long after raft's election it came: the part of a
// handover's cost that is replicafed's own, not the election's.
func (n *Node) markFirstWriteLocked(now time.Time) {
	l := &n.lead
	if !l.firstWrite.IsZero() || l.raftSince.IsZero() {
		return
	}
	l.firstWrite = now
	metrics.RaftFirstMemberWrite.Observe(now.Sub(l.raftSince).Seconds())
}
