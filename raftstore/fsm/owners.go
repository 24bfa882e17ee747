package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Member ownership (sharding, issue 27).
//
// The raft leader assigns each member cluster to one replica, its owner,
// with AssignOwners; every change of a member's owner gives it a new epoch.
// Epochs come from one counter for the whole table (state.OwnerEpoch), so
// they only go up and are never reused, also when a member is removed and
// added again: a per-member high-water mark would have to outlive the
// member, a global counter is one number and orders every handover.
//
// An owner keeps its lease by committing RenewOwnership for the (member,
// epoch) pairs it holds; the FSM records, per owner, the raft index and
// term of its latest renewal, which the leader watches
// (raftstore/ownership.Watch) before it moves a member away.
//
// Commands that write on behalf of a member (Reserve, ExpectDeletes,
// Reconcile, and SettleFailed and the forgets, which release names) may
// carry an owner fence {Owner, Epoch}: the FSM then refuses them
// (CodeStale) unless that is the member's committed owner and epoch,
// instead of checking the term. Without a fence the term check applies
// exactly as before. A fenced Reconcile (the new owner's takeover) holds
// what earlier owners reserved or chose to delete, as an unfenced one
// holds what earlier terms did: "earlier" compares epochs, not terms.
//
// Reserved names across a handover. A name reserved under epoch E whose
// create may still land (the old owner paused with the request built) must
// never go to a different pod under E+1. So AssignOwners, in the entry that
// changes the owner, holds every outstanding reservation of the member's
// keys: the new owner's first Reserve hands those names out again before
// any fresh name (a late create of the old owner collides with the new
// owner's create of the same name, AlreadyExists), and the old owner
// cannot release them (its SettleFailed carries epoch E and is ignored).
// A name reissued under a fence is marked Reissued and a fenced
// SettleFailed always applies the hold-reissued rule: a failed or unsent
// create of a reissued name holds it again instead of releasing it, so no
// fresh name is ever granted beside a name whose pod may still appear.
// Pending deletes are kept as they are: they carry the pod's UID, so a late
// delete removes only the pod it names.
//
// Fail safe when replicas disagree on sharding. A member write WITHOUT a
// fence (Reserve, ExpectDeletes, Reconcile, and SettleFailed and the
// forgets) for a member that has a committed owner is refused (CodeStale;
// a settlement is skipped): a replica running without sharding can never
// write to a member an owner holds. The way back is AssignOwners.Drop,
// which the leader commits once the owner's lease has lapsed
// (node.Node.RunUnsharded): it holds the member's outstanding
// reservations, as a move does, and unfenced writes apply again.

// OwnerFence is the owner and epoch a member write was decided under.
type OwnerFence struct {
	Owner string `json:"o"`
	Epoch uint64 `json:"e"`
}

func (f *OwnerFence) validate() error {
	if f == nil {
		return nil
	}
	if f.Owner == "" || len(f.Owner) > maxKeyField || f.Epoch == 0 {
		return errors.New("owner fence: owner and a non-zero epoch are required")
	}
	return nil
}

// epoch is the fence's epoch, 0 without one.
func (f *OwnerFence) epoch() uint64 {
	if f == nil {
		return 0
	}
	return f.Epoch
}

// Ownership is the committed owner of one member.
type Ownership struct {
	Owner string `json:"o"`
	Epoch uint64 `json:"e"`
	// Handover is set when the previous owner may still have held a lease
	// when this assignment was decided (it was moved for balance): the new
	// owner waits a lease plus margin after it sees the assignment before
	// it writes (node.OwnerLease).
	Handover bool `json:"h,omitempty"`
	// Since is the leader's clock (Unix ns) when it decided the assignment.
	Since int64 `json:"since,omitempty"`
	// From is the previous owner while Handover is set: the one replica
	// whose ReleaseOwnership ends the wait early.
	From string `json:"from,omitempty"`
}

// String renders the ownership as owner@epoch.
func (o Ownership) String() string { return fmt.Sprintf("%s@%d", o.Owner, o.Epoch) }

// Renewal is where an owner's latest RenewOwnership was committed.
type Renewal struct {
	Index uint64 `json:"i"`
	Term  uint64 `json:"t"`
	// Now is the owner's clock when it proposed the renewal (Unix ns), for
	// diagnostics only: leases are measured on each replica's monotonic clock.
	Now int64 `json:"now"`
}

// MemberEpoch is one member at one epoch.
type MemberEpoch struct {
	Member string `json:"m"`
	Epoch  uint64 `json:"e"`
}

// OwnerAssignment gives Member to Owner.
type OwnerAssignment struct {
	Member string `json:"m"`
	Owner  string `json:"o"`
	// Handover asks the new owner to wait lease plus margin before it
	// writes: the previous owner may still hold a lease.
	Handover bool `json:"h,omitempty"`
	// From and FromRenewal are the previous owner and the raft index of
	// its latest renewal as the leader saw them when it decided. If the
	// entry finds another owner, or a newer renewal of it (one committed
	// while the assignment was on its way: a paused owner that resumed),
	// the assignment is applied with Handover set, since that renewal may
	// have extended the previous owner's lease past the decision.
	From        string `json:"from,omitempty"`
	FromRenewal uint64 `json:"fromIdx,omitempty"`
}

// AssignOwners changes member owners (leader only, term-fenced). A member
// whose owner changes gets a new epoch; one assigned to its current owner
// keeps its epoch. Drop removes members from the table (they left, or
// sharding was turned off) and holds their outstanding reservations, as a
// move does; ForgetOwners forgets the renewals of replicas that left the
// configuration.
type AssignOwners struct {
	Meta
	Set          []OwnerAssignment `json:"set,omitempty"`
	Drop         []string          `json:"drop,omitempty"`
	ForgetOwners []string          `json:"forget,omitempty"`
}

// RenewOwnership is an owner's lease renewal for the members it holds.
type RenewOwnership struct {
	Meta
	Owner string        `json:"owner"`
	Held  []MemberEpoch `json:"held,omitempty"`
}

// Type implements Command.
func (*AssignOwners) Type() Type { return TypeAssignOwners }

// Type implements Command.
func (*RenewOwnership) Type() Type { return TypeRenewOwnership }

// ReleaseOwnership is a previous owner's word that it has stopped writing
// to Member: it saw the assignment of Epoch move the member away, its
// syncs there have ended and its last write's deadline has passed. It
// ends that assignment's handover wait (Ownership.Handover) at once, so a
// planned move (a rebalance) costs a raft round trip instead of a lease
// plus margin. It changes nothing unless Member is at Epoch with a
// handover from Owner; a previous owner that cannot send it (dead, paused)
// leaves the wait to run out as before.
type ReleaseOwnership struct {
	Meta
	Owner  string `json:"owner"`
	Member string `json:"m"`
	Epoch  uint64 `json:"e"`
}

// Type implements Command.
func (*ReleaseOwnership) Type() Type { return TypeReleaseOwnership }

func (c *ReleaseOwnership) validate() error {
	if !validName(c.Owner) || !validName(c.Member) || c.Epoch == 0 {
		return errors.New("release ownership: owner, member and a non-zero epoch are required")
	}
	return nil
}

// applyReleaseOwnership ends the handover wait of c.Member's assignment at
// c.Epoch when c.Owner is the owner it moved from; HandoverEnded reports
// whether it did.
func (f *FSM) applyReleaseOwnership(c *ReleaseOwnership) Result {
	row, ok := f.st.Owners[c.Member]
	if !ok || row.Epoch != c.Epoch || !row.Handover || row.From != c.Owner {
		return Result{}
	}
	row.Handover, row.From = false, ""
	f.st.Owners[c.Member] = row
	return Result{HandoverEnded: true}
}

func validName(s string) bool { return s != "" && len(s) <= maxKeyField }

func (c *AssignOwners) validate() error {
	if c.Term == 0 {
		return errors.New("assign owners: term is required")
	}
	if len(c.Set)+len(c.Drop)+len(c.ForgetOwners) > maxItems {
		return errors.New("assign owners: too many items")
	}
	seen := make(map[string]bool, len(c.Set)+len(c.Drop))
	for _, a := range c.Set {
		if !validName(a.Member) || !validName(a.Owner) || seen[a.Member] {
			return fmt.Errorf("assign owners: invalid or repeated member %q or owner %q", a.Member, a.Owner)
		}
		seen[a.Member] = true
	}
	for _, m := range c.Drop {
		if !validName(m) || seen[m] {
			return fmt.Errorf("assign owners: invalid or repeated member %q", m)
		}
		seen[m] = true
	}
	for _, o := range c.ForgetOwners {
		if !validName(o) {
			return fmt.Errorf("assign owners: invalid owner %q", o)
		}
	}
	return nil
}

func (c *RenewOwnership) validate() error {
	if !validName(c.Owner) {
		return errors.New("renew ownership: owner is required")
	}
	if len(c.Held) > maxItems {
		return errors.New("renew ownership: too many members")
	}
	for _, h := range c.Held {
		if !validName(h.Member) || h.Epoch == 0 {
			return fmt.Errorf("renew ownership: invalid member %q or epoch", h.Member)
		}
	}
	return nil
}

// ownerFenceOf returns the owner fence of a command that writes on behalf
// of a member, and that member.
func ownerFenceOf(cmd Command) (*OwnerFence, string) {
	switch c := cmd.(type) {
	case *Reserve:
		return c.Fence, c.Key.Cluster
	case *ExpectDeletes:
		return c.Fence, c.Key.Cluster
	case *Reconcile:
		return c.Fence, c.Key.Cluster
	}
	return nil, ""
}

// UsesOwnership reports whether cmd needs a replica that knows member
// ownership: the sharding commands, and commands carrying an owner fence
// (an older replica would ignore the fence and apply the term check).
func UsesOwnership(cmd Command) bool {
	var items []Settlement
	switch c := cmd.(type) {
	case *AssignOwners, *RenewOwnership, *ReleaseOwnership, *SetMemberUsage:
		return true
	case *Reserve:
		if c.Fence != nil {
			return true
		}
		items = c.Settle
	case *ExpectDeletes:
		return c.Fence != nil
	case *Reconcile:
		return c.Fence != nil
	case *Settle:
		items = c.Items
	}
	return slices.ContainsFunc(items, func(s Settlement) bool { return s.Fence != nil })
}

// MayUseOwnership is a cheap pre-check of an encoded command for
// UsesOwnership: false means it certainly does not use ownership, true
// that it may (decode it and ask UsesOwnership).
func MayUseOwnership(encoded []byte) bool {
	switch TypeOf(encoded) {
	case TypeAssignOwners, TypeRenewOwnership, TypeReleaseOwnership, TypeSetMemberUsage:
		return true
	case TypeReserve, TypeSettle, TypeExpectDeletes, TypeReconcile:
		return bytes.Contains(encoded, []byte(`"fence":`))
	}
	return false
}

// owned reports whether member has a committed owner.
func (s *state) owned(member string) bool {
	_, ok := s.Owners[member]
	return ok
}

// ownerFenced reports whether fc is member's committed owner and epoch.
func (s *state) ownerFenced(member string, fc OwnerFence) bool {
	o, ok := s.Owners[member]
	return ok && o.Owner == fc.Owner && o.Epoch == fc.Epoch
}

// applyAssignOwners records new owners; a member whose owner changes gets
// the next epoch, and its outstanding reservations are held (see above).
func (f *FSM) applyAssignOwners(c *AssignOwners) Result {
	s := f.st
	for _, a := range c.Set {
		old, had := s.Owners[a.Member]
		if had && old.Owner == a.Owner {
			continue
		}
		handover := a.Handover || (had && (old.Owner != a.From || s.Renewals[old.Owner].Index != a.FromRenewal))
		s.OwnerEpoch++
		row := Ownership{Owner: a.Owner, Epoch: s.OwnerEpoch, Handover: handover, Since: c.Now}
		if handover && had {
			row.From = old.Owner
		}
		s.Owners[a.Member] = row
		s.holdMember(a.Member)
		delete(s.Usage, a.Member) // the new owner publishes afresh
	}
	for _, m := range c.Drop {
		if _, had := s.Owners[m]; had {
			delete(s.Owners, m)
			s.holdMember(m)
		}
		delete(s.Usage, m)
	}
	for _, o := range c.ForgetOwners {
		delete(s.Renewals, o)
	}
	return Result{}
}

// holdMember holds every outstanding reservation of member's keys: whoever
// owned it may still create those names, so they are reissued, never
// replaced by fresh ones.
func (s *state) holdMember(member string) {
	for _, ks := range s.sortedKeys() {
		if ks.Key.Cluster != member {
			continue
		}
		for n, r := range ks.Reservations {
			if !r.Held {
				r.Held, r.Seen = true, false
				ks.Reservations[n] = r
			}
		}
	}
}

// applyRenewOwnership records the owner's renewal at this entry and
// reports the pairs it does not hold.
func (f *FSM) applyRenewOwnership(c *RenewOwnership, logTerm, index uint64) Result {
	s := f.st
	s.Renewals[c.Owner] = Renewal{Index: index, Term: logTerm, Now: c.Now}
	var r Result
	for _, h := range c.Held {
		if !s.ownerFenced(h.Member, OwnerFence{Owner: c.Owner, Epoch: h.Epoch}) {
			r.NotOwned = append(r.NotOwned, h)
		}
	}
	return r
}

// Owner returns the committed owner of member.
func (f *FSM) Owner(member string) (Ownership, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	o, ok := f.st.Owners[member]
	return o, ok
}

// Owners returns a copy of the ownership table.
func (f *FSM) Owners() map[string]Ownership {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Owners)
}

// Renewals returns a copy of every owner's latest committed renewal.
func (f *FSM) Renewals() map[string]Renewal {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Renewals)
}
