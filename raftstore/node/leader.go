package node

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// ErrNotLeader is returned by leader-only operations on a follower.
var ErrNotLeader = errors.New("raftstore: not the leader")

// ErrLeadershipLost is the cause of a leader context cancelled because this
// node stopped leading or lost contact with a quorum.
var ErrLeadershipLost = errors.New("raftstore: leadership lost")

// ErrGateClosed is the cause of a member-write context cancelled because the
// node is handing leadership over or shutting down.
var ErrGateClosed = errors.New("raftstore: member-write gate closed for a leadership handover")

// leadership tracks the leader context of the current term and the
// member-write gate inside it.
type leadership struct {
	mu        sync.Mutex
	epoch     uint64 // bumped on every LeaderCh event
	raftSince time.Time
	ctx       context.Context
	cancel    context.CancelCauseFunc
	term      uint64
	lastTerm  uint64               // the last term this node opened a leader context in; never cleared
	voters    []raft.ServerAddress // other voters, refreshed by the watchdog
	nVoters   int
	subs      []chan bool
	busy      bool // establish in progress

	// wctx is the member-write context: a child of ctx, cancelled earlier
	// when the gate closes for a transfer (paused) or for good (closed).
	wctx     context.Context
	wcancel  context.CancelCauseFunc
	paused   int
	closed   bool
	inflight int           // open permits (Enter without done)
	idle     chan struct{} // closed when inflight drops to 0

	// leaseUntil is when the write lease lapses: every permitted member
	// write must have ended by then (see lease.go); leaseCh is
	// closed and replaced whenever it moves forward.
	leaseUntil time.Time
	leaseCh    chan struct{}

	// firstWrite is when the first member pod write of lastTerm was
	// permitted; zero until then. With raftSince it shows what a handover
	// cost (Node.Handover, replicafed_raft_first_member_write_seconds).
	firstWrite time.Time
}

func (l *leadership) init() {}

// openWritesLocked opens the member-write context of the current leader
// context unless the gate is paused or closed.
func (l *leadership) openWritesLocked() {
	if l.ctx == nil || l.wctx != nil || l.paused > 0 || l.closed {
		return
	}
	l.wctx, l.wcancel = context.WithCancelCause(l.ctx)
}

// closeWritesLocked cancels the member-write context.
func (l *leadership) closeWritesLocked(cause error) {
	if l.wcancel != nil {
		l.wcancel(cause)
	}
	l.wctx, l.wcancel = nil, nil
}

// leadershipLoop follows raft's LeaderCh. Raft keeps the latest value if we
// are slow, so no transition is lost.
func (n *Node) leadershipLoop() {
	ch := n.raft.LeaderCh()
	for {
		select {
		case <-n.stopCh:
			return
		case isLeader := <-ch:
			l := &n.lead
			l.mu.Lock()
			l.epoch++
			if isLeader {
				l.raftSince = time.Now()
			}
			closed := l.closed
			l.mu.Unlock()
			switch {
			case isLeader && closed:
				n.goRun(n.handBack)
			case isLeader:
				n.goRun(n.establish)
			default:
				n.lead.revoke(n, "raft stepped down")
			}
		}
	}
}

// handBack gives leadership away again when raft elects this node after
// StepDown closed its gate for good (raft keeps running until Shutdown,
// and a stepped-down node is as good a candidate as any): leading with
// the gate closed, it would let nobody act, and the other voters, hearing
// from it, would never stand. One runs at a time; it looks again after
// marking itself done, so an election that came meanwhile is not missed.
func (n *Node) handBack() {
	for n.handingBack.CompareAndSwap(false, true) {
		n.transferUntilGone()
		n.handingBack.Store(false)
		if n.stopped() || n.raft.State() != raft.Leader || !n.hasOtherVoters() {
			return
		}
	}
}

// transferUntilGone transfers leadership, retrying every heartbeat
// timeout, until this node no longer leads or stops.
func (n *Node) transferUntilGone() {
	for !n.stopped() && n.raft.State() == raft.Leader && n.hasOtherVoters() {
		err := n.raft.LeadershipTransfer().Error()
		if err == nil {
			n.log.Info("Handed leadership back after stepping down")
			return
		}
		n.log.Error(err, "Handing leadership back after stepping down failed; retrying")
		if !n.sleep(context.Background(), n.cfg.HeartbeatTimeout) {
			return
		}
	}
}

// establish runs a Barrier so the FSM holds every entry of earlier terms,
// then opens the leader context. Workers must not act before it.
func (n *Node) establish() {
	l := &n.lead
	l.mu.Lock()
	if l.busy || l.ctx != nil {
		l.mu.Unlock()
		return
	}
	l.busy = true
	epoch := l.epoch
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.busy = false
		l.mu.Unlock()
	}()
	for {
		if n.stopped() || n.raft.State() != raft.Leader {
			return
		}
		err := n.raft.Barrier(n.cfg.ApplyTimeout).Error()
		if err == nil {
			break
		}
		n.log.Error(err, "Barrier after gaining leadership failed")
		if !n.sleep(context.Background(), 50*time.Millisecond) {
			return
		}
	}
	n.refreshVoters()
	l.mu.Lock()
	if l.epoch != epoch || l.ctx != nil || n.raft.State() != raft.Leader {
		l.mu.Unlock()
		return
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	l.term = n.raft.CurrentTerm()
	if l.term != l.lastTerm {
		l.firstWrite = time.Time{}
	}
	l.lastTerm = l.term
	l.openWritesLocked()
	term := l.term
	l.notify(true)
	l.mu.Unlock()
	n.log.Info("Leading", "term", term)
}

func (l *leadership) revoke(n *Node, why string) {
	l.mu.Lock()
	if l.ctx == nil {
		l.mu.Unlock()
		return
	}
	l.closeWritesLocked(ErrLeadershipLost)
	l.cancel(ErrLeadershipLost)
	term := l.term
	l.ctx, l.cancel, l.term = nil, nil, 0
	l.leaseUntil = time.Time{}
	l.notify(false)
	l.mu.Unlock()
	n.log.Info("Stopped leading", "term", term, "reason", why)
}

// notify delivers the latest value to every subscriber; held under l.mu.
func (l *leadership) notify(v bool) {
	for _, ch := range l.subs {
		select {
		case <-ch:
		default:
		}
		ch <- v
	}
}

// LeaderChanges returns a channel that receives true when this node starts
// leading (after the Barrier) and false when it stops. Only the latest value
// is kept for a slow reader.
func (n *Node) LeaderChanges() <-chan bool {
	ch := make(chan bool, 1)
	n.lead.mu.Lock()
	n.lead.subs = append(n.lead.subs, ch)
	if n.lead.ctx != nil {
		ch <- true
	}
	n.lead.mu.Unlock()
	return ch
}

// Leading returns the leader context of the current term, cancelled (with
// cause ErrLeadershipLost) as soon as this node stops leading or loses
// contact with a quorum. ok is false on followers and before the Barrier.
func (n *Node) Leading() (ctx context.Context, term uint64, ok bool) {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ctx == nil {
		return nil, 0, false
	}
	return l.ctx, l.term, true
}

// Handover returns when raft last made this node leader and when the first
// member pod write of its latest term was permitted (zero while none was).
// Both are zero on a node that never led.
func (n *Node) Handover() (elected, firstWrite time.Time) {
	n.lead.mu.Lock()
	defer n.lead.mu.Unlock()
	return n.lead.raftSince, n.lead.firstWrite
}

// LastLeaderTerm returns the last term this node led in (0 if never), also
// while its leader context is revoked: a lease that lapsed and came back
// within one raft term keeps the term, so the leader can still settle what
// it decided in it.
func (n *Node) LastLeaderTerm() uint64 {
	n.lead.mu.Lock()
	defer n.lead.mu.Unlock()
	return n.lead.lastTerm
}

// Allowed is the member-write fence: it returns the member-write context
// and true only while this node leads, its gate is open (no handover or
// shutdown under way) and a quorum of voters answered its RPCs within
// LeaderLeaseTimeout. Followers cannot elect another leader before
// HeartbeatTimeout (> lease) has passed without hearing from this node, and
// a handover closes the gate and drains member writes before it starts, so
// a write permitted here does not overlap a newer leader's writes, except
// for a request delayed in flight (a paused process); reserved names fence
// those (see the raftstore package doc).
func (n *Node) Allowed() (context.Context, bool) {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if !n.allowedLocked() {
		return nil, false
	}
	return l.wctx, true
}

func (n *Node) allowedLocked() bool {
	l := &n.lead
	return l.wctx != nil && l.wctx.Err() == nil && n.quorumContactLocked(time.Now())
}

// Enter is Allowed with accounting, for member writers: it returns the
// member-write context, the leader term, and done, which the caller must
// call once the writes made under ctx have returned. A handover or shutdown
// cancels ctx and then waits for every open permit before it transfers
// leadership.
func (n *Node) Enter() (ctx context.Context, term uint64, done func(), ok bool) {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if !n.allowedLocked() {
		return nil, 0, nil, false
	}
	if l.inflight == 0 {
		l.idle = make(chan struct{})
	}
	l.inflight++
	var once sync.Once
	return l.wctx, l.term, func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.inflight--; l.inflight == 0 {
				close(l.idle)
			}
		})
	}, true
}

// Gate returns a value with Allowed, for the hub reconciler.
func (n *Node) Gate() interface {
	Allowed() (context.Context, bool)
} {
	return n
}

// closeGate cancels member writes and keeps the gate closed (for good when
// final, else until reopenGate), then waits until every permit is done or
// ctx ends.
func (n *Node) closeGate(ctx context.Context, final bool) error {
	l := &n.lead
	l.mu.Lock()
	if final {
		l.closed = true
	} else {
		l.paused++
	}
	l.closeWritesLocked(ErrGateClosed)
	idle := l.idle
	pending := l.inflight
	l.mu.Unlock()
	if pending == 0 {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for %d member writes to end: %w", pending, ctx.Err())
	}
}

// reopenGate ends a pause begun by closeGate(ctx, false).
func (n *Node) reopenGate() {
	l := &n.lead
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paused > 0 {
		l.paused--
	}
	l.openWritesLocked()
}

// BeforeTransfer registers f to run after the gate closed and member writes
// drained, and before leadership is handed over (the expectations store
// commits its last observations there).
func (n *Node) BeforeTransfer(f func(ctx context.Context)) {
	n.hooksMu.Lock()
	defer n.hooksMu.Unlock()
	n.hooks = append(n.hooks, f)
}

func (n *Node) runHooks(ctx context.Context) {
	n.hooksMu.Lock()
	hooks := append([]func(context.Context){}, n.hooks...)
	n.hooksMu.Unlock()
	for _, h := range hooks {
		h(ctx)
	}
}

// handOver closes the gate (for good when final), drains member writes,
// runs the BeforeTransfer hooks and transfers leadership, all within
// ApplyTimeout. Without other voters, or when not leading, it only closes
// the gate.
func (n *Node) handOver(final bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.ApplyTimeout)
	defer cancel()
	if err := n.closeGate(ctx, final); err != nil {
		// Cancelled writes that have not returned yet cannot land with a
		// name nobody reserved; hand over anyway rather than hang.
		n.log.Error(err, "Member writes did not drain before the leadership transfer")
	}
	if !final {
		defer n.reopenGate()
	}
	if n.raft.State() != raft.Leader {
		if final {
			return nil
		}
		return ErrNotLeader
	}
	n.runHooks(ctx)
	if !n.hasOtherVoters() {
		if final {
			return nil
		}
		return errors.New("raftstore: no other voter to transfer leadership to")
	}
	if err := n.raft.LeadershipTransfer().Error(); err != nil {
		return fmt.Errorf("transferring leadership: %w", err)
	}
	return nil
}

func (n *Node) quorumContactLocked(now time.Time) bool {
	l := &n.lead
	if l.nVoters == 0 {
		return false
	}
	since := now.Add(-n.cfg.LeaderLeaseTimeout)
	if l.raftSince.After(since) {
		since = l.raftSince
	}
	acks := 1 // this node
	for _, a := range l.voters {
		if n.layer.LastContact(string(a)).After(since) {
			acks++
		}
	}
	return acks*2 > l.nVoters
}

func (n *Node) refreshVoters() {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return
	}
	var others []raft.ServerAddress
	total := 0
	self := false
	for _, s := range f.Configuration().Servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		total++
		if s.ID == n.serverID {
			self = true
			continue
		}
		others = append(others, s.Address)
	}
	if !self {
		total = 0 // not a voter: never allowed
	}
	n.lead.mu.Lock()
	n.lead.voters, n.lead.nVoters = others, total
	n.lead.mu.Unlock()
}

// gateWatchdog cancels the leader context once quorum contact is lost, and
// re-establishes leadership if raft still leads after contact returns.
func (n *Node) gateWatchdog() {
	interval := n.cfg.LeaderLeaseTimeout / 5
	if interval < 5*time.Millisecond {
		interval = 5 * time.Millisecond
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	refresh := 0
	for {
		select {
		case <-n.stopCh:
			return
		case <-t.C:
		}
		isLeader := n.raft.State() == raft.Leader
		if isLeader {
			if refresh++; refresh%10 == 0 {
				n.refreshVoters()
			}
		}
		l := &n.lead
		l.mu.Lock()
		leading := l.ctx != nil
		contact := n.quorumContactLocked(time.Now())
		busy := l.busy
		l.mu.Unlock()
		switch {
		case leading && (!isLeader || !contact):
			l.revoke(n, "no quorum contact within the leader lease")
		case !leading && isLeader && contact && !busy:
			n.goRun(n.establish)
		}
	}
}
