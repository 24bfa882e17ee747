package fsm

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// Result codes carried in Result.Code.
const (
	CodeOK       = ""
	CodeRefused  = "refused"  // a limit (target) refused the command
	CodeInvalid  = "invalid"  // the command could not be decoded
	CodeStale    = "stale"    // the command was older than the committed state
	CodeNotFound = "notfound" // nothing to act on
)

// ErrRefused is wrapped by Result.Error for refused commands.
var ErrRefused = errors.New("refused by the replicated state")

// ErrStale is wrapped by Result.Error for stale commands.
var ErrStale = errors.New("stale command")

// Result is what Apply returns for every command log.
type Result struct {
	Code string `json:"code,omitempty"`
	Msg  string `json:"msg,omitempty"`
	// Names are the reserved pod names (Reserve).
	Names []string `json:"names,omitempty"`
	// Completed and Released are the names settled by Reconcile.
	Completed []string `json:"completed,omitempty"`
	Released  []string `json:"released,omitempty"`
	// Held are the earlier-term reservations Reconcile kept for the current
	// term; Reserve hands these names out before new ones.
	Held []string `json:"held,omitempty"`
	// HeldDeletes are the earlier-term deletes of running pods Reconcile
	// kept for the current term; its leader deletes exactly these pods.
	HeldDeletes []PodRef `json:"heldDel,omitempty"`
	// NotOwned are the (member, epoch) pairs a RenewOwnership named that
	// its owner does not hold (any more): its lease does not cover them.
	NotOwned []MemberEpoch `json:"notOwned,omitempty"`
	// HandoverEnded is set when a ReleaseOwnership ended a handover wait.
	HandoverEnded bool `json:"handoverEnded,omitempty"`
}

// Error turns a failed result into an error.
func (r *Result) Error() error {
	switch r.Code {
	case CodeOK:
		return nil
	case CodeRefused:
		return fmt.Errorf("%w: %s", ErrRefused, r.Msg)
	case CodeStale:
		return fmt.Errorf("%w: %s", ErrStale, r.Msg)
	case CodeInvalid:
		return fmt.Errorf("%w: %s", ErrMalformed, r.Msg)
	default:
		return fmt.Errorf("%s: %s", r.Code, r.Msg)
	}
}

// DefaultDedupWindow is how many request IDs the FSM remembers.
const DefaultDedupWindow = 8192

// DefaultDedupBytes bounds the remembered results in (approximate) bytes:
// a Reserve result can carry thousands of names.
const DefaultDedupBytes = 8 << 20

// MaxSnapshotBytes is the largest snapshot body Restore accepts.
const MaxSnapshotBytes = 512 << 20

// FSM is the replicated state machine. Apply is deterministic: it reads time
// only from commands and terms from raft entries. All readers take a read
// lock and get copies.
type FSM struct {
	salt       string
	window     int
	dedupBytes int

	mu sync.RWMutex
	st *state

	// hooks are called after commands that change targets, rollouts or
	// owners are applied (hooks.go).
	hooks atomic.Pointer[[]func(Command)]

	// applied is the index of the last entry applied (WaitApplied).
	applied *appliedIndex
}

// New returns an empty FSM. salt (the raft cluster ID) is mixed into reserved
// pod names, so a rebuilt raft cluster never reuses an old cluster's names.
func New(salt string) *FSM {
	return &FSM{salt: salt, window: DefaultDedupWindow, dedupBytes: DefaultDedupBytes, st: newState(), applied: newAppliedIndex()}
}

var _ raft.FSM = (*FSM)(nil)

// Apply implements raft.FSM.
func (f *FSM) Apply(l *raft.Log) interface{} {
	if l.Type != raft.LogCommand {
		return nil
	}
	defer f.applied.set(l.Index)
	if isBatch(l.Data) {
		return f.applyBatch(l.Data, l.Term, l.Index)
	}
	r := f.applyEntry(l.Data, l.Term, l.Index)
	return &r
}

// ApplyBytes decodes and applies one encoded command without fencing: the
// proposer's term is not checked. For tests and benchmarks.
func (f *FSM) ApplyBytes(b []byte) Result { return f.ApplyAt(b, 0) }

// ApplyAt decodes and applies one encoded command carried by a raft entry of
// term logTerm. Commands that change expectations are refused (CodeStale)
// unless their Meta.Term equals logTerm: a deposed leader's command that
// reaches the log in a later term (forwarded, or retried after a pause)
// changes nothing. logTerm 0 disables the check.
func (f *FSM) ApplyAt(b []byte, logTerm uint64) Result { return f.applyEntry(b, logTerm, 0) }

// applyEntry is ApplyAt for a command of the raft entry at index (recorded
// by RenewOwnership; 0 outside raft).
func (f *FSM) applyEntry(b []byte, logTerm, index uint64) Result {
	cmd, err := Decode(b)
	if err != nil {
		return Result{Code: CodeInvalid, Msg: err.Error()}
	}
	r, applied := f.applyLocked(cmd, logTerm, index)
	if applied && r.Code == CodeOK {
		f.notify(cmd)
	}
	return r
}

// applyLocked applies cmd under the lock; applied is false for a repeated
// request ID (answered with its first result, nothing changes).
func (f *FSM) applyLocked(cmd Command, logTerm, index uint64) (r Result, applied bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := cmd.Header().ReqID
	if id != "" {
		if r, ok := f.st.lookupDedup(id); ok {
			return r, false
		}
	}
	r = f.apply(cmd, logTerm, index)
	if id != "" {
		f.st.rememberDedup(id, r, f.window, f.dedupBytes)
	}
	return r, true
}

// apply dispatches one decoded command to its applyX method, after the
// fence for the commands that change expectations: the owner fence when
// the command carries one, else the term fence, and then a member write
// (Reserve, ExpectDeletes, Reconcile) for a member that has an owner is
// refused: only its owner writes there (owners.go). Each applyX changes the
// state for one command type only, as nomad's FSM does.
func (f *FSM) apply(cmd Command, logTerm, index uint64) Result {
	if fc, member := ownerFenceOf(cmd); fc != nil {
		if !f.st.ownerFenced(member, *fc) {
			return Result{Code: CodeStale, Msg: fmt.Sprintf("proposed by %s at epoch %d, member %s is owned by %s",
				fc.Owner, fc.Epoch, member, f.st.Owners[member])}
		}
	} else if fencedType(cmd) {
		if t := cmd.Header().Term; !fenced(t, logTerm) {
			return Result{Code: CodeStale, Msg: fmt.Sprintf("proposed for leader term %d, committed in term %d", t, logTerm)}
		}
		if o, owned := f.st.Owners[member]; owned {
			return Result{Code: CodeStale, Msg: fmt.Sprintf("member %s is owned by %s: a write without its owner fence is refused", member, o)}
		}
	}
	switch c := cmd.(type) {
	case *AssignOwners:
		return f.applyAssignOwners(c)
	case *RenewOwnership:
		return f.applyRenewOwnership(c, logTerm, index)
	case *ReleaseOwnership:
		return f.applyReleaseOwnership(c)
	case *SetMemberUsage:
		return f.applySetMemberUsage(c, index)
	case *Reserve:
		return f.applyReserve(c, logTerm)
	case *Settle:
		return f.applySettle(c, logTerm)
	case *PruneMembers:
		return f.applyPruneMembers(c)
	case *ExpectDeletes:
		return f.applyExpectDeletes(c)
	case *Reconcile:
		return f.applyReconcile(c)
	case *SetTargets:
		return f.applySetTargets(c, logTerm)
	case *DeleteTargets:
		return f.applyDeleteTargets(c)
	case *SetRollout:
		return f.applySetRollout(c)
	case *DeleteRollout:
		return f.applyDeleteRollout(c)
	case *SetHealth:
		return f.applySetHealth(c)
	}
	return Result{Code: CodeInvalid, Msg: fmt.Sprintf("no apply for command %T", cmd)}
}

// fencedType reports whether cmd changes expectations or a rollout's state,
// and so must carry the term of the raft entry it is committed in: a
// deposed leader's late rollout pass must not overwrite the new leader's.
func fencedType(cmd Command) bool {
	switch cmd.(type) {
	case *Reserve, *ExpectDeletes, *Reconcile, *PruneMembers, *SetRollout, *AssignOwners:
		return true
	}
	return false
}

// applySettle records the outcome of creates (pod seen, or create failed).
func (f *FSM) applySettle(c *Settle, logTerm uint64) Result {
	f.st.settle(c.Items, c.Now, logTerm, c.HoldReissued)
	return Result{}
}

// applyPruneMembers drops what belongs to members no longer registered.
func (f *FSM) applyPruneMembers(c *PruneMembers) Result {
	f.prune(c)
	return Result{}
}

// applyExpectDeletes replaces the key's pending deletes with c.Pods, each
// remembered by UID so a later pod of the same name is not taken for it.
func (f *FSM) applyExpectDeletes(c *ExpectDeletes) Result {
	s := f.st
	ks := s.key(c.Key, true)
	s.Seq++
	ks.Deletes = make(map[string]PendingDelete, len(c.Pods))
	for _, p := range c.Pods {
		ks.Deletes[p.Name] = PendingDelete{Name: p.Name, UID: p.UID, Expiry: c.Now + c.TTL, Term: c.Term, Seq: s.Seq, Epoch: c.Fence.epoch()}
	}
	s.gc(ks, c.Now)
	return Result{}
}

// applySetTargets records an FRS's per-member targets; an older generation
// of the same object never overwrites a newer one. A command marked Grant
// also grants the first names of members it raises from zero (grant.go).
func (f *FSM) applySetTargets(c *SetTargets, logTerm uint64) Result {
	s := f.st
	k := c.FRS.String()
	var prev map[string]int32
	if old, ok := s.Targets[k]; ok && old.FRS.UID == c.FRS.UID {
		if old.Generation > c.Generation {
			return Result{Code: CodeStale, Msg: fmt.Sprintf("targets of %s are at generation %d, command has %d", k, old.Generation, c.Generation)}
		}
		prev = old.Targets
	}
	s.Targets[k] = &TargetRecord{FRS: c.FRS, Generation: c.Generation, Targets: maps.Clone(c.Targets)}
	if c.Grant > 0 {
		f.grantFirstNames(c, prev, logTerm)
	}
	return Result{}
}

// applyDeleteTargets forgets an FRS's targets; with a UID, only those of that
// incarnation of the object.
func (f *FSM) applyDeleteTargets(c *DeleteTargets) Result {
	s := f.st
	k := c.FRS.String()
	old, ok := s.Targets[k]
	if !ok || (c.FRS.UID != "" && old.FRS.UID != c.FRS.UID) {
		return Result{Code: CodeNotFound, Msg: "no targets for " + k}
	}
	delete(s.Targets, k)
	return Result{}
}

// applySetRollout records an FRS's rollout state, replacing the one of
// any earlier object of the same name.
func (f *FSM) applySetRollout(c *SetRollout) Result {
	f.st.Rollouts[c.FRS.String()] = &RolloutRecord{FRS: c.FRS, Record: slices.Clone(c.Record)}
	return Result{}
}

// applyDeleteRollout forgets an FRS's rollout state; with a UID, only that
// of that incarnation of the object.
func (f *FSM) applyDeleteRollout(c *DeleteRollout) Result {
	k := c.FRS.String()
	old, ok := f.st.Rollouts[k]
	if !ok || (c.FRS.UID != "" && old.FRS.UID != c.FRS.UID) {
		return Result{Code: CodeNotFound, Msg: "no rollout for " + k}
	}
	delete(f.st.Rollouts, k)
	return Result{}
}

// applySetHealth records a member's health as the leader judged it.
func (f *FSM) applySetHealth(c *SetHealth) Result {
	f.st.Health[c.Cluster] = Health{Healthy: c.Healthy, Since: c.Since}
	return Result{}
}

// applyReserve settles what c carries, then reserves up to c.Count pod names
// within the member's target (the lower of the caller's and the committed
// one), reissuing held names first.
func (f *FSM) applyReserve(c *Reserve, logTerm uint64) Result {
	s := f.st
	s.settle(c.Settle, c.Now, logTerm, c.HoldReissued)
	target := c.Target
	if rec, ok := s.Targets[FRSRef{Namespace: c.Key.Namespace, Name: c.Key.Name}.String()]; ok {
		// The committed target bounds every leader, also one whose own view is stale.
		if t := rec.Targets[c.Key.Cluster]; t < target {
			target = t
		}
	}
	ks := s.key(c.Key, true)
	s.gc(ks, c.Now)
	ks = s.key(c.Key, true)
	var issued, seen int
	var held []Reservation
	for n, r := range ks.Reservations {
		switch {
		case r.Held && r.Seen:
			// Its pod exists but may be missing from c.Active: count it
			// this once (at worst one sync creates too few), then forget it.
			seen++
			delete(ks.Reservations, n)
		case r.Held || r.Granted:
			// A granted name may have been claimed and created by the
			// leader of its term: hand it out again like a held one.
			held = append(held, r)
		default:
			issued++
		}
	}
	allowed := int(target) - c.Active - issued - seen
	if allowed <= 0 {
		s.gc(ks, c.Now)
		return Result{Code: CodeRefused, Msg: fmt.Sprintf("%s: target %d, active %d, outstanding %d, held and seen %d leave no room",
			c.Key, target, c.Active, issued, seen)}
	}
	n := min(c.Count, allowed)
	names := make([]string, 0, n)
	// Held names first, oldest first: whoever created them late collides
	// with this create instead of adding a pod next to it.
	sort.Slice(held, func(i, j int) bool { return held[i].Seq < held[j].Seq })
	for _, r := range held {
		if len(names) == n {
			break
		}
		r.Held, r.Granted, r.Term, r.Expiry, r.Epoch = false, false, c.Term, c.Now+c.TTL, c.Fence.epoch()
		if c.HoldReissued || c.Fence != nil {
			r.Reissued = true
		}
		ks.Reservations[r.Name] = r
		names = append(names, r.Name)
	}
	for len(names) < n {
		s.Seq++
		name := PodName(f.salt, c.Key, c.Prefix, s.Seq)
		if _, dup := ks.Reservations[name]; dup {
			continue
		}
		ks.Reservations[name] = Reservation{Name: name, Expiry: c.Now + c.TTL, Term: c.Term, Seq: s.Seq, Epoch: c.Fence.epoch()}
		names = append(names, name)
	}
	return Result{Names: names}
}

// applyReconcile matches a key's reservations and pending deletes against the
// pods a new leader (or a sync) sees live: done ones are dropped, in-flight
// ones of an earlier term are held for this term.
func (f *FSM) applyReconcile(c *Reconcile) Result {
	s := f.st
	ks := s.key(c.Key, false)
	var r Result
	if ks == nil {
		return r
	}
	// earlier: decided by an earlier leader, or with a fence by an
	// earlier owner of the member.
	earlier := func(term, epoch uint64) bool {
		if c.Fence != nil {
			return epoch < c.Fence.Epoch
		}
		return term < c.Term
	}
	for _, n := range sortedNames(ks.Reservations) {
		res := ks.Reservations[n]
		switch _, live := c.Live[n]; {
		case live:
			r.Completed = append(r.Completed, n)
			delete(ks.Reservations, n)
		case earlier(res.Term, res.Epoch) || (c.HoldOwn && !res.Held):
			// Its create may still be on its way (a paused or deposed
			// leader): keep the name for the slot. With HoldOwn the same
			// goes for this term's own reservations: a reconcile runs at
			// the start of a sync, when none of this leader's creates for
			// the key is in flight, so one without its pod lost its
			// settlement and would otherwise hold the key up until the TTL.
			// Not live: a pod seen earlier is gone, the name is only held.
			res.Held, res.Seen, res.Granted, res.Term, res.Epoch = true, false, false, c.Term, c.Fence.epoch()
			if c.TTL > 0 {
				res.Expiry = c.Now + c.TTL
			}
			ks.Reservations[n] = res
			r.Held = append(r.Held, n)
		}
	}
	deleting := make(map[string]bool, len(c.Deleting))
	for _, n := range c.Deleting {
		deleting[n] = true
	}
	for _, n := range slices.Sorted(maps.Keys(ks.Deletes)) {
		d := ks.Deletes[n]
		uid, live := c.Live[n]
		switch {
		case !live || (d.UID != "" && uid != d.UID) || deleting[n]:
			// Done: gone, replaced by another pod, or its deletion landed.
			delete(ks.Deletes, n)
		case (earlier(d.Term, d.Epoch) || c.HoldOwn) && c.HoldDeletes && d.UID != "":
			// The deposed leader chose this pod and its call may still be
			// on its way: this term deletes the same pod rather than
			// choosing another one (which would remove both). With HoldOwn
			// the same goes for this term's own delete whose outcome was
			// unknown (nothing of the key is in flight at a reconcile).
			d.Term, d.Epoch = c.Term, c.Fence.epoch()
			if c.TTL > 0 {
				d.Expiry = c.Now + c.TTL
			}
			ks.Deletes[n] = d
			r.HeldDeletes = append(r.HeldDeletes, PodRef{Name: n, UID: d.UID})
		case earlier(d.Term, d.Epoch):
			delete(ks.Deletes, n)
		}
	}
	s.gc(ks, c.Now)
	return r
}

// prune drops health and expectations of members not in c.Members and
// expired expectations everywhere.
func (f *FSM) prune(c *PruneMembers) {
	s := f.st
	keep := make(map[string]bool, len(c.Members))
	for _, m := range c.Members {
		keep[m] = true
	}
	for m := range s.Health {
		if !keep[m] {
			delete(s.Health, m)
		}
	}
	for m := range s.Usage {
		if !keep[m] {
			delete(s.Usage, m)
		}
	}
	for _, ks := range s.sortedKeys() {
		if !keep[ks.Key.Cluster] {
			delete(s.Keys, ks.Key.String())
			continue
		}
		s.gc(ks, c.Now)
	}
}

func sortedNames(m map[string]Reservation) []string { return slices.Sorted(maps.Keys(m)) }

// View returns a copy of the expectations of k.
func (f *FSM) View(k Key) KeyView {
	f.mu.RLock()
	defer f.mu.RUnlock()
	v := KeyView{Reservations: map[string]Reservation{}, Deletes: map[string]PendingDelete{}}
	if ks := f.st.key(k, false); ks != nil {
		maps.Copy(v.Reservations, ks.Reservations)
		maps.Copy(v.Deletes, ks.Deletes)
	}
	return v
}

// ReservationTerm returns the term of k's reservation of name (the term it
// was made or last held for), and whether it exists.
func (f *FSM) ReservationTerm(k Key, name string) (uint64, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if ks := f.st.key(k, false); ks != nil {
		if r, ok := ks.Reservations[name]; ok {
			return r.Term, true
		}
	}
	return 0, false
}

// Keys lists the keys that have expectations.
func (f *FSM) Keys() []Key {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]Key, 0, len(f.st.Keys))
	for _, ks := range f.st.sortedKeys() {
		out = append(out, ks.Key)
	}
	return out
}

// Seq is the last sequence number handed out.
func (f *FSM) Seq() uint64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.st.Seq
}

// Targets returns a copy of the committed targets of one FederatedReplicaSet.
func (f *FSM) Targets(frs FRSRef) (TargetRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rec, ok := f.st.Targets[frs.String()]
	if !ok || (frs.UID != "" && rec.FRS.UID != frs.UID) {
		return TargetRecord{}, false
	}
	out := *rec
	out.Targets = maps.Clone(rec.Targets)
	return out, true
}

// Rollout returns a copy of the rollout record of one FederatedReplicaSet.
// A non-empty frs.UID must match.
func (f *FSM) Rollout(frs FRSRef) (RolloutRecord, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	rec, ok := f.st.Rollouts[frs.String()]
	if !ok || (frs.UID != "" && rec.FRS.UID != frs.UID) {
		return RolloutRecord{}, false
	}
	return RolloutRecord{FRS: rec.FRS, Record: slices.Clone(rec.Record)}, true
}

// AllTargets returns copies of every target record.
func (f *FSM) AllTargets() []TargetRecord {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]TargetRecord, 0, len(f.st.Targets))
	for _, rec := range f.st.Targets {
		c := *rec
		c.Targets = maps.Clone(rec.Targets)
		out = append(out, c)
	}
	return out
}

// Health returns the recorded health of a member cluster.
func (f *FSM) Health(cluster string) (Health, bool) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	h, ok := f.st.Health[cluster]
	return h, ok
}

// AllHealth returns a copy of every member's health.
func (f *FSM) AllHealth() map[string]Health {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return maps.Clone(f.st.Health)
}

// Snapshot format: magic, version, body length, JSON body, CRC-32C of the body.
var snapshotMagic = [4]byte{'R', 'F', 'S', 'N'}

const snapshotVersion = 1

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Snapshot implements raft.FSM. The state is small, so it is encoded here
// under the read lock and Persist only writes bytes.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	// raft calls Snapshot between Applies, so the applied index is that of
	// the state encoded; a shallow copy carries it without writing f.st
	// under the read lock.
	f.mu.RLock()
	st := *f.st
	st.Applied = f.AppliedIndex()
	body, err := json.Marshal(&st)
	f.mu.RUnlock()
	if err != nil {
		return nil, fmt.Errorf("encoding snapshot: %w", err)
	}
	return &snapshot{body: body}, nil
}

// Restore implements raft.FSM. It replaces all state; on error the previous
// state is kept. It records the snapshot's applied index, so a follower
// that installed a snapshot holding its own forwarded write reads it at
// once (WaitApplied) instead of after the next applied command.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	st, err := readSnapshot(rc)
	if err != nil {
		return err
	}
	f.mu.Lock()
	f.st = st
	f.mu.Unlock()
	f.applied.set(st.Applied)
	f.notify(nil)
	return nil
}

// readSnapshot decodes and verifies a snapshot stream.
func readSnapshot(r io.Reader) (*state, error) {
	var hdr [13]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, fmt.Errorf("reading snapshot header: %w", err)
	}
	if !bytes.Equal(hdr[:4], snapshotMagic[:]) {
		return nil, errors.New("reading snapshot: not a replicafed snapshot")
	}
	if hdr[4] != snapshotVersion {
		return nil, fmt.Errorf("reading snapshot: unknown version %d", hdr[4])
	}
	n := binary.BigEndian.Uint64(hdr[5:])
	if n > MaxSnapshotBytes {
		return nil, fmt.Errorf("reading snapshot: body length %d too large", n)
	}
	body := make([]byte, n+4)
	if _, err := io.ReadFull(r, body); err != nil {
		return nil, fmt.Errorf("reading snapshot body (truncated?): %w", err)
	}
	want := binary.BigEndian.Uint32(body[n:])
	body = body[:n]
	if got := crc32.Checksum(body, crcTable); got != want {
		return nil, fmt.Errorf("reading snapshot: checksum mismatch (%08x != %08x)", got, want)
	}
	st := newState()
	if err := json.Unmarshal(body, st); err != nil {
		return nil, fmt.Errorf("decoding snapshot: %w", err)
	}
	st.reindex()
	for k, ks := range st.Keys {
		if ks == nil {
			return nil, fmt.Errorf("decoding snapshot: empty key %q", k)
		}
		if ks.Reservations == nil {
			ks.Reservations = map[string]Reservation{}
		}
		if ks.Deletes == nil {
			ks.Deletes = map[string]PendingDelete{}
		}
	}
	for k, rec := range st.Targets {
		if rec == nil {
			return nil, fmt.Errorf("decoding snapshot: empty targets %q", k)
		}
	}
	if st.Rollouts == nil {
		st.Rollouts = map[string]*RolloutRecord{}
	}
	for k, rec := range st.Rollouts {
		if rec == nil {
			return nil, fmt.Errorf("decoding snapshot: empty rollout %q", k)
		}
	}
	return st, nil
}

type snapshot struct{ body []byte }

// WriteTo writes the framed snapshot.
func (s *snapshot) WriteTo(w io.Writer) (int64, error) {
	var hdr [13]byte
	copy(hdr[:4], snapshotMagic[:])
	hdr[4] = snapshotVersion
	binary.BigEndian.PutUint64(hdr[5:], uint64(len(s.body)))
	var tail [4]byte
	binary.BigEndian.PutUint32(tail[:], crc32.Checksum(s.body, crcTable))
	var total int64
	for _, b := range [][]byte{hdr[:], s.body, tail[:]} {
		n, err := w.Write(b)
		total += int64(n)
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (s *snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := s.WriteTo(sink); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("writing snapshot: %w", err)
	}
	return sink.Close()
}

func (s *snapshot) Release() {}
