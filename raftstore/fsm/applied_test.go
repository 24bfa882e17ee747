package fsm

import (
	"bytes"
	"context"
	"errors"
	"io"
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

// A restored snapshot tells WaitApplied its index: a follower that
// installed a snapshot holding its own forwarded write reads it at once
// rather than after the next applied command.
func TestRestoreSetsAppliedIndex(t *testing.T) {
	settle, err := Encode(&Settle{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// source is applied at these indices before its snapshot; target
		// at these before the restore.
		source, target []uint64
		want           uint64
	}{
		{name: "fresh follower", source: []uint64{3, 12}, want: 12},
		{name: "follower behind", source: []uint64{3, 40}, target: []uint64{3, 7}, want: 40},
		{name: "empty snapshot", want: 0},
		{name: "never goes back", source: []uint64{5}, target: []uint64{9}, want: 9},
	} {
		t.Run(tc.name, func(t *testing.T) {
			src, dst := New("salt"), New("salt")
			for _, i := range tc.source {
				src.Apply(&raft.Log{Type: raft.LogCommand, Index: i, Term: 1, Data: settle})
			}
			for _, i := range tc.target {
				dst.Apply(&raft.Log{Type: raft.LogCommand, Index: i, Term: 1, Data: settle})
			}
			if err := dst.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, src)))); err != nil {
				t.Fatalf("Restore: %v", err)
			}
			if got := dst.AppliedIndex(); got != tc.want {
				t.Fatalf("AppliedIndex after restore = %d, want %d", got, tc.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := dst.WaitApplied(ctx, tc.want); err != nil {
				t.Fatalf("WaitApplied(%d) after restore: %v", tc.want, err)
			}
		})
	}
}

// A snapshot written before it carried the applied index restores as
// before: the index stays until the next entry.
func TestRestoreOldSnapshotKeepsAppliedIndex(t *testing.T) {
	body := []byte(`{"seq":0,"keys":{},"targets":{},"health":{},"dedup":[]}`)
	var buf bytes.Buffer
	if _, err := (&snapshot{body: body}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f := New("salt")
	if err := f.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatalf("Restore: %v", err)
	}
	if got := f.AppliedIndex(); got != 0 {
		t.Fatalf("AppliedIndex after an old snapshot = %d, want 0", got)
	}
}
