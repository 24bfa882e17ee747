package clientlimit

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
)

// gate is a bucket whose Wait takes a token each time the test sends one;
// its TryAccept answers free.
type gate struct {
	tokens  chan struct{}
	free    bool
	waiting atomic.Int32 // requests in Wait
}

func newGate() *gate { return &gate{tokens: make(chan struct{})} }

func (g *gate) Wait(ctx context.Context) error {
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-g.tokens:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
func (g *gate) TryAccept() bool { return g.free }
func (g *gate) Accept()         { _ = g.Wait(context.Background()) }
func (g *gate) Stop()           {}
func (g *gate) QPS() float32    { return 1 }

// bound is how long a test waits for something that must happen; the
// checks that something has not happened are made after the event that
// decides it, never by waiting.
const bound = time.Minute

// start runs Wait in the background; the channel gets its result.
func start(p *prioritized, ctx context.Context) <-chan error {
	done := make(chan error, 1)
	go func() { done <- p.Wait(ctx) }()
	return done
}

// until polls cond until it holds, failing the test after bound.
func until(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, bound, true, func(context.Context) (bool, error) { return cond(), nil })
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, err)
	}
}

// newTestPrioritized puts g behind a prioritized bucket on a fake clock.
func newTestPrioritized(g *gate) (*prioritized, *clocktesting.FakeClock) {
	c := clocktesting.NewFakeClock(time.Unix(0, 0))
	return newPrioritized(g, c), c
}

func result(t *testing.T, what string, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(bound):
		t.Fatalf("%s still waiting after %v", what, bound)
		return nil
	}
}

// TestFirstGoesAhead: an unmarked request that arrived while a marked one
// waits gets no token until the marked one has its own, even though it
// holds the ordinary slot.
func TestFirstGoesAhead(t *testing.T) {
	g := newGate()
	p, _ := newTestPrioritized(g)
	ctx := context.Background()

	marked := start(p, First(ctx))
	until(t, "the marked request to wait", func() bool { return p.waitingFirst() == 1 })
	plain := start(p, ctx)
	until(t, "the unmarked request to hold the ordinary slot", func() bool { return len(p.ordinary) == 1 })

	g.tokens <- struct{}{}
	if err := result(t, "marked request", marked); err != nil {
		t.Fatalf("marked request: %v", err)
	}
	select {
	case err := <-plain:
		t.Fatalf("the unmarked request returned (%v) with no token left for it", err)
	default:
	}
	g.tokens <- struct{}{}
	if err := result(t, "unmarked request", plain); err != nil {
		t.Fatalf("unmarked request: %v", err)
	}
	if len(p.ordinary) != 0 {
		t.Error("the ordinary slot was not released")
	}
}

// TestOrdinaryWithNothingMarked: with no marked request, an unmarked one
// waits in the bucket at once.
func TestOrdinaryWithNothingMarked(t *testing.T) {
	g := newGate()
	p, _ := newTestPrioritized(g)
	plain := start(p, context.Background())
	g.tokens <- struct{}{} // blocks until the request is waiting in the bucket
	if err := result(t, "unmarked request", plain); err != nil {
		t.Fatal(err)
	}
}

// TestOrdinaryCancelled: an unmarked request whose context ends while it
// waits for a lull returns the context's error and frees its slot.
func TestOrdinaryCancelled(t *testing.T) {
	g := newGate()
	p, _ := newTestPrioritized(g)
	markedCtx, stopMarked := context.WithCancel(First(context.Background()))
	marked := start(p, markedCtx)
	until(t, "the marked request to wait", func() bool { return p.waitingFirst() == 1 })

	ctx, cancel := context.WithCancel(context.Background())
	plain := start(p, ctx)
	until(t, "the unmarked request to hold the ordinary slot", func() bool { return len(p.ordinary) == 1 })
	cancel()
	if err := result(t, "unmarked request", plain); !errors.Is(err, context.Canceled) {
		t.Fatalf("unmarked request: %v, want %v", err, context.Canceled)
	}
	until(t, "the ordinary slot to be freed", func() bool { return len(p.ordinary) == 0 })

	stopMarked()
	if err := result(t, "marked request", marked); !errors.Is(err, context.Canceled) {
		t.Fatalf("marked request: %v, want %v", err, context.Canceled)
	}
	if n := p.waitingFirst(); n != 0 {
		t.Errorf("%d marked requests still counted as waiting", n)
	}
}

// TestTryAccept: no token is taken without waiting while a marked request
// waits; the bucket answers once none does.
func TestTryAccept(t *testing.T) {
	g := &gate{tokens: make(chan struct{}), free: true}
	p, _ := newTestPrioritized(g)
	if !p.TryAccept() {
		t.Error("TryAccept refused with nothing marked waiting and a free token")
	}
	marked := start(p, First(context.Background()))
	until(t, "the marked request to wait", func() bool { return p.waitingFirst() == 1 })
	if p.TryAccept() {
		t.Error("TryAccept took a token while a marked request waits")
	}
	g.tokens <- struct{}{}
	if err := result(t, "marked request", marked); err != nil {
		t.Fatal(err)
	}
	until(t, "the marked request to leave", func() bool { return p.waitingFirst() == 0 })
	if !p.TryAccept() {
		t.Error("TryAccept refused once the marked request had left")
	}
}

func TestFirstMark(t *testing.T) {
	if IsFirst(context.Background()) {
		t.Error("an unmarked context reads as marked")
	}
	if !IsFirst(First(context.Background())) {
		t.Error("a marked context reads as unmarked")
	}
}

// TestOrdinaryPatience: an unmarked request waits for a lull no longer than
// Patience; then it takes its place in the bucket beside the marked ones.
func TestOrdinaryPatience(t *testing.T) {
	g := newGate()
	p, clk := newTestPrioritized(g)
	marked := start(p, First(context.Background()))
	until(t, "the marked request to wait", func() bool { return p.waitingFirst() == 1 })
	plain := start(p, context.Background())
	until(t, "the unmarked request to wait for its patience", clk.HasWaiters)

	clk.Step(Patience - time.Millisecond)
	if n := g.waiting.Load(); n != 1 {
		t.Fatalf("%d requests in the bucket before the unmarked one's patience ran out, want the marked one alone", n)
	}
	clk.Step(time.Millisecond)
	until(t, "the unmarked request to join the bucket", func() bool { return g.waiting.Load() == 2 })
	g.tokens <- struct{}{}
	g.tokens <- struct{}{}
	if err := result(t, "unmarked request", plain); err != nil {
		t.Fatal(err)
	}
	if err := result(t, "marked request", marked); err != nil {
		t.Fatal(err)
	}
}

// TestBusy: Busy reports marked requests waiting in a shared bucket, and
// never for a configuration without one.
func TestBusy(t *testing.T) {
	g := newGate()
	p, _ := newTestPrioritized(g)
	busy := Busy(&rest.Config{RateLimiter: p})
	if busy() {
		t.Error("busy with nothing waiting")
	}
	marked := start(p, First(context.Background()))
	until(t, "the marked request to make the bucket busy", busy)
	g.tokens <- struct{}{}
	if err := result(t, "marked request", marked); err != nil {
		t.Fatal(err)
	}
	until(t, "the bucket to be idle again", func() bool { return !busy() })

	if Busy(&rest.Config{})() {
		t.Error("a configuration without a limiter reads as busy")
	}
	shared := &rest.Config{}
	Shared(shared, 20, 30)
	if Busy(shared)() {
		t.Error("a new shared bucket reads as busy")
	}
}
