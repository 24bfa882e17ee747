package ownergate

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/replicafed/replicafed/controller/expectations"
)

const deadline = 10 * time.Second

var t0 = time.Date(2026, 11, 27, 8, 0, 0, 0, time.UTC)

// fakeLease holds members until a time of the fake clock and records the
// write deadlines it was asked about.
type fakeLease struct {
	clk   *clocktesting.FakeClock
	mu    sync.Mutex
	held  map[string]heldLease
	asked []time.Duration
}

type heldLease struct {
	fence expectations.Fence
	until time.Time
}

func (l *fakeLease) PermittedFor(member string, d time.Duration) (expectations.Fence, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, d)
	h, ok := l.held[member]
	if !ok || l.clk.Now().Add(d).After(h.until) {
		return expectations.Fence{}, false
	}
	return h.fence, true
}

func (l *fakeLease) set(member string, f expectations.Fence, until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if f == (expectations.Fence{}) {
		delete(l.held, member)
		return
	}
	l.held[member] = heldLease{fence: f, until: until}
}

type env struct {
	t     *testing.T
	clk   *clocktesting.FakeClock
	lease *fakeLease
	g     *Gates
	stop  context.CancelFunc
	// opened receives Options.Opened's calls.
	opened chan string
}

// newEnv returns Gates on a fake lease; run starts its watcher.
func newEnv(t *testing.T, run bool) *env {
	t.Helper()
	clk := clocktesting.NewFakeClock(t0)
	l := &fakeLease{clk: clk, held: map[string]heldLease{}}
	opened := make(chan string, 100)
	g, err := New(Options{Lease: l, WriteDeadline: deadline, Clock: clk, Opened: func(m string) { opened <- m }})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, clk: clk, lease: l, g: g, stop: func() {}, opened: opened}
	if run {
		e.start()
	}
	return e
}

// start runs the watcher until the test ends or stop.
func (e *env) start() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.g.Run(ctx) }()
	e.stop = func() { cancel(); <-done }
	e.t.Cleanup(e.stop)
	e.eventually("Run starts", e.g.admitting)
}

// eventually polls cond with a generous bound.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	for start := time.Now(); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Since(start) > 30*time.Second {
			e.t.Fatalf("timed out waiting: %s", what)
		}
	}
}

// settle waits until the watcher has handled every wake and waits on its
// timer.
func (e *env) settle() {
	e.t.Helper()
	e.eventually("the watcher waits on its timer", func() bool { return len(e.g.wake) == 0 && e.clk.HasWaiters() })
}

func (e *env) enter(member string) (context.Context, expectations.Fence, func(), bool) {
	return e.g.For(member).EnterFenced()
}

func cancelled(ctx context.Context) bool { return ctx.Err() != nil }

func fence(owner string, epoch uint64) expectations.Fence {
	return expectations.Fence{Owner: owner, Epoch: epoch}
}

// TestEnter: a sync enters only while the lease covers a write sent now,
// and then under the lease's fence.
func TestEnter(t *testing.T) {
	tests := []struct {
		name  string
		held  *heldLease
		run   bool
		want  bool
		fence expectations.Fence
	}{
		{name: "not owned", run: true},
		{name: "owned, lease covers the deadline", held: &heldLease{fence("r1", 4), t0.Add(deadline)}, run: true, want: true, fence: fence("r1", 4)},
		{name: "owned, lease shorter than the deadline", held: &heldLease{fence("r1", 4), t0.Add(deadline - time.Millisecond)}, run: true},
		{name: "owned, watcher not running", held: &heldLease{fence("r1", 4), t0.Add(time.Hour)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.run)
			if tc.held != nil {
				e.lease.set("m1", tc.held.fence, tc.held.until)
			}
			ctx, f, done, ok := e.enter("m1")
			if ok != tc.want || f != tc.fence {
				t.Fatalf("Enter = %+v, %v; want %+v, %v", f, ok, tc.fence, tc.want)
			}
			if ok {
				defer done()
				if cancelled(ctx) {
					t.Fatal("permitted with a cancelled context")
				}
			}
			e.lease.mu.Lock()
			defer e.lease.mu.Unlock()
			if e.lease.asked[0] != deadline {
				t.Fatalf("lease asked for %v, want the write deadline", e.lease.asked)
			}
		})
	}
}

// TestPermissionEnds: a permission's context is cancelled when the
// ownership moves, when the epoch changes, and before the lease lapses,
// with the watcher woken by Notify or its timer; after that the member
// is refused (or entered under its new fence).
func TestPermissionEnds(t *testing.T) {
	tests := []struct {
		name string
		// change is applied once the sync entered under r1/4.
		change func(e *env)
		// next is the fence the next Enter gets; zero: refused.
		next expectations.Fence
	}{
		{name: "ownership moved", change: func(e *env) {
			e.lease.set("m1", expectations.Fence{}, time.Time{})
			e.g.Notify()
		}},
		{name: "new epoch", next: fence("r1", 5), change: func(e *env) {
			e.lease.set("m1", fence("r1", 5), t0.Add(time.Hour))
			e.g.Notify()
		}},
		{name: "lease lapsing without a notification", change: func(e *env) {
			// Renewed to t0+15s, then no more: the check at t0+5s finds
			// 10s left, the one at t0+10s less than the deadline.
			e.lease.set("m1", fence("r1", 4), t0.Add(15*time.Second))
			e.settle()
			e.clk.Step(deadline / 2)
			e.settle()
			e.clk.Step(deadline / 2)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true)
			e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
			e.lease.set("m2", fence("r1", 2), t0.Add(time.Hour))
			ctx, _, done, ok := e.enter("m1")
			other, _, otherDone, _ := e.enter("m2")
			if !ok {
				t.Fatal("refused")
			}
			tc.change(e)
			e.eventually("the permission's context is cancelled", func() bool { return cancelled(ctx) })
			if !errors.Is(context.Cause(ctx), ErrPermissionEnded) {
				t.Fatalf("cause %v", context.Cause(ctx))
			}
			if e.clk.Now().After(t0.Add(15 * time.Second)) {
				t.Fatalf("cancelled at %v, after the lease lapsed", e.clk.Now())
			}
			done()
			if cancelled(other) {
				t.Fatal("another member's permission ended")
			}
			otherDone()
			nctx, f, ndone, ok := e.enter("m1")
			if ok != (tc.next != expectations.Fence{}) || f != tc.next {
				t.Fatalf("next Enter = %+v, %v; want %+v", f, ok, tc.next)
			}
			if ok {
				defer ndone()
				if cancelled(nctx) || nctx == ctx {
					t.Fatal("the new epoch needs a new, live context")
				}
			}
		})
	}
}

// TestLeaseCheckedAhead: while the lease keeps being renewed, the watcher's
// checks keep the permission.
func TestLeaseCheckedAhead(t *testing.T) {
	e := newEnv(t, true)
	e.lease.set("m1", fence("r1", 4), t0.Add(15*time.Second))
	ctx, _, done, _ := e.enter("m1")
	defer done()
	for range 6 {
		e.settle()
		e.lease.set("m1", fence("r1", 4), e.clk.Now().Add(15*time.Second))
		e.clk.Step(deadline / 2)
	}
	e.settle()
	if cancelled(ctx) {
		t.Fatalf("a renewed lease lost its permission: %v", context.Cause(ctx))
	}
}

// TestEnterSharesThePermission: Enters of one permission share its
// context, an epoch seen first by Enter ends the old one at once, and no
// Enter starts a goroutine.
func TestEnterSharesThePermission(t *testing.T) {
	e := newEnv(t, true)
	e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
	first, _, done, _ := e.enter("m1")
	before := runtime.NumGoroutine()
	for range 1000 {
		ctx, _, d, ok := e.enter("m1")
		if !ok || ctx != first {
			t.Fatal("an Enter of the same permission got another context")
		}
		d()
	}
	if n := runtime.NumGoroutine(); n > before+20 {
		t.Fatalf("goroutines grew from %d to %d over 1000 Enters", before, n)
	}
	e.lease.set("m1", fence("r1", 5), t0.Add(time.Hour))
	next, f, ndone, ok := e.enter("m1")
	if !ok || f != fence("r1", 5) || !cancelled(first) || cancelled(next) {
		t.Fatalf("after the new epoch: ok=%v fence=%+v old cancelled=%v new cancelled=%v", ok, f, cancelled(first), cancelled(next))
	}
	done()
	ndone()
}

// TestRunEnds: when Run returns every permission ends and none is given.
func TestRunEnds(t *testing.T) {
	e := newEnv(t, true)
	e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
	ctx, _, done, _ := e.enter("m1")
	defer done()
	e.stop()
	if !cancelled(ctx) {
		t.Fatal("a permission outlived Run")
	}
	if _, _, _, ok := e.enter("m1"); ok {
		t.Fatal("entered after Run returned")
	}
}

// TestDrain: Drain waits for every done of the member's Enters; done is
// idempotent.
func TestDrain(t *testing.T) {
	e := newEnv(t, true)
	e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
	e.lease.set("m2", fence("r1", 2), t0.Add(time.Hour))
	_, _, done1, _ := e.enter("m1")
	_, _, done2, _ := e.enter("m1")
	_, _, done3, _ := e.enter("m2")
	expired, cancel := context.WithCancel(context.Background())
	cancel()
	bg := context.Background()
	if err := e.g.Drain(expired, "m1"); err == nil {
		t.Fatal("drained with writes in flight")
	}
	done1()
	done1()
	if err := e.g.Drain(expired, "m1"); err == nil {
		t.Fatal("a second call of one done counted twice")
	}
	drained := make(chan error, 1)
	go func() { drained <- e.g.Drain(bg, "m1") }()
	done2()
	if err := <-drained; err != nil {
		t.Fatal(err)
	}
	if err := e.g.DrainAll(expired); err == nil {
		t.Fatal("drained all with m2 in flight")
	}
	done3()
	if err := e.g.DrainAll(bg); err != nil {
		t.Fatal(err)
	}
}

// TestPermittedContext: the write fence's check asks the lease with the
// write deadline and lets a sync's write leave only at the sync's own
// fence; a write without a fence gets the fallback's answer, and none
// without a fallback.
func TestPermittedContext(t *testing.T) {
	e := newEnv(t, false)
	e.lease.set("m1", fence("r1", 4), t0.Add(deadline))
	e.lease.set("m2", fence("r1", 4), t0.Add(deadline-time.Nanosecond))
	at := func(f expectations.Fence) context.Context { return expectations.WithFence(context.Background(), f) }
	yes := func() bool { return true }
	for _, tc := range []struct {
		name     string
		member   string
		ctx      context.Context
		unfenced func() bool
		want     bool
	}{
		{"owned at the sync's fence", "m1", at(fence("r1", 4)), nil, true},
		{"owned at a later epoch than the sync's", "m1", at(fence("r1", 3)), yes, false},
		{"another owner's fence", "m1", at(fence("r2", 4)), yes, false},
		{"lease shorter than the write deadline", "m2", at(fence("r1", 4)), yes, false},
		{"not owned", "m3", at(fence("r1", 4)), yes, false},
		{"unfenced, fallback permits", "m3", context.Background(), yes, true},
		{"unfenced, fallback refuses", "m1", context.Background(), func() bool { return false }, false},
		{"unfenced, no fallback", "m1", context.Background(), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := e.g.PermittedContext(tc.member, tc.unfenced)(tc.ctx); got != tc.want {
				t.Errorf("permitted = %v, want %v", got, tc.want)
			}
		})
	}
	for _, d := range e.lease.asked {
		if d != deadline {
			t.Fatalf("asked for %v, want %v", d, deadline)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	l := LeaseFunc(func(string, time.Duration) (expectations.Fence, bool) { return expectations.Fence{}, false })
	for _, o := range []Options{{WriteDeadline: time.Second}, {Lease: l}, {Lease: l, WriteDeadline: -time.Second},
		{Lease: l, WriteDeadline: time.Second, CheckInterval: 600 * time.Millisecond}, {Lease: l, WriteDeadline: time.Second, CheckInterval: -1}} {
		if _, err := New(o); err == nil {
			t.Errorf("New(%+v) accepted", o)
		}
	}
}

// TestOpened: a member whose Enter was refused is reported to Opened once
// the lease permits writes to it, whether a notification, the watcher's
// timer or Run's start finds it; then it is entered.
func TestOpened(t *testing.T) {
	tests := []struct {
		name string
		// run starts the watcher before the refused Enter; held permits m1
		// before it.
		run, held bool
		// permit makes the lease permit m1 and wakes the watcher.
		permit func(e *env)
	}{
		{name: "notified", run: true, permit: func(e *env) {
			e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
			e.g.Notify()
		}},
		{name: "polled", run: true, permit: func(e *env) {
			// A handover's wait ends: nothing is notified.
			e.settle()
			e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
			e.clk.Step(e.g.o.CheckInterval)
		}},
		{name: "refused before Run", held: true, permit: func(e *env) { e.start() }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, tc.run)
			if tc.held {
				e.lease.set("m1", fence("r1", 4), t0.Add(time.Hour))
			}
			if _, _, _, ok := e.enter("m1"); ok {
				t.Fatal("entered")
			}
			if _, _, _, ok := e.enter("m1"); ok {
				t.Fatal("entered")
			}
			tc.permit(e)
			select {
			case m := <-e.opened:
				if m != "m1" {
					t.Fatalf("opened %s, want m1", m)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("m1 never opened")
			}
			_, _, done, ok := e.enter("m1")
			if !ok {
				t.Fatal("refused once opened")
			}
			done()
			if len(e.opened) != 0 {
				t.Fatalf("opened more than once: %d more", len(e.opened))
			}
		})
	}
}

func TestCheckIntervalDefault(t *testing.T) {
	l := LeaseFunc(func(string, time.Duration) (expectations.Fence, bool) { return expectations.Fence{}, false })
	for _, tc := range []struct{ deadline, want time.Duration }{{10 * time.Second, DefaultCheckInterval}, {time.Second, 500 * time.Millisecond}} {
		g, err := New(Options{Lease: l, WriteDeadline: tc.deadline})
		if err != nil {
			t.Fatal(err)
		}
		if g.o.CheckInterval != tc.want {
			t.Errorf("deadline %v: check interval %v, want %v", tc.deadline, g.o.CheckInterval, tc.want)
		}
	}
}
