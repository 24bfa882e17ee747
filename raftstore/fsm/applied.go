package fsm

import (
	"context"
	"fmt"
	"sync"
)

// appliedIndex tracks the index of the last raft entry this FSM applied,
// for a follower that must read its own writes (WaitApplied).
type appliedIndex struct {
	mu    sync.Mutex
	index uint64
	// next is closed when index next grows.
	next chan struct{}
}

func newAppliedIndex() *appliedIndex { return &appliedIndex{next: make(chan struct{})} }

// set records that the entry at index has been applied.
func (a *appliedIndex) set(index uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if index <= a.index {
		return
	}
	a.index = index
	close(a.next)
	a.next = make(chan struct{})
}

// get returns the index and the channel closed when it next grows.
func (a *appliedIndex) get() (uint64, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.index, a.next
}

// AppliedIndex returns the index of the last raft entry this FSM applied
// or restored from a snapshot (0 before any, and after restoring a
// snapshot written before snapshots carried it, until the next entry).
func (f *FSM) AppliedIndex() uint64 {
	i, _ := f.applied.get()
	return i
}

// WaitApplied returns once this FSM has applied the raft entry at index
// (or a later one), or when ctx ends. A follower whose command the leader
// committed calls it before it reads the state the command changed: the
// leader answers once the entry is applied there, and this replica
// applies it a little later (after the leader's next heartbeat tells it
// the entry is committed).
func (f *FSM) WaitApplied(ctx context.Context, index uint64) error {
	for {
		cur, next := f.applied.get()
		if cur >= index {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting to apply raft entry %d here (applied %d): %w", index, cur, context.Cause(ctx))
		case <-next:
		}
	}
}
