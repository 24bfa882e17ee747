// Package expectations implements the member engine's expectations Store
// (controller/expectations.Store) on the raft-replicated FSM: pod names are
// reserved through raft before pods are created, and observations settle
// them in batches.
package expectations

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// maxBatch stays below the FSM's per-command item limit.
const maxBatch = 5000

// minMaxPending is the smallest bound on uncommitted observations; the bound
// is max(minMaxPending, 16 batches).
const minMaxPending = 10000

// Store is the raft-backed expectations store. Reads (Satisfied) are local;
// reservations and delete sets are committed synchronously; observations
// are applied to the local view at once and committed in batches.
type Store struct {
	node      *node.Node
	fsm       *fsm.FSM
	log       logr.Logger
	clock     clock.PassiveClock
	ttl       time.Duration
	batchSize int
	interval  time.Duration

	// gate orders batches of observations against reservations (see
	// flushGate).
	gate       *flushGate
	mu         sync.Mutex
	pending    []fsm.Settlement
	inflight   []fsm.Settlement
	maxPending int
	epoch      uint64 // bumped when pending observations are dropped
	kick       chan struct{}

	// linger is how long the first reservation of a round waits for
	// others to share its raft entry (ReservationLinger), crowdedLinger
	// how long while reservations of several keys meet
	// (CrowdedReservationLinger).
	linger, crowdedLinger time.Duration
	rmu                   sync.Mutex
	rqueue                []*reserveCall
	running               bool
	// crowded: the last round was crowded (crowdedRound); lastRound is
	// when it began.
	crowded   bool
	lastRound time.Time
	// lastCrowd is when the latest crowded round began, lastFlush when
	// a flush last committed observations (roundExpected).
	lastCrowd, lastFlush time.Time

	// fences is what this store knows of the owner fences its callers
	// write under (sharding, see fences.go).
	fences fenceBook

	// cmu guards claimed: the granted names (fsm grant-on-targets) this
	// leader handed to a sync without a Reserve, per key, until they
	// settle. They count as outstanding here (Satisfied), as a Reserve's
	// names do in the FSM.
	cmu     sync.Mutex
	claimed map[fsm.Key][]string

	// rider offers owner lease renewals to rounds (RideRenewals).
	rider atomic.Pointer[RenewalRider]
}

// RenewalRider offers a renewal of an owner lease to send in a batch that
// goes out anyway; node.OwnerLease implements it (see its RideRenewal).
type RenewalRider interface {
	// RideRenewal returns the commands to send now (a renewal and what
	// rides with it), or none, and done to call once with their results
	// in order (a nil slice, or nil entries, when not known to be
	// committed).
	RideRenewal() (cmds []fsm.Command, done func([]*fsm.Result))
}

// RideRenewals makes each round of reservations that carries an
// owner-fenced command also carry r's renewal when r offers one, so that
// an owner busy writing renews its lease without an entry of its own
// (node.OwnerLease.Run then skips its periodic renewal).
func (s *Store) RideRenewals(r RenewalRider) { s.rider.Store(&r) }

// rideRenewal appends the rider's renewal to cmds when the round writes
// under an owner fence (so it needs the ownership feature anyway) and the
// rider offers one; done is nil when none rides.
func (s *Store) rideRenewal(cmds []fsm.Command) (_ []fsm.Command, done func([]*fsm.Result)) {
	if !slices.ContainsFunc(cmds, fsm.UsesOwnership) {
		return cmds, nil
	}
	return s.offerRenewal(cmds)
}

// offerRenewal appends the rider's renewal (and what rides with it) to
// cmds when it offers one (it offers none while a server lacks the
// ownership feature); done is nil when none rides, else it takes the
// results from len(cmds) on.
func (s *Store) offerRenewal(cmds []fsm.Command) (_ []fsm.Command, done func([]*fsm.Result)) {
	r := s.rider.Load()
	if r == nil {
		return cmds, nil
	}
	extra, done := (*r).RideRenewal()
	if len(extra) == 0 {
		return cmds, nil
	}
	return append(cmds, extra...), done
}

// GrantFirstNames is how many first names per member a shared SetTargets
// asks the FSM to grant (fsm.SetTargets.Grant): the engine's default
// burst (controller/engine.DefaultBurstReplicas), the most one sync
// creates. A smaller burst claims them over several syncs.
const GrantFirstNames = 500

// reserveCall is one ExpectCreations waiting for its Reserve to commit,
// or one Share waiting for its command.
type reserveCall struct {
	ctx  context.Context
	cmd  fsm.Command
	done chan struct{}
	res  *fsm.Result
	err  error
	// unsent is true when the command was never proposed.
	unsent bool
}

var (
	_ ctrlexp.Store           = (*Store)(nil)
	_ ctrlexp.Relister        = (*Store)(nil)
	_ ctrlexp.TermReconciler  = (*Store)(nil)
	_ ctrlexp.QuietReconciler = (*Store)(nil)
)

// New returns a Store on n, configured from n's NodeConfig (ExpectationsTTL,
// ObservationBatchSize, ObservationFlushInterval). Run (or Start) must run
// for observations to be committed.
func New(n *node.Node, log logr.Logger) *Store {
	cfg := n.Config()
	s := &Store{
		node: n, fsm: n.FSM(), log: log, clock: clock.RealClock{},
		ttl: cfg.ExpectationsTTL, batchSize: min(cfg.ObservationBatchSize, maxBatch), interval: cfg.ObservationFlushInterval,
		kick: make(chan struct{}, 1), linger: cfg.ReservationLinger, crowdedLinger: cfg.CrowdedReservationLinger,
		fences: newFenceBook(), gate: newFlushGate(),
	}
	s.maxPending = max(minMaxPending, 16*s.batchSize)
	// A leader handing over commits what it observed up to the drain, so
	// the next leader starts from it.
	n.BeforeTransfer(func(ctx context.Context) {
		if err := s.FlushAll(ctx); err != nil {
			s.log.V(1).Info("Committing observations before the leadership transfer failed", "reason", err.Error())
		}
	})
	return s
}

// term is the leader term a command is proposed for: the sync's term when
// the caller set one, else this node's current leader term (0 on a
// follower, which the FSM refuses).
func (s *Store) term(ctx context.Context) uint64 {
	if t, ok := ctrlexp.TermFrom(ctx); ok {
		return t
	}
	_, t, _ := s.node.Leading()
	return t
}

// meta is the command metadata for a command proposed in term.
func (s *Store) meta(term uint64) fsm.Meta {
	m := s.node.Meta()
	m.Term = term
	return m
}

// settleMeta is the metadata of a Settle: marked HoldReissued (a failed
// reissue is held again) while every server applies that rule.
func (s *Store) settleMeta() fsm.Meta {
	m := s.node.Meta()
	m.HoldReissued = s.node.AllServersHave(node.FeatureHoldReissued)
	return m
}

// Satisfied implements Store: committed state plus observations not yet
// committed has no unexpired reservation or pending delete for key.
func (s *Store) Satisfied(key fedref.MemberObject) bool {
	k := fsm.KeyOf(key)
	v := s.view(k)
	now := s.clock.Now().UnixNano()
	c, d := v.Outstanding(now)
	s.cmu.Lock()
	c += s.claimsOutstanding(k, v, now)
	s.cmu.Unlock()
	return c == 0 && d == 0
}

// view is k's committed expectations with the observations not committed
// yet applied.
func (s *Store) view(k fsm.Key) fsm.KeyView {
	s.mu.Lock()
	items := make([]fsm.Settlement, 0, len(s.inflight)+len(s.pending))
	items = append(append(items, s.inflight...), s.pending...)
	s.mu.Unlock()
	// Read the FSM after the items: anything flushed meanwhile is in the FSM
	// and settling it twice is harmless.
	v := s.fsm.View(k)
	v.Apply(k, items)
	return v
}

// ExpectCreations implements Store. It commits one Reserve carrying this
// key's uncommitted observations, so pods the caller already counts as
// active are not also counted as outstanding. The FSM grants at most
// min(intent.Target, committed target) - Active - outstanding names.
func (s *Store) ExpectCreations(ctx context.Context, key fedref.MemberObject, intent ctrlexp.CreateIntent) ([]string, error) {
	if intent.Count <= 0 {
		return nil, nil
	}
	k := fsm.KeyOf(key)
	s.gate.enter()
	defer s.gate.leave()
	prefix := intent.Prefix
	if prefix == "" {
		prefix = k.Name + "-"
	}
	if names := s.claimGranted(ctx, k, intent, prefix); len(names) > 0 {
		logr.FromContextOrDiscard(ctx).V(2).Info("Claimed granted pod names", "cluster", key.Cluster, "key", key.String(), "names", len(names))
		return names, nil
	}
	drained := s.drain(k)
	cmd := &fsm.Reserve{
		Meta: s.meta(s.term(ctx)), Key: k, Target: intent.Target, Active: intent.Active, Count: intent.Count,
		Prefix: prefix, TTL: int64(s.ttl), Settle: drained, Fence: s.fenceOf(ctx, k.Cluster),
	}
	// Marked, the held names it hands out again stay held when their
	// create fails, and so do those its settlements fail.
	cmd.HoldReissued = s.node.AllServersHave(node.FeatureHoldReissued)
	res, unsent, err := s.reserve(ctx, cmd)
	if err != nil {
		// The observations it carried were not applied (never sent,
		// refused, or not known to be committed): keep them; settling is
		// idempotent.
		s.requeue(drained)
		if !unsent && res == nil {
			// Names it may have reserved are not released: no create was
			// sent for them, but they stay reserved until a takeover or
			// the TTL, which is the safe direction.
			s.learnIndeterminate(cmd)
		}
		return nil, fmt.Errorf("reserving %d pod names for %s: %w", intent.Count, key, err)
	}
	s.fences.reserved(k, cmd.Fence, res.Names)
	logr.FromContextOrDiscard(ctx).V(2).Info("Reserved pod names", "cluster", key.Cluster, "key", key.String(), "names", len(res.Names))
	return res.Names, nil
}

// reserve commits cmd together with the other reservations that arrive
// within the linger (and every pending observation, so the periodic flush
// has less to do): one raft entry for many keys. unsent is true when cmd
// was never proposed (its context ended first).
func (s *Store) reserve(ctx context.Context, cmd fsm.Command) (res *fsm.Result, unsent bool, err error) {
	c := &reserveCall{ctx: ctx, cmd: cmd, done: make(chan struct{})}
	s.gate.joinRound()
	defer s.gate.leaveRound()
	s.rmu.Lock()
	s.rqueue = append(s.rqueue, c)
	start := !s.running
	s.running = true
	s.rmu.Unlock()
	if start {
		go s.commitReservations()
	}
	<-c.done
	return c.res, c.unsent, c.err
}

// Share commits cmd in the next round of reservations (see reserve), so a
// command that comes often while pods are being created (the hub's
// SetTargets of many FederatedReplicaSets) takes no raft entry of its own
// while reservations are committed, and commands that arrive within the
// linger of each other share one when none is. The round applies its
// commands in the order they came, each with its own request ID, term and
// result, as consecutive entries would. It returns the command's result and
// its refusal (fsm.Result.Error) or commit error, as node.Apply does.
func (s *Store) Share(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	// Marked while every server applies the rule: the FSM then grants a
	// new key's first names in the same apply, and the key's first sync
	// claims them (claimGranted) instead of committing a Reserve.
	if st, ok := cmd.(*fsm.SetTargets); ok && st.Term != 0 && st.Grant == 0 && s.ttl > 0 &&
		s.node.AllServersHave(node.FeatureGrantOnTargets) {
		st.Grant, st.GrantTTL = GrantFirstNames, int64(s.ttl)
	}
	// Like a reservation: no flush runs while the round takes the pending
	// observations along.
	s.gate.enter()
	defer s.gate.leave()
	res, _, err := s.reserve(ctx, cmd)
	if err != nil {
		return res, fmt.Errorf("committing %s: %w", cmd.Type(), err)
	}
	return res, nil
}

// roundsRunning reports whether a round of reservations is lingering or
// being committed; the next one takes the pending observations along.
func (s *Store) roundsRunning() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	return s.running
}

// crowdTail is how many crowded lingers after the latest crowded round
// the periodic flush keeps its crowd pace (roundExpected).
const crowdTail = 10

// roundExpected reports whether the periodic flush leaves the pending
// observations to a round: one is lingering or being committed; or a
// crowd was seen lately (a crowded round began less than crowdTail
// crowded lingers ago) and less than two crowded lingers have passed
// since observations were last committed (a round began, or a flush
// committed some): more rounds are likely to come (a crowd spaces its rounds a
// crowded linger apart, and the committer goes idle between them), and
// at the end of a crowd the observations of the last pods go in a few
// fuller entries instead of one per flush interval.
func (s *Store) roundExpected() bool {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.running {
		return true
	}
	if s.linger <= 0 || s.lastCrowd.IsZero() {
		return false
	}
	cl := max(s.linger, s.crowdedLinger)
	last := s.lastRound
	if s.lastFlush.After(last) {
		last = s.lastFlush
	}
	return s.clock.Since(s.lastCrowd) < crowdTail*cl && s.clock.Since(last) < 2*cl
}

// flushed notes that a flush committed observations now.
func (s *Store) flushed() {
	s.rmu.Lock()
	s.lastFlush = s.clock.Now()
	s.rmu.Unlock()
}

// maxReservationsPerEntry leaves room in one batch entry for the
// observations that ride along.
const maxReservationsPerEntry = fsm.MaxBatchCommands - 1

// commitReservations commits queued reservations, a round at a time, until
// none is left. The first round waits the linger for company. After a
// round that is not crowded, the next one goes at once with what queued
// meanwhile. While many keys of a member reserve (the round before was
// crowded, see crowdedRound, and began less than a crowded linger ago),
// rounds begin at the multiples of the crowded linger since the Unix
// epoch, each carrying what queued since: many small MemberReplicaSets
// share fewer, fuller entries, while one large MemberReplicaSet's syncs,
// in one member or several, keep the short linger. The member owners'
// crowded rounds (sharding) thus begin together and the leader holds them
// for each other (node.OnTick): one entry per tick, not one per owner.
func (s *Store) commitReservations() {
	s.rmu.Lock()
	wait, onTick := lingerFor(s.linger, s.crowdedLinger, s.crowded, s.clock.Since(s.lastRound), s.untilTick())
	s.rmu.Unlock()
	for {
		if wait > 0 {
			time.Sleep(wait)
		}
		s.rmu.Lock()
		n := min(len(s.rqueue), maxReservationsPerEntry)
		if n == 0 {
			s.running = false
			s.rmu.Unlock()
			return
		}
		round := s.rqueue[:n:n]
		s.rqueue = s.rqueue[n:]
		crowded := crowdedRound(round)
		s.crowded, s.lastRound = crowded, s.clock.Now()
		if crowded {
			s.lastCrowd = s.lastRound
		}
		s.rmu.Unlock()
		s.commitRound(round, onTick)
		wait, onTick = 0, false
		if crowded && s.linger > 0 {
			// Those that queued meanwhile waited for the commit already.
			wait, onTick = s.untilTick(), true
		}
	}
}

// untilTick is how long until the next multiple of the crowded linger
// since the Unix epoch, where crowded rounds begin.
func (s *Store) untilTick() time.Duration {
	return node.UntilAligned(s.clock.Now(), max(s.linger, s.crowdedLinger))
}

// crowdedRound reports whether round reserves for several keys of one
// member (many MemberReplicaSets syncing there at once) or carries the
// SetTargets of several FederatedReplicaSets (the hub planning many at
// once: with their first names granted in the SetTargets, their syncs
// commit no reservations, and the targets and the observations would
// otherwise take short rounds of their own). One FederatedReplicaSet's keys
// in several members (a burst of one large workload) are not a crowd.
func crowdedRound(round []*reserveCall) bool {
	members := map[string]bool{}
	targets := 0
	for _, c := range round {
		switch cmd := c.cmd.(type) {
		case *fsm.Reserve:
			if members[cmd.Key.Cluster] {
				return true
			}
			members[cmd.Key.Cluster] = true
		case *fsm.SetTargets:
			if targets++; targets > 1 {
				return true
			}
		}
	}
	return false
}

// lingerFor is how long the first reservation of a round waits for
// company when the committer was idle: linger; or, when the round before
// was crowded (several keys of one member) and began less than
// crowdedLinger ago, untilTick (the time to the next tick of the crowded
// rounds, at most crowdedLinger), and then onTick. None when linger is
// negative.
func lingerFor(linger, crowdedLinger time.Duration, crowded bool, sincePrev, untilTick time.Duration) (wait time.Duration, onTick bool) {
	if linger <= 0 {
		return 0, false
	}
	if crowded && sincePrev < crowdedLinger && crowdedLinger > linger {
		return untilTick, true
	}
	return linger, false
}

// commitRound proposes one round's reservations as one entry, followed by
// a Settle of the pending observations and an owner lease renewal
// (RideRenewals), and hands each caller its result.
// Every caller is inside the gate, so no Flush runs meanwhile and the
// observations taken here are the only ones in flight.
//
// The Settle goes last because observations queued while the round
// lingered are newer than those each Reserve drained for its key: ahead of
// it, an observation of a pod whose create timed out would drop the name
// before the Reserve's older settlement holds it, and the Reserve would
// grant a fresh name for the slot next to that pod (the chaos suite's
// round 47; TestRound47Replay).
func (s *Store) commitRound(round []*reserveCall, onTick bool) {
	cmds := make([]fsm.Command, 0, len(round)+1)
	calls := round[:0:0]
	for _, c := range round {
		if err := c.ctx.Err(); err != nil {
			c.unsent, c.err = true, err
			close(c.done)
			continue
		}
		calls = append(calls, c)
		cmds = append(cmds, c.cmd)
	}
	if len(calls) == 0 {
		return
	}
	batch := s.takeRideAlong()
	if len(batch) > 0 {
		cmds = append(cmds, &fsm.Settle{Meta: s.settleMeta(), Items: batch})
	}
	own := len(cmds)
	cmds, renewed := s.rideRenewal(cmds) // last: its results are last
	ctx, cancel := roundContext(calls)
	defer cancel()
	var opts []node.ApplyOption
	if onTick {
		opts = append(opts, node.OnTick())
	}
	res, err := s.node.ApplyAll(ctx, cmds, opts...)
	if renewed != nil {
		renewed(res[own:])
		res = res[:own]
	}
	if len(batch) > 0 {
		s.settleRideAlong(batch, res[len(calls)], err)
		res = res[:len(calls)]
	}
	for i, c := range calls {
		c.res = res[i]
		switch {
		case res[i] != nil:
			c.err = res[i].Error()
		case err != nil:
			c.err = err
		default:
			c.err = errors.New("reserving pod names: no result")
		}
		close(c.done)
	}
}

// roundContext ends once every caller's context has ended: the round's
// entry is retried, as Apply retries one command, while any of them still
// waits for it.
func roundContext(calls []*reserveCall) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	var left atomic.Int32
	left.Store(int32(len(calls)))
	stops := make([]func() bool, 0, len(calls))
	for _, c := range calls {
		stops = append(stops, context.AfterFunc(c.ctx, func() {
			if left.Add(-1) == 0 {
				cancel()
			}
		}))
	}
	return ctx, func() {
		for _, stop := range stops {
			stop()
		}
		cancel()
	}
}

// takeRideAlong moves up to a batch of pending observations in flight,
// where Satisfied still counts them.
func (s *Store) takeRideAlong() []fsm.Settlement {
	if !s.mayCommit() {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := min(len(s.pending), s.batchSize)
	if n == 0 {
		return nil
	}
	batch := append([]fsm.Settlement(nil), s.pending[:n]...)
	s.pending = append([]fsm.Settlement(nil), s.pending[n:]...)
	s.inflight = batch
	return batch
}

// settleRideAlong ends the flight of observations committed with a round:
// dropped once committed (or malformed), pending again otherwise.
func (s *Store) settleRideAlong(batch []fsm.Settlement, res *fsm.Result, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.inflight = nil
	if res != nil && (res.Error() == nil || errors.Is(res.Error(), fsm.ErrMalformed)) {
		return
	}
	if err != nil || res != nil {
		s.pending = append(batch, s.pending...)
	}
}

// learnIndeterminate learns the outcome of a Reserve whose Apply failed
// (the entry may still commit) by re-applying it with the same request ID,
// then releases the names, which no create was sent for, so they do not
// hold up the key until the TTL. The release is fenced by the command's
// term: after a leader change it changes nothing.
func (s *Store) learnIndeterminate(cmd *fsm.Reserve) {
	if _, ok := s.node.Allowed(); !ok && cmd.Fence == nil {
		return // a new leader reconciles them
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*s.node.Config().ApplyTimeout)
		defer cancel()
		res, err := s.node.Apply(ctx, cmd)
		if err != nil || res == nil {
			return
		}
		for _, n := range res.Names {
			s.add(fsm.Settlement{Kind: fsm.SettleFailed, Key: cmd.Key, Name: n, Term: cmd.Term, Fence: cmd.Fence})
		}
	}()
}

// CreationObserved implements Store.
func (s *Store) CreationObserved(key fedref.MemberObject, podName string) {
	k := fsm.KeyOf(key)
	s.fences.take(k, podName)
	s.add(fsm.Settlement{Kind: fsm.SettleCreated, Key: k, Name: podName})
}

// CreationFailed implements Store: the name is released, but only in the
// term its reservation belongs to, and only if this node led in that term
// (the release commits only in an entry of that term). The term is the
// reservation's, not the one this node leads in right now: a create
// cancelled because the write lease lapsed for a moment (the leader
// context is revoked, Leading reports no term) must still free its name
// when the lease comes back in the same term, or the key stays unsatisfied
// until the expectations TTL. A name reserved under an owner fence is
// released under that fence: only while that owner still holds the member
// at that epoch.
func (s *Store) CreationFailed(key fedref.MemberObject, podName string) {
	k := fsm.KeyOf(key)
	if f, ok := s.fences.take(k, podName); ok {
		s.add(fsm.Settlement{Kind: fsm.SettleFailed, Key: k, Name: podName, Fence: &f})
		return
	}
	var term uint64 // 0 never applies
	if t, ok := s.fsm.ReservationTerm(k, podName); ok && t == s.node.LastLeaderTerm() {
		term = t
	}
	s.add(fsm.Settlement{Kind: fsm.SettleFailed, Key: k, Name: podName, Term: term})
}

// CreationUnknown implements Store: the name stays reserved, held for the
// next reservation of the key, so a create that still lands collides with
// the retry instead of standing next to a pod with a new name.
func (s *Store) CreationUnknown(key fedref.MemberObject, podName string) {
	s.add(fsm.Settlement{Kind: fsm.SettleHold, Key: fsm.KeyOf(key), Name: podName})
}

// ExpectDeletions implements Store: the delete set is committed before the
// caller sends UID-preconditioned deletes.
func (s *Store) ExpectDeletions(ctx context.Context, key fedref.MemberObject, pods []ctrlexp.PodRef) error {
	refs := make([]fsm.PodRef, 0, len(pods))
	for _, p := range pods {
		refs = append(refs, fsm.PodRef{Name: p.Name, UID: string(p.UID)})
	}
	s.gate.enter()
	defer s.gate.leave()
	k := fsm.KeyOf(key)
	cmd := &fsm.ExpectDeletes{Meta: s.meta(s.term(ctx)), Key: k, Pods: refs, TTL: int64(s.ttl), Fence: s.fenceOf(ctx, k.Cluster)}
	if _, err := s.node.Apply(ctx, cmd); err != nil {
		return fmt.Errorf("recording %d expected deletions for %s: %w", len(pods), key, err)
	}
	return nil
}

// DeletionObserved implements Store.
func (s *Store) DeletionObserved(key fedref.MemberObject, podName string) {
	s.add(fsm.Settlement{Kind: fsm.SettleDeleted, Key: fsm.KeyOf(key), Name: podName})
}

// Delete implements Store. On the fenced leader the key's entries recorded
// before the call are forgotten in raft (even if the batch commits after a
// later reservation, and only if it commits in the current term). Anywhere
// else (a follower, a leader whose gate closed for a handover or shutdown)
// it does nothing: the leader's reservations and pending deletes are never
// erased from outside, and this process holds no other state for the key.
// On the owner of the key's member (sharding: a caller gave this store a
// fence for the member and the committed table still gives it the member
// at that epoch) the forget carries that fence instead of a term.
func (s *Store) Delete(key fedref.MemberObject) {
	k := fsm.KeyOf(key)
	s.fences.forgetKey(k)
	if f, ok := s.ownedFence(k.Cluster); ok {
		s.add(fsm.Settlement{Kind: fsm.SettleForgetKey, Key: k, BeforeSeq: s.fsm.Seq() + 1, Fence: &f})
		return
	}
	if _, ok := s.node.Allowed(); !ok {
		return
	}
	_, term, _ := s.node.Leading()
	s.add(fsm.Settlement{Kind: fsm.SettleForgetKey, Key: k, BeforeSeq: s.fsm.Seq() + 1, Term: term})
}

// DeleteCluster implements Store. It commits nothing and keeps the pending
// observations (they are facts, or fenced by their term): workers stop on
// every replica (shutdown, re-engagement after a health flap or a
// kubeconfig rotation) while the leader may still act on the member, so a
// stopping worker must not erase the leader's reservations and pending
// deletes. A member that left the fleet is cleaned up by Node.PruneMembers.
func (s *Store) DeleteCluster(string) {}

// Epoch implements ctrlexp.Relister: it changes whenever uncommitted
// observations were dropped because they exceeded the bound.
func (s *Store) Epoch() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.epoch
}

// ReconcileReservations implements ctrlexp.TermReconciler. listed is a
// fresh quorum list of the member's pods, taken after the caller gained
// write permission for the term. In one raft entry, fenced by that term:
// reservations whose pod exists are complete; earlier-term reservations
// without their pod are held for this term (their names are handed out
// again by the next reservation, never replaced by new names); pending
// deletes whose pod is gone, replaced or already terminating are settled;
// earlier-term deletes of pods that still run are held for this term and
// returned, for the caller to delete those pods itself. Current-term
// reservations without a pod are held too: the engine reconciles at the
// start of a sync, when none of its creates for the key is in flight (each
// sync waits for its calls), so such a reservation lost its settlement.
// Nothing is applied when the key has no expectations.
func (s *Store) ReconcileReservations(ctx context.Context, key fedref.MemberObject, listed map[string]ctrlexp.ListedPod) (ctrlexp.Settlement, error) {
	var out ctrlexp.Settlement
	k := fsm.KeyOf(key)
	fence := s.fenceOf(ctx, k.Cluster)
	term := s.term(ctx)
	if term == 0 && fence == nil {
		return out, fmt.Errorf("reconciling reservations of %s: %w", key, node.ErrNotLeader)
	}
	if v := s.fsm.View(k); len(v.Reservations) == 0 && len(v.Deletes) == 0 {
		return out, nil
	}
	if fence == nil && s.onlyUnclaimedGrants(k, term) {
		// Nobody was handed these names: there is nothing to settle, and
		// holding them would cost the key the Reserve the grant saved.
		return out, nil
	}
	live := make(map[string]string, len(listed))
	var deleting []string
	for n, p := range listed {
		live[n] = string(p.UID)
		if p.Deleting {
			deleting = append(deleting, n)
		}
	}
	slices.Sort(deleting)
	s.gate.enter()
	defer s.gate.leave()
	res, err := s.node.Apply(ctx, &fsm.Reconcile{Meta: s.meta(term), Key: k, Live: live, Deleting: deleting,
		HoldDeletes: true, HoldOwn: true, TTL: int64(s.ttl), Fence: fence})
	if err != nil {
		return out, fmt.Errorf("reconciling reservations of %s: %w", key, err)
	}
	out.Completed, out.Held = res.Completed, res.Held
	s.fences.drop(k, res.Completed)
	for _, d := range res.HeldDeletes {
		out.HeldDeletes = append(out.HeldDeletes, ctrlexp.PodRef{Name: d.Name, UID: types.UID(d.UID)})
	}
	return out, nil
}

// Quiet implements ctrlexp.QuietReconciler: true when
// ReconcileReservations under ctx would apply nothing, because the
// committed view holds no reservation or delete for key, or (without an
// owner fence) only names granted in ctx's term that no sync was handed.
func (s *Store) Quiet(ctx context.Context, key fedref.MemberObject) bool {
	k := fsm.KeyOf(key)
	if v := s.fsm.View(k); len(v.Reservations) == 0 && len(v.Deletes) == 0 {
		return true
	}
	if _, fenced := ctrlexp.FenceFrom(ctx); fenced {
		return false
	}
	term := s.term(ctx)
	return term != 0 && s.onlyUnclaimedGrants(k, term)
}

// KeysToReconcile lists the keys of cluster ("" for all) holding unexpired
// reservations or pending deletes from a term before the current leader
// term. The engine settles each key on its first sync of the term; a new
// leader re-enqueues these keys until the list is empty.
func (s *Store) KeysToReconcile(cluster string) []fedref.MemberObject {
	_, term, ok := s.node.Leading()
	if !ok {
		return nil
	}
	var out []fedref.MemberObject
	now := s.clock.Now().UnixNano()
	for _, k := range s.fsm.Keys() {
		if cluster != "" && k.Cluster != cluster {
			continue
		}
		v := s.fsm.View(k)
		old := false
		for _, r := range v.Reservations {
			old = old || (r.Term < term && r.Expiry > now)
		}
		for _, d := range v.Deletes {
			old = old || (d.Term < term && d.Expiry > now)
		}
		if old {
			out = append(out, k.Object())
		}
	}
	return out
}

// add records an observation for the next batch. Only a leader records:
// a follower's view is never used, and a new leader settles from a quorum
// list (ReconcileReservations) before it writes. A leader whose write lease
// lapsed for a moment records too (raft still leads): the lease usually
// returns in the same term, which sets off no new reconcile, so an
// observation dropped then would hold its key until the expectations TTL.
// The owner of the observation's member (sharding: a caller gave this
// store a fence for it) records too, leader or not: its observations are
// what settles the names it reserved. Over the bound, every pending observation is dropped and Epoch changes,
// so the engine re-verifies each key from a fresh list.
func (s *Store) add(it fsm.Settlement) {
	if err := it.Validate(); err != nil {
		s.log.V(1).Info("Ignoring invalid observation", "reason", err.Error())
		return
	}
	if _, _, ok := s.node.Leading(); !ok && !s.node.IsLeader() && !s.fences.has(it.Key.Cluster) {
		return
	}
	s.mu.Lock()
	if len(s.pending) >= s.maxPending {
		s.log.Info("Too many uncommitted observations, dropping them; keys are re-listed", "dropped", len(s.pending))
		s.pending = nil
		s.epoch++
	}
	s.pending = append(s.pending, it)
	full := len(s.pending) >= s.batchSize
	s.mu.Unlock()
	if full {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func (s *Store) drain(k fsm.Key) []fsm.Settlement {
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine []fsm.Settlement
	rest := s.pending[:0]
	for _, it := range s.pending {
		if it.Key == k && it.Kind != fsm.SettleForgetCluster && len(mine) < maxBatch {
			mine = append(mine, it)
		} else {
			rest = append(rest, it)
		}
	}
	s.pending = rest
	return mine
}

func (s *Store) requeue(items []fsm.Settlement) {
	if len(items) == 0 {
		return
	}
	s.mu.Lock()
	s.pending = append(append([]fsm.Settlement(nil), items...), s.pending...)
	s.mu.Unlock()
}

// Start runs the flusher until ctx ends (a controller-runtime Runnable).
func (s *Store) Start(ctx context.Context) error {
	s.Run(ctx)
	return nil
}

// Run commits pending observations every flush interval, or sooner when a
// batch is full, until ctx ends; then it flushes once more. A tick that
// finds a round of reservations lingering or committing, or expected
// soon after a crowded one (roundExpected), leaves the observations to it
// (they ride along, see commitRound): while pods are being created the
// observations then take no entries of their own. The ticks fall on
// multiples of the interval since the Unix epoch (node.UntilAligned), so
// the owners' flushes reach the leader together and share an entry; the
// first comes one to two intervals after the start (a long interval
// still means no flush for that long).
func (s *Store) Run(ctx context.Context) {
	t := time.NewTimer(s.interval + node.UntilAligned(s.clock.Now().Add(s.interval), s.interval))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), s.node.Config().ApplyTimeout)
			_ = s.Flush(fctx)
			cancel()
			return
		case <-t.C:
			// Re-armed from the basis each time: a late tick does not
			// shift the later ones.
			t.Reset(node.UntilAligned(s.clock.Now(), s.interval))
			if s.roundExpected() {
				continue
			}
		case <-s.kick:
		}
		for {
			ran, err := s.flush(ctx, true)
			if err != nil {
				s.log.V(1).Info("Flushing observations failed; will retry", "reason", err.Error())
				break
			}
			if !ran || s.pendingCount() < s.batchSize {
				break
			}
		}
	}
}

// FlushAll commits every pending observation, batch by batch.
func (s *Store) FlushAll(ctx context.Context) error {
	for {
		if s.pendingCount() == 0 {
			return nil
		}
		if !s.mayCommit() {
			return nil
		}
		if err := s.Flush(ctx); err != nil {
			return err
		}
	}
}

// commitSettle commits a flush's Settle, with the rider's renewal when
// one is due (RideRenewals): an owner that flushes but sends no round
// renews in its flush's entry instead of one of its own. Observations of
// created pods carry no fence, so unlike a round's, a flush takes the
// renewal whatever it carries.
func (s *Store) commitSettle(ctx context.Context, settle *fsm.Settle) error {
	cmds, renewed := s.offerRenewal([]fsm.Command{settle})
	if renewed == nil {
		_, err := s.node.Apply(ctx, settle)
		return err
	}
	res, err := s.node.ApplyAll(ctx, cmds)
	renewed(res[1:])
	if err != nil {
		return err
	}
	if res[0] == nil {
		return errors.New("committing observations: no result")
	}
	return res[0].Error()
}

// Flush commits one batch of pending observations now. Only a leader, or
// the owner of a member (sharding), commits (releases and forgets are
// fenced by their term or owner fence in the FSM too); on a follower that
// owns nothing the batch stays pending. It waits for the reservations
// under way.
func (s *Store) Flush(ctx context.Context) error {
	_, err := s.flush(ctx, false)
	return err
}

// flush is Flush; yielding, it gives way to a round of reservations (which
// takes the pending observations along) and reports false, instead of
// holding later reservations out until that round ends.
func (s *Store) flush(ctx context.Context, yielding bool) (ran bool, err error) {
	if !s.mayCommit() || s.pendingCount() == 0 {
		return true, nil
	}
	if yielding {
		if !s.gate.lockYielding() {
			return false, nil
		}
	} else {
		s.gate.lockForced()
	}
	defer s.gate.unlock()
	s.mu.Lock()
	n := min(len(s.pending), s.batchSize)
	if n == 0 {
		s.mu.Unlock()
		return true, nil
	}
	s.inflight = append([]fsm.Settlement(nil), s.pending[:n]...)
	s.pending = append([]fsm.Settlement(nil), s.pending[n:]...)
	batch := s.inflight
	s.mu.Unlock()
	actx, cancel := context.WithTimeout(ctx, 2*s.node.Config().ApplyTimeout)
	defer cancel()
	err = s.commitSettle(actx, &fsm.Settle{Meta: s.settleMeta(), Items: batch})
	s.mu.Lock()
	s.inflight = nil
	if err != nil && !errors.Is(err, fsm.ErrMalformed) {
		s.pending = append(batch, s.pending...)
	}
	s.mu.Unlock()
	if err != nil {
		return true, fmt.Errorf("committing %d observations: %w", len(batch), err)
	}
	s.flushed()
	return true, nil
}

// pendingCount is how many observations wait to be committed.
func (s *Store) pendingCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pending)
}
