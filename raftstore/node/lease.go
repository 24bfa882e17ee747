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
// therefore measured from the start of a round, in which VerifyLeader
// makes the followers hear from this leader and a contact round
// (contact.go) asks each of them how long ago it did: the lease ends at
// the instant before which a quorum still votes for nobody else, and a
// member write may leave only if its deadline ends before that instant.
// Go's monotonic clock keeps running while the process is stopped, so a
// resumed leader finds its lease expired.

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
		if n.raft.State() != raft.Leader {
			continue
		}
		n.refreshVoters() // a quorum of the latest configuration
		l := &n.lead
		l.mu.Lock()
		leading := l.ctx != nil
		epoch, term := l.epoch, l.term
		voters, quorum := l.voters, l.nVoters/2+1
		l.mu.Unlock()
		if !leading {
			continue
		}
		start := time.Now()
		if err := n.awaitVerify(n.raft.VerifyLeader()); err != nil {
			continue
		}
		// What an older voter's VerifyLeader acknowledgement was taken to
		// promise before contact rounds: contact at the round's start.
		legacy := start.Add(n.cfg.HeartbeatTimeout - contactMargin(n.cfg.HeartbeatTimeout))
		until, ok := n.contactRound(start, term, voters, quorum, legacy)
		if !ok {
			metrics.RaftContactRoundsFailed.Inc()
			continue
		}
		metrics.RaftWriteLease.Observe(max(time.Until(until), 0).Seconds())
		n.extendLease(epoch, until)
	}
}

// extendLease moves the write lease of the leader context of epoch to
// until, if that is later.
func (n *Node) extendLease(epoch uint64, until time.Time) {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil || l.epoch != epoch || !until.After(l.leaseUntil) {
		return
	}
	l.leaseUntil = until
	if l.leaseCh != nil {
		close(l.leaseCh)
	}
	l.leaseCh = make(chan struct{})
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

// WriteLease reports whether a member write that may take up to d (its
// deadline) may leave now: Allowed holds and the write lease lasts until
// now + d, so the write has ended before another leader can be elected.
// While Allowed holds but the lease falls short it waits up to d for the
// next renewal. Callers ask it as late as possible, right before the
// request is sent.
func (n *Node) WriteLease(d time.Duration) bool {
	deadline := time.Now().Add(d)
	l := &n.lead
	for {
		l.mu.Lock()
		allowed := n.allowedLocked()
		now := time.Now()
		valid := now.Add(d).Before(l.leaseUntil)
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

// LeaseCovers reports, without waiting for a renewal, whether Allowed
// holds and the write lease lasts until now + d: WriteLease's check again
// for a member write already in flight whose deadline is up, before it
// gets another d (writefence.Renewal).
func (n *Node) LeaseCovers(d time.Duration) bool {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	return n.allowedLocked() && time.Now().Add(d).Before(l.leaseUntil)
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
