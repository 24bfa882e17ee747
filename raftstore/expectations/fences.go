package expectations

import (
	"context"
	"sync"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// Owner fences (sharding, issue 27; raftstore doc step 15).
//
// A sync whose context carries a fence (ctrlexp.WithFence: the member's
// owner and epoch it was permitted under) writes on behalf of that member:
// its Reserve, ExpectDeletes and Reconcile carry fsm.OwnerFence, and the
// FSM checks it instead of the term, so a command decided under an older
// owner is refused (fsm.ErrStale, as a stale term is). The releasing
// settlements of a name reserved under a fence (SettleFailed, including
// the release after an indeterminate Reserve) carry the fence the name was
// reserved under, remembered here per key and name, and a key's forget
// (Delete) carries its member's latest fence: a worker that lost the
// member can no longer release what the new owner holds. Without a fence
// in the context nothing changes.

// fenceBook remembers the owner fences this store's callers wrote under.
type fenceBook struct {
	mu sync.Mutex
	// names maps each key's names reserved under a fence to that fence.
	names map[fsm.Key]map[string]fsm.OwnerFence
	// members is the latest (highest epoch) fence seen for each member.
	members map[string]fsm.OwnerFence
}

func newFenceBook() fenceBook {
	return fenceBook{names: map[fsm.Key]map[string]fsm.OwnerFence{}, members: map[string]fsm.OwnerFence{}}
}

// fenceOf returns the owner fence of ctx for a command on behalf of
// member, nil without one, and notes it as the member's latest.
func (s *Store) fenceOf(ctx context.Context, member string) *fsm.OwnerFence {
	f, ok := ctrlexp.FenceFrom(ctx)
	if !ok {
		return nil
	}
	of := fsm.OwnerFence{Owner: f.Owner, Epoch: f.Epoch}
	s.fences.saw(member, of)
	return &of
}

// ownedFence returns the latest fence seen for member while the committed
// table still gives member to that owner at that epoch.
func (s *Store) ownedFence(member string) (fsm.OwnerFence, bool) {
	f, ok := s.fences.latest(member)
	if !ok {
		return fsm.OwnerFence{}, false
	}
	own, ok := s.fsm.Owner(member)
	if !ok || own.Owner != f.Owner || own.Epoch != f.Epoch {
		return fsm.OwnerFence{}, false
	}
	return f, true
}

// mayCommit reports whether this store commits observations: on the
// leader, and on a replica that writes to members under a fence.
func (s *Store) mayCommit() bool {
	if _, _, ok := s.node.Leading(); ok {
		return true
	}
	return s.fences.any()
}

// saw notes f as member's latest fence unless a newer one was seen.
func (b *fenceBook) saw(member string, f fsm.OwnerFence) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if old, ok := b.members[member]; !ok || f.Epoch >= old.Epoch {
		b.members[member] = f
	}
}

// latest returns member's latest fence.
func (b *fenceBook) latest(member string) (fsm.OwnerFence, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.members[member]
	return f, ok
}

// has reports whether a fence was seen for member.
func (b *fenceBook) has(member string) bool {
	_, ok := b.latest(member)
	return ok
}

// any reports whether a fence was seen for any member.
func (b *fenceBook) any() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.members) > 0
}

// reserved remembers that names of k were reserved under f (nil: without
// a fence, which forgets any fence they had). The names are forgotten
// again when they are settled (take), reconciled as complete (drop), or
// when the key is forgotten.
func (b *fenceBook) reserved(k fsm.Key, f *fsm.OwnerFence, names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := b.names[k]
	if f != nil && m == nil {
		m = map[string]fsm.OwnerFence{}
		b.names[k] = m
	}
	for _, n := range names {
		if f != nil {
			m[n] = *f
		} else {
			delete(m, n)
		}
	}
	if len(m) == 0 {
		delete(b.names, k)
	}
}

// drop forgets the fences of names of k.
func (b *fenceBook) drop(k fsm.Key, names []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range names {
		delete(b.names[k], n)
	}
	if len(b.names[k]) == 0 {
		delete(b.names, k)
	}
}

// take returns and forgets the fence name of k was reserved under.
func (b *fenceBook) take(k fsm.Key, name string) (fsm.OwnerFence, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f, ok := b.names[k][name]
	if ok {
		delete(b.names[k], name)
		if len(b.names[k]) == 0 {
			delete(b.names, k)
		}
	}
	return f, ok
}

// forgetKey forgets the fences of k's names.
func (b *fenceBook) forgetKey(k fsm.Key) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.names, k)
}
