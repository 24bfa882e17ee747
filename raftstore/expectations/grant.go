package expectations

import (
	"cmp"
	"context"
	"slices"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// claimGranted hands a sync granted names of k (fsm grant-on-targets: the
// SetTargets that raised the member's target from zero reserved them)
// without a raft entry, or returns nil, and the caller commits a Reserve,
// which hands the same names out first.
//
// Claiming is safe only where no one else can have been handed the names
// and this store counts what it hands out: on the leader of the term that
// granted them (the only one to claim them in that term; a later term
// reconciles them like any earlier term's reservation), while the key's
// expectations are nothing but those granted names (nothing in flight,
// held or seen, no claim of this store unsettled), bounded as a Reserve
// is by min(intent target, committed target) - active. Claimed names
// count as outstanding in Satisfied until their pods are seen or their
// creates fail or end unknown, as a Reserve's names do. cmu makes two
// syncs of one key on this replica claim one after the other: the second
// finds the first's claim unsettled and reserves instead (the Reserve
// reissues the same names: at worst AlreadyExists). A sync under an owner
// fence never claims.
func (s *Store) claimGranted(ctx context.Context, k fsm.Key, intent ctrlexp.CreateIntent, prefix string) []string {
	if _, fenced := ctrlexp.FenceFrom(ctx); fenced {
		// An owner's sync (sharding): the FSM grants nothing to owned
		// members and holds what was granted when the member got an owner.
		return nil
	}
	term := s.term(ctx)
	if _, leading, ok := s.node.Leading(); !ok || term == 0 || leading != term {
		return nil
	}
	s.cmu.Lock()
	defer s.cmu.Unlock()
	v := s.view(k)
	now := s.clock.Now().UnixNano()
	if len(v.Deletes) > 0 || len(v.Reservations) == 0 || s.claimsOutstanding(k, v, now) > 0 {
		return nil
	}
	free := make([]fsm.Reservation, 0, len(v.Reservations))
	for _, r := range v.Reservations {
		// Enough of its TTL left that the create ends long before it
		// expires: an expired claim would count neither here nor in the FSM.
		if !r.Granted || r.Held || r.Term != term || r.Expiry-now < int64(s.ttl)/2 || !fsm.NamedWith(r.Name, prefix) {
			return nil
		}
		free = append(free, r)
	}
	target := intent.Target
	if rec, ok := s.fsm.Targets(fsm.FRSRef{Namespace: k.Namespace, Name: k.Name}); ok {
		target = min(target, rec.Targets[k.Cluster])
	}
	n := min(intent.Count, int(target)-intent.Active, len(free))
	if n <= 0 {
		return nil
	}
	// Oldest first, as a Reserve hands them out.
	slices.SortFunc(free, func(a, b fsm.Reservation) int { return cmp.Compare(a.Seq, b.Seq) })
	names := make([]string, n)
	for i := range names {
		names[i] = free[i].Name
	}
	if s.claimed == nil {
		s.claimed = map[fsm.Key][]string{}
	}
	s.claimed[k] = names
	return names
}

// claimsOutstanding counts k's claimed names still granted, not held and
// unexpired in v (their pod not seen, their create not settled) and
// forgets the claim once none is. The caller holds cmu.
func (s *Store) claimsOutstanding(k fsm.Key, v fsm.KeyView, now int64) int {
	var n int
	for _, name := range s.claimed[k] {
		if r, ok := v.Reservations[name]; ok && r.Granted && !r.Held && r.Expiry > now {
			n++
		}
	}
	if n == 0 {
		delete(s.claimed, k)
	}
	return n
}

// onlyUnclaimedGrants reports whether k's expectations are nothing but
// names granted in term that this store has not handed out: no pod can
// carry one of them, so a takeover reconcile has nothing to settle.
func (s *Store) onlyUnclaimedGrants(k fsm.Key, term uint64) bool {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	v := s.view(k)
	now := s.clock.Now().UnixNano()
	if len(v.Deletes) > 0 || len(v.Reservations) == 0 || s.claimsOutstanding(k, v, now) > 0 {
		return false
	}
	for _, r := range v.Reservations {
		if !r.Granted || r.Held || r.Term != term || r.Expiry <= now {
			return false
		}
	}
	return true
}
