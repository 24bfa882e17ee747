package fsm

import (
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Member usage (sharding, step 2).
//
// With sharding on, the raft leader does not cache the pods of the members
// it does not own, yet it plans for all of them. Each member's owner
// publishes the member's capacity usage with SetMemberUsage: an opaque
// blob (the capacity layer encodes and decodes it), applied only if the
// sender is the member's committed owner at exactly the committed epoch.
// The FSM keeps the latest accepted blob per member with the owner and
// epoch it came with and the raft index it was applied at, so a reader
// orders and ages usages by the log, without wall clocks. A member's usage
// is cleared when its owner changes or it leaves the ownership table (the
// new owner publishes afresh) and when PruneMembers drops the member.

// MaxUsageBytes is the largest usage blob one SetMemberUsage may carry.
const MaxUsageBytes = 512 << 10

// ErrUsageTooLarge is wrapped by the error for a usage blob larger than
// MaxUsageBytes.
var ErrUsageTooLarge = errors.New("member usage too large")

// SetMemberUsage is a member owner's latest capacity usage of Member.
type SetMemberUsage struct {
	Meta
	Member string `json:"m"`
	// Fence is the sender's ownership of Member: the usage applies only
	// while it is the member's committed owner and epoch.
	Fence OwnerFence `json:"fence"`
	// Usage is opaque to raftstore, at most MaxUsageBytes.
	Usage []byte `json:"u,omitempty"`
}

// Type implements Command.
func (*SetMemberUsage) Type() Type { return TypeSetMemberUsage }

func (c *SetMemberUsage) validate() error {
	if !validName(c.Member) {
		return errors.New("set member usage: a member name of 1 to 253 bytes is required")
	}
	if err := c.Fence.validate(); err != nil {
		return fmt.Errorf("set member usage of %s: %w", c.Member, err)
	}
	if len(c.Usage) > MaxUsageBytes {
		return fmt.Errorf("set member usage of %s: %w: %d bytes, at most %d allowed",
			c.Member, ErrUsageTooLarge, len(c.Usage), MaxUsageBytes)
	}
	return nil
}

// MemberUsage is the usage of one member as its owner last published it.
type MemberUsage struct {
	// Usage is the opaque blob.
	Usage []byte `json:"u,omitempty"`
	// Owner and Epoch are the ownership it was published under.
	Owner string `json:"o"`
	Epoch uint64 `json:"e"`
	// Index is the raft index of the entry that applied it (0 outside
	// raft): a higher index is a later usage.
	Index uint64 `json:"i"`
}

// applySetMemberUsage records c's usage when its fence is the member's
// committed owner and epoch; otherwise it changes nothing and says why.
func (f *FSM) applySetMemberUsage(c *SetMemberUsage, index uint64) Result {
	s := f.st
	row, ok := s.Owners[c.Member]
	switch {
	case !ok:
		return Result{Code: CodeStale, Msg: fmt.Sprintf("usage of member %s from %s: the member has no owner", c.Member, c.Fence.Owner)}
	case row.Owner != c.Fence.Owner:
		return Result{Code: CodeStale, Msg: fmt.Sprintf("usage of member %s from %s at epoch %d: the member is owned by %s",
			c.Member, c.Fence.Owner, c.Fence.Epoch, row)}
	case row.Epoch != c.Fence.Epoch:
		return Result{Code: CodeStale, Msg: fmt.Sprintf("usage of member %s from %s at epoch %d: the owner's epoch is %d",
			c.Member, c.Fence.Owner, c.Fence.Epoch, row.Epoch)}
	}
	s.Usage[c.Member] = MemberUsage{Usage: slices.Clone(c.Usage), Owner: row.Owner, Epoch: row.Epoch, Index: index}
	return Result{}
}

// MemberUsage returns a copy of member's latest usage published by its
// current owner, and whether there is one.
func (f *FSM) MemberUsage(member string) (MemberUsage, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	u, ok := f.st.Usage[member]
	u.Usage = slices.Clone(u.Usage)
	return u, ok
}

// AllMemberUsage returns a copy of every member's latest usage.
func (f *FSM) AllMemberUsage() map[string]MemberUsage {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := maps.Clone(f.st.Usage)
	for m, u := range out {
		u.Usage = slices.Clone(u.Usage)
		out[m] = u
	}
	return out
}
