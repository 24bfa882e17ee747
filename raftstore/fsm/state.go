package fsm

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"encoding/json"
	"sort"
	"strings"
)

// Reservation is a pod name granted for creation and not yet settled.
type Reservation struct {
	Name string `json:"n"`
	// Expiry is Unix nanoseconds; after it the reservation no longer counts.
	Expiry int64  `json:"exp"`
	Term   uint64 `json:"term"`
	Seq    uint64 `json:"seq"`
	// Held is set when the name's create is unknown (an earlier term's
	// reservation without its pod, or a create that timed out). A held
	// reservation does not hold up a sync; the next Reserve hands its name
	// out again, so a late create of the same name collides (AlreadyExists)
	// instead of adding a second pod for the slot.
	Held bool `json:"held,omitempty"`
	// Seen is set when a held name's pod was observed. The name is not
	// handed out again, and the next Reserve counts it against the target
	// once and drops it: its caller listed pods before the observation
	// may have arrived, so its Active may leave the pod out.
	Seen bool `json:"seen,omitempty"`
	// Reissued is set once a Reserve marked HoldReissued hands out a held
	// name again. Whoever held it before may still create it (a deposed
	// leader's paused request), so a failed or unsent create of the reissue,
	// settled by a command marked HoldReissued, holds the name again instead
	// of releasing it: the next Reserve would otherwise grant a fresh name
	// for the slot, next to that late pod.
	Reissued bool `json:"reissued,omitempty"`
	// Epoch is the owner epoch the name was reserved or last reissued
	// under (0: by the unsharded, term-fenced leader).
	Epoch uint64 `json:"epoch,omitempty"`
	// Granted is set on a first name a SetTargets granted (grant.go) and
	// no Reserve has handed out yet. While not Held, it does not hold up
	// a sync (only the leader of its term may claim it, and that leader
	// counts its own claims); a Reserve hands it out first, as a held
	// name; a settlement treats it as a reserved name. Only meaningful
	// while Held is false.
	Granted bool `json:"granted,omitempty"`
}

// PendingDelete is a pod expected to be deleted.
type PendingDelete struct {
	Name   string `json:"n"`
	UID    string `json:"uid"`
	Expiry int64  `json:"exp"`
	Term   uint64 `json:"term"`
	Seq    uint64 `json:"seq"`
	// Epoch is the owner epoch the delete was expected under (0: unsharded).
	Epoch uint64 `json:"epoch,omitempty"`
}

// KeyView is a copy of the expectations of one key.
type KeyView struct {
	Reservations map[string]Reservation
	Deletes      map[string]PendingDelete
}

// Outstanding counts the reservations (neither held nor granted) and
// pending deletes not expired at now (Unix ns).
func (v KeyView) Outstanding(now int64) (creates, deletes int) {
	for _, r := range v.Reservations {
		if r.Expiry > now && !r.Held && !r.Granted {
			creates++
		}
	}
	for _, d := range v.Deletes {
		if d.Expiry > now {
			deletes++
		}
	}
	return creates, deletes
}

// Apply applies settlements for key k to the view, as the FSM would in the
// term the settlements were decided in. It lets a store answer from
// committed state plus observations not yet flushed. A failed reissue is
// held again, as a command marked HoldReissued would do; the view cannot
// know the mark of the command that will carry the settlement, and the
// name is not outstanding either way, which is what the view is asked.
func (v *KeyView) Apply(k Key, items []Settlement) {
	for _, s := range items {
		switch s.Kind {
		case SettleCreated, SettleFailed:
			if s.Key == k {
				settleName(v.Reservations, s.Kind, s.Name, true)
			}
		case SettleHold:
			if r, ok := v.Reservations[s.Name]; ok && s.Key == k {
				r.Held = true
				v.Reservations[s.Name] = r
			}
		case SettleDeleted:
			if s.Key == k {
				delete(v.Deletes, s.Name)
			}
		case SettleForgetKey, SettleForgetCluster:
			if (s.Kind == SettleForgetKey && s.Key == k) || (s.Kind == SettleForgetCluster && s.Key.Cluster == k.Cluster) {
				for n, r := range v.Reservations {
					if r.Seq < s.BeforeSeq {
						delete(v.Reservations, n)
					}
				}
				for n, d := range v.Deletes {
					if d.Seq < s.BeforeSeq {
						delete(v.Deletes, n)
					}
				}
			}
		}
	}
}

// TargetRecord holds the per-member targets of one FederatedReplicaSet.
type TargetRecord struct {
	FRS        FRSRef           `json:"frs"`
	Generation int64            `json:"gen"`
	Targets    map[string]int32 `json:"targets"`
}

// RolloutRecord holds the rollout state of one FederatedReplicaSet.
type RolloutRecord struct {
	FRS    FRSRef          `json:"frs"`
	Record json.RawMessage `json:"rec"`
}

// Health is a member cluster's recorded health.
type Health struct {
	Healthy bool `json:"healthy"`
	// Since is Unix nanoseconds.
	Since int64 `json:"since"`
}

type keyState struct {
	Key          Key                      `json:"key"`
	Reservations map[string]Reservation   `json:"res,omitempty"`
	Deletes      map[string]PendingDelete `json:"del,omitempty"`
}

type dedupEntry struct {
	ID     string `json:"id"`
	Result Result `json:"r"`
}

// state is everything the FSM replicates. It is encoded as a whole in snapshots.
type state struct {
	// Seq numbers every reservation and delete set; it never goes back, so
	// reserved names are never reused.
	Seq     uint64                   `json:"seq"`
	Keys    map[string]*keyState     `json:"keys"`
	Targets map[string]*TargetRecord `json:"targets"`
	// Rollouts are absent from snapshots written before rollouts existed.
	Rollouts map[string]*RolloutRecord `json:"rollouts,omitempty"`
	Health   map[string]Health         `json:"health"`
	// Dedup is the window of recent request IDs, oldest first.
	Dedup []dedupEntry `json:"dedup"`
	// Owners, OwnerEpoch and Renewals are the sharding state (owners.go);
	// absent from snapshots written before it existed.
	Owners     map[string]Ownership `json:"owners,omitempty"`
	OwnerEpoch uint64               `json:"ownerEpoch,omitempty"`
	Renewals   map[string]Renewal   `json:"renewals,omitempty"`
	// Usage is each member's capacity usage as its owner published it
	// (usage.go); absent from snapshots written before it existed.
	Usage map[string]MemberUsage `json:"usage,omitempty"`
	// Applied is the index of the last entry the state holds, written by
	// Snapshot and read by Restore (WaitApplied); absent from snapshots
	// written before it existed. Never changed by Apply.
	Applied uint64 `json:"applied,omitempty"`

	dedupIndex map[string]int // ID -> absolute position; rebuilt on restore
	dedupBase  int            // absolute position of Dedup[0]
	dedupBytes int            // approximate size of Dedup; rebuilt on restore
}

// size approximates the memory and snapshot bytes of a dedup entry.
func (e dedupEntry) size() int {
	n := 64 + len(e.ID) + len(e.Result.Code) + len(e.Result.Msg)
	for _, l := range [][]string{e.Result.Names, e.Result.Completed, e.Result.Released, e.Result.Held} {
		for _, s := range l {
			n += len(s) + 16
		}
	}
	for _, m := range e.Result.NotOwned {
		n += len(m.Member) + 24
	}
	return n
}

func newState() *state {
	return &state{
		Keys:       map[string]*keyState{},
		Targets:    map[string]*TargetRecord{},
		Rollouts:   map[string]*RolloutRecord{},
		Health:     map[string]Health{},
		Owners:     map[string]Ownership{},
		Renewals:   map[string]Renewal{},
		Usage:      map[string]MemberUsage{},
		dedupIndex: map[string]int{},
	}
}

func (s *state) reindex() {
	s.dedupIndex = make(map[string]int, len(s.Dedup))
	s.dedupBase = 0
	s.dedupBytes = 0
	for i, e := range s.Dedup {
		s.dedupIndex[e.ID] = i
		s.dedupBytes += e.size()
	}
	if s.Keys == nil {
		s.Keys = map[string]*keyState{}
	}
	if s.Targets == nil {
		s.Targets = map[string]*TargetRecord{}
	}
	if s.Health == nil {
		s.Health = map[string]Health{}
	}
	if s.Owners == nil {
		s.Owners = map[string]Ownership{}
	}
	if s.Renewals == nil {
		s.Renewals = map[string]Renewal{}
	}
	if s.Usage == nil {
		s.Usage = map[string]MemberUsage{}
	}
}

func (s *state) lookupDedup(id string) (Result, bool) {
	pos, ok := s.dedupIndex[id]
	if !ok {
		return Result{}, false
	}
	return s.Dedup[pos-s.dedupBase].Result, true
}

// rememberDedup appends id's result and evicts the oldest entries beyond
// window entries or maxBytes bytes (the newest entry is always kept).
func (s *state) rememberDedup(id string, r Result, window, maxBytes int) {
	e := dedupEntry{ID: id, Result: r}
	s.dedupIndex[id] = s.dedupBase + len(s.Dedup)
	s.Dedup = append(s.Dedup, e)
	s.dedupBytes += e.size()
	over := max(len(s.Dedup)-window, 0)
	bytes := s.dedupBytes
	for _, old := range s.Dedup[:over] {
		bytes -= old.size()
	}
	for over < len(s.Dedup)-1 && bytes > maxBytes {
		bytes -= s.Dedup[over].size()
		over++
	}
	if over > 0 {
		for _, old := range s.Dedup[:over] {
			delete(s.dedupIndex, old.ID)
		}
		s.Dedup = append([]dedupEntry(nil), s.Dedup[over:]...)
		s.dedupBase += over
		s.dedupBytes = bytes
	}
}

func (s *state) key(k Key, create bool) *keyState {
	ks := s.Keys[k.String()]
	if ks == nil && create {
		ks = &keyState{Key: k, Reservations: map[string]Reservation{}, Deletes: map[string]PendingDelete{}}
		s.Keys[k.String()] = ks
	}
	return ks
}

// gc drops expired entries of ks and the key itself when empty.
func (s *state) gc(ks *keyState, now int64) {
	if ks == nil {
		return
	}
	for n, r := range ks.Reservations {
		if r.Expiry <= now {
			delete(ks.Reservations, n)
		}
	}
	for n, d := range ks.Deletes {
		if d.Expiry <= now {
			delete(ks.Deletes, n)
		}
	}
	if len(ks.Reservations) == 0 && len(ks.Deletes) == 0 {
		delete(s.Keys, ks.Key.String())
	}
}

// settle applies items in an entry of raft term logTerm (0: unfenced, for
// tests). Releases and forgets decided in another term are ignored: only the
// leader of the current term may free a name or forget expectations.
// holdReissued is the carrying command's Meta.HoldReissued. An item with
// an owner fence is checked against the member's committed owner instead
// of the term, and always applies the hold-reissued rule: fences are newer
// than the rule, so no replica applies them without it.
func (s *state) settle(items []Settlement, now int64, logTerm uint64, holdReissued bool) {
	for _, it := range items {
		if it.Kind.leaderOnly() {
			if it.Fence != nil && !s.ownerFenced(it.Key.Cluster, *it.Fence) {
				continue
			}
			if it.Fence == nil && (!fenced(it.Term, logTerm) || s.owned(it.Key.Cluster)) {
				continue
			}
		}
		switch it.Kind {
		case SettleForgetCluster:
			for _, ks := range s.sortedKeys() {
				if ks.Key.Cluster == it.Key.Cluster {
					s.forget(ks, it.BeforeSeq, now)
				}
			}
			continue
		case SettleForgetKey:
			s.forget(s.key(it.Key, false), it.BeforeSeq, now)
			continue
		}
		ks := s.key(it.Key, false)
		if ks == nil {
			continue
		}
		switch it.Kind {
		case SettleDeleted:
			delete(ks.Deletes, it.Name)
		case SettleHold:
			if r, ok := ks.Reservations[it.Name]; ok {
				r.Held = true
				ks.Reservations[it.Name] = r
			}
		default:
			settleName(ks.Reservations, it.Kind, it.Name, holdReissued || it.Fence != nil)
		}
		s.gc(ks, now)
	}
}

// settleName applies a SettleCreated or SettleFailed to the reservation
// name. A held name whose pod is seen stays, marked Seen, until the next
// Reserve has counted it: the held name's pod can land at any time (held
// names do not hold up a sync), also after the caller of that Reserve
// listed its pods, and dropping it here would leave its slot counted
// neither as active nor as reserved, so a fresh name would be granted for
// it.
//
// With holdReissued (the carrying command's mark), a SettleFailed of a
// reissued name holds it again (see Reservation.Reissued); without it, the
// name is released, as by versions that do not know the rule.
func settleName(res map[string]Reservation, kind SettleKind, name string, holdReissued bool) {
	r, ok := res[name]
	switch {
	case ok && kind == SettleCreated && r.Held:
		r.Seen = true
	case ok && kind == SettleFailed && r.Reissued && holdReissued:
		r.Held = true
	default:
		delete(res, name)
		return
	}
	res[name] = r
}

// fenced reports whether a command proposed in term cmdTerm may change
// expectations in an entry of term logTerm (0: unfenced, for tests).
func fenced(cmdTerm, logTerm uint64) bool { return logTerm == 0 || cmdTerm == logTerm }

func (s *state) forget(ks *keyState, before uint64, now int64) {
	if ks == nil {
		return
	}
	for n, r := range ks.Reservations {
		if r.Seq < before {
			delete(ks.Reservations, n)
		}
	}
	for n, d := range ks.Deletes {
		if d.Seq < before {
			delete(ks.Deletes, n)
		}
	}
	s.gc(ks, now)
}

func (s *state) sortedKeys() []*keyState {
	names := make([]string, 0, len(s.Keys))
	for n := range s.Keys {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]*keyState, 0, len(names))
	for _, n := range names {
		out = append(out, s.Keys[n])
	}
	return out
}

// suffixLen is the length of the generated part of a pod name: 10 base32
// characters carry 50 bits of the hash.
const suffixLen = 10

// maxPodPrefix keeps generated names within a DNS label (63), like upstream's generateName.
const maxPodPrefix = 63 - suffixLen

var nameEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// PodName is the deterministic name of the seq'th reservation of key k in
// the raft cluster identified by salt.
func PodName(salt string, k Key, prefix string, seq uint64) string {
	h := sha256.New()
	for _, f := range []string{salt, k.Cluster, k.Namespace, k.Name} {
		h.Write([]byte(f))
		h.Write([]byte{0})
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	h.Write(b[:])
	suffix := strings.ToLower(nameEncoding.EncodeToString(h.Sum(nil)))[:suffixLen]
	if len(prefix) > maxPodPrefix {
		prefix = prefix[:maxPodPrefix]
	}
	return prefix + suffix
}
