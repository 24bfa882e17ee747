package prune

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	testclock "k8s.io/utils/clock/testing"

	"github.com/replicafed/replicafed/federation/registry"
)

type fakeNode struct {
	mu      sync.Mutex
	leading bool
	changes chan bool
	calls   [][]string
	err     error
}

func (f *fakeNode) Leading() (context.Context, uint64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.leading {
		return nil, 0, false
	}
	return context.Background(), 3, true
}

func (f *fakeNode) LeaderChanges() <-chan bool { return f.changes }

func (f *fakeNode) PruneMembers(_ context.Context, members []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, slices.Clone(members))
	return f.err
}

func (f *fakeNode) setLeading(v bool) {
	f.mu.Lock()
	f.leading = v
	f.mu.Unlock()
}

func (f *fakeNode) prunes() [][]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func regs(names ...string) func(context.Context) ([]registry.Registration, error) {
	return func(context.Context) ([]registry.Registration, error) {
		out := make([]registry.Registration, len(names))
		for i, n := range names {
			out[i] = registry.Registration{Name: n}
		}
		return out, nil
	}
}

func TestOnce(t *testing.T) {
	listErr := errors.New("cache not synced")
	cases := []struct {
		name       string
		leading    bool
		registered func(context.Context) ([]registry.Registration, error)
		wantCalls  [][]string
		wantErr    bool
	}{
		{name: "leader prunes to every registered member", leading: true, registered: regs("a", "b", "c"),
			wantCalls: [][]string{{"a", "b", "c"}}},
		{name: "leader with no member left prunes all", leading: true, registered: regs(),
			wantCalls: [][]string{{}}},
		{name: "follower does nothing", leading: false, registered: regs("a")},
		{name: "listing error skips the round", leading: true, wantErr: true,
			registered: func(context.Context) ([]registry.Registration, error) { return nil, listErr }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			n := &fakeNode{leading: tc.leading}
			err := New(n, tc.registered).Once(context.Background())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Once error = %v, want error %v", err, tc.wantErr)
			}
			got := n.prunes()
			if len(got) != len(tc.wantCalls) {
				t.Fatalf("PruneMembers calls = %v, want %v", got, tc.wantCalls)
			}
			for i := range got {
				if !slices.Equal(got[i], tc.wantCalls[i]) {
					t.Errorf("call %d = %v, want %v", i, got[i], tc.wantCalls[i])
				}
			}
		})
	}
}

// TestStartRounds drives the runnable: a round on gaining leadership, on
// Trigger and on each interval.
func TestStartRounds(t *testing.T) {
	n := &fakeNode{changes: make(chan bool, 1)}
	clk := testclock.NewFakeClock(time.Unix(1000, 0))
	p := New(n, regs("m1", "m2"))
	p.Clock, p.Interval = clk, time.Minute
	rounds := make(chan error, 10)
	p.Done = func(err error) { rounds <- err }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Start(ctx) }()

	wait := func(what string, want int) {
		t.Helper()
		select {
		case err := <-rounds:
			if err != nil {
				t.Fatalf("%s: round failed: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no round", what)
		}
		if got := len(n.prunes()); got != want {
			t.Fatalf("%s: %d prunes, want %d", what, got, want)
		}
	}

	n.setLeading(true)
	n.changes <- true
	wait("leadership gained", 1)
	p.Trigger()
	wait("member removed", 2)
	if !clk.HasWaiters() {
		t.Fatal("no ticker after the first round") // created before the loop
	}
	clk.Step(time.Minute)
	wait("interval", 3)
	n.setLeading(false)
	p.Trigger()
	wait("follower", 3)

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Start did not return after cancel")
	}
}
