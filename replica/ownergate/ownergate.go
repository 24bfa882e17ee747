// Package ownergate turns this replica's lease on the members it owns
// (sharding, issue 27) into one member-write gate per member for the
// member engine (engine.FencedGate), and into the per-member check the
// member client's write fence asks before every pod write (Permitted).
//
// One watcher goroutine (Gates.Run) serves every member: a permission's
// context is cancelled when a check of the lease fails, and the lease is
// checked at once when Notify says ownership changed, when a new
// permission starts, and every CheckInterval while any permission is live
// or any member waits to be opened (Options.Opened). Enter itself starts
// no goroutine and, once a member's permission exists, allocates only its
// done func.
package ownergate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
)

// Lease is this replica's owner lease. The raft node's OwnerLease is one
// (through LeaseFunc, which converts its fence type).
type Lease interface {
	// PermittedFor reports whether this replica owns member and its lease
	// covers a write sent now whose answer is due within d, and the
	// (owner, epoch) such a write is fenced by.
	PermittedFor(member string, d time.Duration) (expectations.Fence, bool)
}

// LeaseFunc adapts a function to Lease.
type LeaseFunc func(member string, d time.Duration) (expectations.Fence, bool)

// PermittedFor implements Lease.
func (f LeaseFunc) PermittedFor(member string, d time.Duration) (expectations.Fence, bool) {
	return f(member, d)
}

// ErrPermissionEnded is the cause of a gate context cancelled because the
// member's write permission ended: its ownership moved, its epoch
// changed, or the lease has less than the write deadline left.
var ErrPermissionEnded = errors.New("member write permission ended (ownership moved, a new epoch, or the owner lease lapsing)")

// errStopped is the cause of the contexts cancelled when Run returns.
var errStopped = errors.New("member gates stopped")

// Options configure Gates.
type Options struct {
	// Lease is this replica's owner lease; required.
	Lease Lease
	// WriteDeadline is the deadline of every member write (config
	// controller.memberWriteTimeout, the write fence's d); required,
	// > 0. A sync enters only while the lease covers a write sent now
	// (PermittedFor(member, WriteDeadline)); its context ends at the
	// first check that finds that no longer true, so before the lease
	// lapses. Permitted asks the same.
	WriteDeadline time.Duration
	// CheckInterval is how often the watcher checks the lease of every
	// live permission and every member waiting to be opened; 0 means
	// DefaultCheckInterval or half the write deadline, whichever is
	// shorter. New refuses more than half the write deadline: each check
	// proves the lease for a whole deadline ahead, so a late timer still
	// finds the lease running.
	CheckInterval time.Duration
	// Opened, when set, is called with a member whose Enter was refused
	// once the lease permits writes to it again (this replica became its
	// owner, a handover's wait ended, a lapsed lease was renewed). The
	// engine drops a refused sync without a retry, so wire it to
	// worker.Manager.EnqueueMember. It runs on a goroutine of its own,
	// once per opening.
	Opened func(member string)
	// Clock is injected for tests; nil means the real clock. It must be
	// monotonic, as the lease's is.
	Clock clock.WithTicker
}

// DefaultCheckInterval is the longest default Options.CheckInterval.
const DefaultCheckInterval = time.Second

// run states of Gates.
const (
	notStarted = iota
	running
	stopped
)

// Gates hands out one gate per member, all watched by Run.
type Gates struct {
	o Options
	// wake asks the watcher for a check of every live permission now.
	wake chan struct{}

	mu      sync.Mutex
	state   int
	log     logr.Logger
	members map[string]*Gate
}

// New returns Gates for o. Nothing is permitted until Run runs.
func New(o Options) (*Gates, error) {
	if o.Lease == nil {
		return nil, errors.New("member gates need an owner lease")
	}
	if o.WriteDeadline <= 0 {
		return nil, fmt.Errorf("member gates need a positive write deadline, not %v", o.WriteDeadline)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	switch {
	case o.CheckInterval == 0:
		o.CheckInterval = min(DefaultCheckInterval, o.WriteDeadline/2)
	case o.CheckInterval < 0 || o.CheckInterval > o.WriteDeadline/2:
		return nil, fmt.Errorf("member gates check the lease every %v, which must be positive and at most half the write deadline %v", o.CheckInterval, o.WriteDeadline)
	}
	return &Gates{o: o, wake: make(chan struct{}, 1), log: logr.Discard(), members: map[string]*Gate{}}, nil
}

// For returns member's gate (the same one on every call); it implements
// engine.FencedGate.
func (g *Gates) For(member string) *Gate {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := g.members[member]
	if m == nil {
		m = &Gate{g: g, member: member}
		g.members[member] = m
	}
	return m
}

// PermittedContext returns the check the member client's write fence asks
// right before each pod write to member (writefence.Renewed's permitted).
// A write whose context carries a sync's fence
// (expectations.FenceFrom) leaves only while the lease covers a write sent
// now at exactly that owner and epoch, so a write of an earlier epoch never
// leaves under a later one. A write without a fence is not a sync's (the
// leader deleting a deleted FederatedReplicaSet's leftover pods): unfenced
// answers for it, and nil refuses it.
func (g *Gates) PermittedContext(member string, unfenced func() bool) func(context.Context) bool {
	return g.PermittedWithin(member, g.o.WriteDeadline, unfenced)
}

// PermittedWithin is PermittedContext for a write that may take up to d
// from now: with d shorter than the write deadline, the check a write
// already in flight passes to run on for d (writefence.Renewal.Covers).
func (g *Gates) PermittedWithin(member string, d time.Duration, unfenced func() bool) func(context.Context) bool {
	return func(ctx context.Context) bool {
		want, fenced := expectations.FenceFrom(ctx)
		if !fenced {
			return unfenced != nil && unfenced()
		}
		f, ok := g.o.Lease.PermittedFor(member, d)
		return ok && f == want
	}
}

// Notify says that the owned members or their epochs changed; the
// watcher checks every live permission at once. It never blocks: wire
// the owner lease's change notification to it.
func (g *Gates) Notify() {
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

// Run watches the permissions until ctx ends, then ends every one of them
// and permits nothing more. Gates permit nothing before Run starts.
func (g *Gates) Run(ctx context.Context) {
	g.mu.Lock()
	if g.state != notStarted {
		g.mu.Unlock()
		return
	}
	g.state, g.log = running, logr.FromContextOrDiscard(ctx)
	g.mu.Unlock()
	defer g.stop()
	for {
		if !g.wait(ctx, g.check()) {
			return
		}
	}
}

// wait waits for a wake, or for CheckInterval while a permission is live
// or a member waits to be opened (busy). It reports false when ctx ended.
func (g *Gates) wait(ctx context.Context, busy bool) bool {
	var tick <-chan time.Time
	if busy {
		t := g.o.Clock.NewTimer(g.o.CheckInterval)
		defer t.Stop()
		tick = t.C()
	}
	select {
	case <-ctx.Done():
		return false
	case <-g.wake:
	case <-tick:
	}
	return true
}

// stop ends every permission for good.
func (g *Gates) stop() {
	g.mu.Lock()
	g.state = stopped
	gs := g.gates()
	g.mu.Unlock()
	for _, m := range gs {
		m.end(nil, errStopped)
	}
}

// gates lists the members' gates; g.mu must be held.
func (g *Gates) gates() []*Gate {
	out := make([]*Gate, 0, len(g.members))
	for _, m := range g.members {
		out = append(out, m)
	}
	return out
}

// check checks every live permission and ends those the lease no longer
// covers, and opens the members refused meanwhile that the lease permits
// now. It reports whether any permission is still live or any member
// still waits to be opened.
func (g *Gates) check() bool {
	g.mu.Lock()
	gs := g.gates()
	g.mu.Unlock()
	busy := false
	for _, m := range gs {
		if m.check() {
			busy = true
		}
		if m.open() {
			busy = true
		}
	}
	return busy
}

// admitting reports whether Run runs, so a new permission is watched.
func (g *Gates) admitting() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state == running
}

// Drain waits until no sync holds a permission of member (every done of
// its Enters was called), or ctx ends.
func (g *Gates) Drain(ctx context.Context, member string) error {
	return g.For(member).drain(ctx)
}

// DrainAll waits until no sync holds a permission of any member, or ctx
// ends.
func (g *Gates) DrainAll(ctx context.Context) error {
	g.mu.Lock()
	gs := g.gates()
	g.mu.Unlock()
	for _, m := range gs {
		if err := m.drain(ctx); err != nil {
			return err
		}
	}
	return nil
}

// Gate is one member's write gate: an engine.FencedGate.
type Gate struct {
	g      *Gates
	member string

	mu  sync.Mutex
	cur *permission
	// refused is set when an Enter was refused and Options.Opened has not
	// been called since.
	refused bool
	// inflight counts the Enters whose done was not called; idle is
	// closed when it falls to 0.
	inflight int
	idle     chan struct{}
}

// permission is one (owner, epoch) of a member while the lease covers it.
type permission struct {
	fence  expectations.Fence
	ctx    context.Context
	cancel context.CancelCauseFunc
}

var _ engine.FencedGate = (*Gate)(nil)

// EnterFenced implements engine.FencedGate: ok is false unless Run runs
// and the lease covers a write to the member sent now; ctx is cancelled
// (cause ErrPermissionEnded) once it no longer does or the member's
// ownership or epoch changes; done must be called once every write made
// under ctx has returned (Drain waits for it).
func (m *Gate) EnterFenced() (context.Context, expectations.Fence, func(), bool) {
	f, ok := m.g.o.Lease.PermittedFor(m.member, m.g.o.WriteDeadline)
	if !ok {
		m.refuse()
		return nil, expectations.Fence{}, nil, false
	}
	m.mu.Lock()
	// Asked under m.mu: Run's end cancels every permission after it stops
	// admitting, so none made here outlives it.
	if !m.g.admitting() {
		m.mu.Unlock()
		m.refuse()
		return nil, expectations.Fence{}, nil, false
	}
	p, fresh := m.cur, false
	if p == nil || p.fence != f || p.ctx.Err() != nil {
		if p != nil {
			p.cancel(ErrPermissionEnded)
		}
		p, fresh = newPermission(f), true
		m.cur = p
	}
	if m.inflight == 0 {
		m.idle = make(chan struct{})
	}
	m.inflight++
	m.mu.Unlock()
	if fresh {
		m.g.log.V(1).Info("Member write permission starts", "cluster", m.member, "owner", f.Owner, "epoch", f.Epoch)
		// Watched from now on: a change notified before this permission
		// existed is checked against it too.
		m.g.Notify()
	}
	return p.ctx, f, sync.OnceFunc(m.exit), true
}

// Enter implements engine.Gate for callers that know only terms: the term
// is the ownership epoch. The engine calls EnterFenced instead.
func (m *Gate) Enter() (context.Context, uint64, func(), bool) {
	ctx, f, done, ok := m.EnterFenced()
	return ctx, f.Epoch, done, ok
}

func newPermission(f expectations.Fence) *permission {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &permission{fence: f, ctx: ctx, cancel: cancel}
}

// refuse records a refused Enter for Options.Opened; the first one since
// the last opening wakes the watcher, which then polls the lease.
func (m *Gate) refuse() {
	if m.g.o.Opened == nil {
		return
	}
	m.mu.Lock()
	first := !m.refused
	m.refused = true
	m.mu.Unlock()
	if first {
		m.g.Notify()
	}
}

// open calls Options.Opened when an Enter was refused and the lease
// permits writes now; it reports whether the member still waits.
func (m *Gate) open() bool {
	m.mu.Lock()
	refused := m.refused
	m.mu.Unlock()
	if !refused {
		return false
	}
	if _, ok := m.g.o.Lease.PermittedFor(m.member, m.g.o.WriteDeadline); !ok {
		return true
	}
	m.mu.Lock()
	m.refused = false
	m.mu.Unlock()
	m.g.log.V(1).Info("Member writes permitted again", "cluster", m.member)
	go m.g.o.Opened(m.member)
	return false
}

// exit is one Enter's done.
func (m *Gate) exit() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.inflight--; m.inflight == 0 {
		close(m.idle)
	}
}

// check ends the member's permission unless the lease still covers a
// write sent now at the same fence; it reports whether the permission
// is still live.
func (m *Gate) check() bool {
	m.mu.Lock()
	p := m.cur
	m.mu.Unlock()
	if p == nil {
		return false
	}
	f, ok := m.g.o.Lease.PermittedFor(m.member, m.g.o.WriteDeadline)
	if ok && f == p.fence && p.ctx.Err() == nil {
		return true
	}
	m.end(p, ErrPermissionEnded)
	return false
}

// end cancels permission p (the current one, whichever it is, when p is
// nil) with cause, unless another replaced it meanwhile.
func (m *Gate) end(p *permission, cause error) {
	m.mu.Lock()
	cur := m.cur
	if cur == nil || (p != nil && cur != p) {
		m.mu.Unlock()
		return
	}
	m.cur = nil
	m.mu.Unlock()
	cur.cancel(cause)
	m.g.log.V(1).Info("Member write permission ended", "cluster", m.member, "owner", cur.fence.Owner, "epoch", cur.fence.Epoch, "reason", cause.Error())
}

// drain waits until inflight is 0 or ctx ends.
func (m *Gate) drain(ctx context.Context) error {
	m.mu.Lock()
	if m.inflight == 0 {
		m.mu.Unlock()
		return nil
	}
	idle := m.idle
	m.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("waiting for the member writes of %s to drain: %w", m.member, context.Cause(ctx))
	}
}
