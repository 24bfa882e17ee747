package fsm

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// WaitApplied returns at once for an index already applied, waits for a
// later entry, and gives up with ctx; entries other than commands do not
// reach the FSM and change nothing.
func TestWaitApplied(t *testing.T) {
	f := New("salt")
	settle, err := Encode(&Settle{})
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Type: raft.LogCommand, Index: 5, Term: 1, Data: settle})
	f.Apply(&raft.Log{Type: raft.LogNoop, Index: 9, Term: 1})
	if got := f.AppliedIndex(); got != 5 {
		t.Fatalf("AppliedIndex = %d, want 5", got)
	}
	ctx := context.Background()
	for _, i := range []uint64{0, 4, 5} {
		if err := f.WaitApplied(ctx, i); err != nil {
			t.Fatalf("WaitApplied(%d): %v", i, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := f.WaitApplied(short, 6); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitApplied(6) with nothing applied = %v, want the deadline", err)
	}
	done := make(chan error, 1)
	go func() { done <- f.WaitApplied(ctx, 7) }()
	f.Apply(&raft.Log{Type: raft.LogCommand, Index: 6, Term: 1, Data: settle})
	f.Apply(&raft.Log{Type: raft.LogCommand, Index: 8, Term: 1, Data: settle})
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("WaitApplied(7): %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("WaitApplied(7) still waiting after entry 8 was applied")
	}
}
