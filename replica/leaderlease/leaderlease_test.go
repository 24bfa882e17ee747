package leaderlease

import (
	"context"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

const (
	ns       = "replicafed-system"
	name     = "replicafed-leader"
	interval = 5 * time.Second
)

type fakeLeader struct {
	mu      sync.Mutex
	leading bool
	allowed bool
	term    uint64
	changes chan bool
}

func (l *fakeLeader) Leading() (context.Context, uint64, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return context.Background(), l.term, l.leading
}

func (l *fakeLeader) Allowed() (context.Context, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return context.Background(), l.leading && l.allowed
}

func (l *fakeLeader) LeaderChanges() <-chan bool { return l.changes }

func (l *fakeLeader) set(leading, allowed bool, term uint64) {
	l.mu.Lock()
	l.leading, l.allowed, l.term = leading, allowed, term
	l.mu.Unlock()
}

func newClient(t *testing.T) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return fake.NewClientBuilder().WithScheme(s).Build()
}

func newWriter(c client.Client, id string, l Leader, clk *clocktesting.FakeClock) *Writer {
	return &Writer{Reader: c, Writer: c, Namespace: ns, Name: name, Identity: id, Leader: l, Interval: interval, Clock: clk}
}

func getLease(t *testing.T, c client.Client) *coordinationv1.Lease {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, l); err != nil {
		t.Fatalf("reading the Lease: %v", err)
	}
	return l
}

// TestSync walks a Lease through a leader's life: nothing while following
// or fenced, created on leading, never renewed within half an interval,
// taken over by the next leader with a transition counted.
func TestSync(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	start := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	la := &fakeLeader{}
	a := newWriter(c, "replicafed-0", la, clk)

	step := func(w *Writer, want bool) {
		t.Helper()
		wrote, err := w.Sync(ctx)
		if err != nil {
			t.Fatalf("Sync: %v", err)
		}
		if wrote != want {
			t.Fatalf("Sync wrote = %v, want %v", wrote, want)
		}
	}
	step(a, false) // follower
	la.set(true, false, 7)
	step(a, false) // leading but fenced (no quorum contact, or handing over)
	err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &coordinationv1.Lease{})
	if !apierrors.IsNotFound(err) {
		t.Fatalf("a follower or fenced leader wrote the Lease: %v", err)
	}

	la.set(true, true, 7)
	step(a, true)
	l := getLease(t, c)
	if got := *l.Spec.HolderIdentity; got != "replicafed-0" {
		t.Errorf("holder = %q", got)
	}
	if !l.Spec.RenewTime.Time.Equal(start) || !l.Spec.AcquireTime.Time.Equal(start) {
		t.Errorf("renew %v acquire %v, want both %v", l.Spec.RenewTime, l.Spec.AcquireTime, start)
	}
	if *l.Spec.LeaseDurationSeconds != 15 || *l.Spec.LeaseTransitions != 0 || l.Annotations[AnnotationTerm] != "7" {
		t.Errorf("duration %d transitions %d term %q, want 15, 0, 7", *l.Spec.LeaseDurationSeconds, *l.Spec.LeaseTransitions, l.Annotations[AnnotationTerm])
	}

	clk.Step(interval/2 - time.Millisecond)
	step(a, false) // not due
	clk.Step(time.Millisecond)
	step(a, true)
	clk.Step(interval / 2)
	step(a, true)
	l = getLease(t, c)
	if !l.Spec.RenewTime.Time.Equal(start.Add(interval)) || !l.Spec.AcquireTime.Time.Equal(start) {
		t.Errorf("after renewal: renew %v acquire %v", l.Spec.RenewTime, l.Spec.AcquireTime)
	}

	// Leadership moves to replicafed-1 in term 8.
	la.set(false, false, 0)
	clk.Step(time.Second)
	lb := &fakeLeader{}
	lb.set(true, true, 8)
	b := newWriter(c, "replicafed-1", lb, clk)
	step(b, true)
	l = getLease(t, c)
	took := start.Add(interval + time.Second)
	if *l.Spec.HolderIdentity != "replicafed-1" || *l.Spec.LeaseTransitions != 1 || !l.Spec.AcquireTime.Time.Equal(took) || l.Annotations[AnnotationTerm] != "8" {
		t.Errorf("after handover: holder %q transitions %d acquire %v term %q", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions, l.Spec.AcquireTime, l.Annotations[AnnotationTerm])
	}

	// replicafed-0 leads again (term 9) right away: a new term is always
	// written, whatever its own last write.
	lb.set(false, false, 0)
	la.set(true, true, 9)
	step(a, true)
	l = getLease(t, c)
	if *l.Spec.HolderIdentity != "replicafed-0" || *l.Spec.LeaseTransitions != 2 || l.Annotations[AnnotationTerm] != "9" {
		t.Errorf("after the return: holder %q transitions %d term %q", *l.Spec.HolderIdentity, *l.Spec.LeaseTransitions, l.Annotations[AnnotationTerm])
	}
}

// TestStart: the runnable writes as soon as leadership is gained and then
// on every tick of the injected clock while leading.
func TestStart(t *testing.T) {
	c := newClient(t)
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	l := &fakeLeader{changes: make(chan bool, 1)}
	w := newWriter(c, "replicafed-2", l, clk)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	l.set(true, true, 3)
	l.changes <- true
	waitFor(t, "the Lease created on leadership", func() bool {
		lease := &coordinationv1.Lease{}
		err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, lease)
		return err == nil && *lease.Spec.HolderIdentity == "replicafed-2"
	})
	first := getLease(t, c).Spec.RenewTime.Time
	waitFor(t, "a renewal on a tick", func() bool {
		if !clk.HasWaiters() {
			return false
		}
		clk.Step(interval)
		return getLease(t, c).Spec.RenewTime.Time.After(first)
	})
}

// waitFor polls cond with a generous bound: the writer runs in its own
// goroutine on a loaded machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
