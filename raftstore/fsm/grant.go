package fsm

import (
	"maps"
	"slices"
	"strings"
)

// The grant-on-targets rule (issue 27). A new MemberReplicaSet used to cost
// one Reserve entry for its first names. A SetTargets marked Grant reserves
// them in its own apply instead, so the first sync of a new key creates its
// pods with names already committed and proposes nothing.
//
// A member's key gets first names only when all of this holds, checked in
// the apply, so every replica grants alike:
//   - the command is fenced like a Reserve: its Meta.Term is the term of
//     the raft entry carrying it (the leader of that term, and only it,
//     may claim the names, see expectations.Store);
//   - the member's target rises from zero or appears (a new FRS, a member
//     newly placed), and the key holds no unexpired reservation or
//     pending delete: nothing is in flight, no held name waits;
//   - the FRS has no rollout record (a rolling object keeps one
//     MemberReplicaSet per revision) and the member has no owner
//     (sharding keeps its fenced protocol).
//
// It grants min(target, Grant) names, and at most MaxItems over the whole
// command, with a Reserve's naming (the key's name and a dash as prefix,
// the next sequence numbers), the command's term and GrantTTL. A granted
// name is a reserved name that no Reserve has handed out yet: it does not
// hold up a sync (KeyView.Outstanding), a Reserve hands it out before any
// fresh name (as a held name, marked Reissued when the Reserve is marked),
// a Reconcile holds it when its pod is missing and completes it when its
// pod exists, and settlements treat it as reserved. So a leader that did
// not grant it, or a later term, reissues it and never grants a fresh
// name beside it.

// grantFirstNames applies the rule for c, committed in an entry of
// logTerm; prev are the targets c replaced (nil for a new object).
func (f *FSM) grantFirstNames(c *SetTargets, prev map[string]int32, logTerm uint64) {
	s := f.st
	if c.Term == 0 || !fenced(c.Term, logTerm) {
		return
	}
	if _, rolling := s.Rollouts[c.FRS.String()]; rolling {
		return
	}
	left := maxItems
	for _, m := range slices.Sorted(maps.Keys(c.Targets)) {
		t := c.Targets[m]
		if t <= 0 || prev[m] > 0 {
			continue
		}
		if _, owned := s.Owners[m]; owned {
			continue
		}
		k := Key{Cluster: m, Namespace: c.FRS.Namespace, Name: c.FRS.Name}
		if k.validate() != nil {
			continue
		}
		s.gc(s.key(k, false), c.Now)
		if s.key(k, false) != nil {
			continue // something is in flight or held: a Reserve decides
		}
		n := min(int(t), int(c.Grant), left)
		if n <= 0 {
			return
		}
		left -= n
		f.grant(s.key(k, true), n, c)
	}
}

// grant reserves n fresh names for ks as granted names of c's term.
func (f *FSM) grant(ks *keyState, n int, c *SetTargets) {
	s := f.st
	prefix := ks.Key.Name + "-"
	for granted := 0; granted < n; {
		s.Seq++
		name := PodName(f.salt, ks.Key, prefix, s.Seq)
		if _, dup := ks.Reservations[name]; dup {
			continue
		}
		ks.Reservations[name] = Reservation{Name: name, Expiry: c.Now + c.GrantTTL, Term: c.Term, Seq: s.Seq, Granted: true}
		granted++
	}
}

// NamedWith reports whether name is a generated pod name for prefix (the
// prefix, cut as PodName cuts it, and the generated suffix): a granted
// name is claimed only by a caller that asks for that prefix.
func NamedWith(name, prefix string) bool {
	if len(prefix) > maxPodPrefix {
		prefix = prefix[:maxPodPrefix]
	}
	return len(name) == len(prefix)+suffixLen && strings.HasPrefix(name, prefix)
}
