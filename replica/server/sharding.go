package server

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/ownergate"
	"github.com/replicafed/replicafed/replica/writefence"
)

// sharding is what sharding.enabled adds to a replica (docs/scale-model.md,
// phase 2 step 1): an owner lease on the members the committed table gives
// it, and a member-write gate per member built on that lease. Every replica
// still engages every member (informers, workers); a member's workers write
// only on its owner, whether or not that replica leads raft. nil when
// sharding is off.
type sharding struct {
	lease *node.OwnerLease
	gates *ownergate.Gates
	// opened receives the members whose refused syncs may run again.
	opened chan string
}

// newSharding returns the replica's owner lease and gates, or nil when
// sharding.enabled is off.
func newSharding(cfg *config.Config, n *node.Node) (*sharding, error) {
	if !cfg.Sharding.Enabled {
		return nil, nil
	}
	lease := n.NewOwnerLease(cfg.Sharding.Lease, cfg.Sharding.Margin, clock.RealClock{})
	s := &sharding{lease: lease, opened: make(chan string, 64)}
	gates, err := ownergate.New(ownergate.Options{
		Lease: ownergate.LeaseFunc(func(member string, d time.Duration) (expectations.Fence, bool) {
			f, ok := lease.PermittedFor(member, d)
			return expectations.Fence{Owner: f.Owner, Epoch: f.Epoch}, ok
		}),
		WriteDeadline: cfg.Controller.MemberWriteTimeout,
		Opened: func(member string) {
			select {
			case s.opened <- member:
			default: // the periodic resync of owned members catches up
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("sharding: %w", err)
	}
	s.gates = gates
	return s, nil
}

// gateFor returns each member's write gate: its owner gate with sharding;
// nil (every member's gate is the raft node's leadership) without.
func (s *sharding) gateFor() func(cluster string) engine.Gate {
	if s == nil {
		return nil
	}
	return func(cluster string) engine.Gate { return s.gates.For(cluster) }
}

// ownedHere returns the worker option Owned: with sharding.ownedPodsOnly a
// replica runs workers (and caches pods) only for the members the
// committed table gives it; nil (every member) otherwise.
func (s *sharding) ownedHere(cfg *config.Config, n *node.Node) func(cluster string) bool {
	if s == nil || !cfg.Sharding.OwnedPodsOnly {
		return nil
	}
	return func(cluster string) bool {
		row, ok := n.FSM().Owner(cluster)
		return ok && row.Owner == n.ServerID()
	}
}

// writeFences returns, per member, the check every pod write to it passes
// right before it leaves. A sync's write carries the sync's owner fence in
// its context and leaves only while this replica still holds that member
// at that epoch with a lease that covers the write's deadline. Any other
// pod write (the hub deleting a deleted FederatedReplicaSet's leftover
// pods) is the raft leader's and leaves under its write lease, as without
// sharding.
func (s *sharding) writeFences(ctl config.Controller, lease writeLease) func(cluster string) []func(*rest.Config) error {
	timeout := ctl.MemberWriteTimeout
	return func(cluster string) []func(*rest.Config) error {
		permitted := s.gates.PermittedContext(cluster, func() bool { return lease.WriteLease(timeout) })
		// The same check for a renewal step and without the wait, for a
		// write in flight whose deadline is up (the owner lease's check
		// never waits).
		step := writefence.RenewalStep(timeout)
		covers := s.gates.PermittedWithin(cluster, step, func() bool { return lease.LeaseCovers(step) })
		r := writefence.Renewal{Covers: covers, Step: step, Max: ctl.MemberWriteMaxDuration}
		return []func(*rest.Config) error{writefence.Renewed(timeout, permitted, r, writefence.DefaultMaxInFlight)}
	}
}

// addSharding adds what sharding runs on every replica: the owner lease's
// renewals, the leader's assignment loop, the gates' watcher and the
// upkeep of the owned members (ownedSync). With sharding off it adds the
// leader's loop that empties an ownership table a sharded configuration
// left behind (node.RunUnsharded).
func addSharding(s *sharding, cfg *config.Config, local manager.Manager, n *node.Node, mem *members, workers *worker.Manager, link hubLink, log logr.Logger) error {
	acfg := node.AssignerConfig{Clock: clock.RealClock{}, Members: registeredNames(mem.reg, n, log), Lease: cfg.Sharding.Lease, Margin: cfg.Sharding.Margin}
	if s == nil {
		if err := local.Add(manager.RunnableFunc(func(ctx context.Context) error { n.RunUnsharded(ctx, acfg); return nil })); err != nil {
			return fmt.Errorf("adding the owner table cleanup: %w", err)
		}
		return nil
	}
	log.Info("Sharding on: each member is written by the replica that owns it", "lease", cfg.Sharding.Lease, "margin", cfg.Sharding.Margin)
	owned := &ownedSync{s: s, n: n, writeDeadline: cfg.Controller.MemberWriteTimeout, workers: workers, counted: mem.counted, source: link.source, reports: link.reports,
		kick: make(chan struct{}, 1), log: log.WithName("owned-members")}
	n.OnApply(owned.applied)
	runs := map[string]manager.Runnable{
		"owner lease renewals": manager.RunnableFunc(func(ctx context.Context) error { s.lease.Run(ctx); return nil }),
		"member assignment":    manager.RunnableFunc(func(ctx context.Context) error { n.RunAssigner(ctx, acfg); return nil }),
		"member gate watcher":  manager.RunnableFunc(func(ctx context.Context) error { s.gates.Run(ctx); return nil }),
		"owned member upkeep":  owned,
	}
	if mem.counted != nil {
		ulog := log.WithName("member-usage")
		runs["member usage publisher"] = &usagePublisher{lease: s.lease, tracker: mem.tracker, interval: cfg.Sharding.UsageInterval, log: ulog}
		runs["member usage follower"] = newUsageFollower(n, mem.tracker, ulog)
	}
	for what, r := range runs {
		if err := local.Add(r); err != nil {
			return fmt.Errorf("adding %s: %w", what, err)
		}
	}
	return nil
}

// registeredNames lists the registered members for the assignment loop. The
// loop drops the owners of members missing from its list, so when the
// registrations cannot be read it answers with the members the table holds
// (nothing moves) instead of none.
func registeredNames(reg *registry.Registry, n *node.Node, log logr.Logger) func() []string {
	return func() []string {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		regs, err := reg.Registered(ctx)
		if err != nil {
			log.Error(err, "Listing the registered members to assign them; keeping the current owners")
			keep := []string{}
			for m := range n.FSM().Owners() {
				keep = append(keep, m)
			}
			return keep
		}
		out := make([]string, 0, len(regs))
		for _, r := range regs {
			out = append(out, r.Name)
		}
		return out
	}
}

// ownedSync does for the members this replica owns what the leader's
// takeover and the hub's pokes do for an unsharded leader. It syncs every
// key of a member it gains or holds at a new epoch (the engine settles the
// earlier owner's expectations from a quorum list at that key's first
// sync), every owned key again each resyncInterval, the keys of each
// FederatedReplicaSet whose targets or rollout raft applied (a follower has
// no hub reconciler to poke it), and a member whose refused syncs may run
// again. It forgets the local reports of a member it loses, so the hub of
// this replica reads the new owner's status instead.
type ownedSync struct {
	s *sharding
	n *node.Node
	// writeDeadline is every member write's deadline
	// (controller.memberWriteTimeout).
	writeDeadline time.Duration
	workers       *worker.Manager
	// counted follows the owned members in the capacity tracker
	// (sharding.ownedPodsOnly); nil otherwise.
	counted *ownedCapacity
	source  *hub.Workloads
	reports *hub.Reports
	kick    chan struct{}
	log     logr.Logger

	mu      sync.Mutex
	pending map[fedref.FRS]bool
}

// NeedLeaderElection is false: owners need not lead raft.
func (o *ownedSync) NeedLeaderElection() bool { return false }

// applied is the raft apply hook. It runs on every replica for every
// applied command and must not block, so it only notes the
// FederatedReplicaSet and wakes Start.
func (o *ownedSync) applied(cmd fsm.Command) {
	var ref fsm.FRSRef
	switch c := cmd.(type) {
	case *fsm.SetTargets:
		ref = c.FRS
	case *fsm.SetRollout:
		ref = c.FRS
	case *fsm.AssignOwners, nil: // owners changed, or a snapshot restored
		o.wake()
		return
	default:
		return
	}
	o.mu.Lock()
	if o.pending == nil {
		o.pending = map[fedref.FRS]bool{}
	}
	o.pending[fedref.FRS{Namespace: ref.Namespace, Name: ref.Name, UID: ref.UID}] = true
	o.mu.Unlock()
	o.wake()
}

func (o *ownedSync) wake() {
	select {
	case o.kick <- struct{}{}:
	default:
	}
}

// Start runs until ctx ends.
func (o *ownedSync) Start(ctx context.Context) error {
	held := map[string]uint64{}
	tick := time.NewTicker(resyncInterval)
	defer tick.Stop()
	for {
		changed := o.s.lease.Changed()
		o.follow(ctx, held)
		select {
		case <-ctx.Done():
			return nil
		case <-o.kick:
		case <-changed:
			o.s.gates.Notify()
		case m := <-o.s.opened:
			o.enqueueMember(ctx, m)
		case <-tick.C:
			for m := range held {
				o.enqueueMember(ctx, m)
			}
		}
	}
}

// follow compares the owned members with held (member -> epoch): it syncs
// every key of a member gained at a new epoch and forgets the reports of a
// member lost; then it syncs the owned keys of the targets applied since
// the last call.
func (o *ownedSync) follow(ctx context.Context, held map[string]uint64) {
	now := map[string]uint64{}
	for _, me := range o.s.lease.Owned() {
		now[me.Member] = me.Epoch
	}
	var gained, lost []string
	for m, e := range now {
		if held[m] != e {
			gained = append(gained, m)
		}
	}
	for m := range held {
		if _, ok := now[m]; !ok {
			lost = append(lost, m)
		}
	}
	if len(gained)+len(lost) > 0 {
		// Workers (and pod caches, sharding.ownedPodsOnly) follow the
		// owned members before the gained ones are synced.
		o.workers.Refresh(ctx)
		if o.counted != nil {
			o.counted.Refresh(o.log)
		}
	}
	for _, m := range gained {
		o.log.V(1).Info("Member owned", "cluster", m, "epoch", now[m])
		metrics.MemberOwnedEpoch.WithLabelValues(m).Set(float64(now[m]))
		o.enqueueMember(ctx, m)
	}
	for _, m := range lost {
		o.log.V(1).Info("Member no longer owned", "cluster", m)
		metrics.MemberOwnedEpoch.DeleteLabelValues(m)
		o.reports.ForgetCluster(m)
		if row, moved := o.n.FSM().Owner(m); moved && row.Handover && row.From == o.n.ServerID() {
			go o.release(ctx, m, row.Epoch)
		}
	}
	clear(held)
	maps.Copy(held, now)
	o.enqueueApplied(ctx, now)
}

// release tells raft that this replica has stopped writing to member, which
// the assignment at epoch moved away from it with a handover wait, so the
// new owner need not wait lease plus margin: once this replica's syncs of
// member have ended (their permission was cancelled when the move was
// seen) and a write deadline has passed after them, so the last pod write
// that left has been answered or given up. Without a release (this
// replica dead or paused) the wait runs out as before.
func (o *ownedSync) release(ctx context.Context, member string, epoch uint64) {
	dctx, cancel := context.WithTimeout(ctx, releaseDrainTimeout)
	defer cancel()
	if err := o.s.gates.Drain(dctx, member); err != nil {
		o.log.Info("Not releasing a moved member: its syncs did not end in time", "cluster", member, "reason", err.Error())
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(o.writeDeadline):
	}
	ended, err := o.s.lease.Release(ctx, member, epoch)
	if err != nil {
		o.log.V(1).Info("Releasing a moved member failed; the new owner waits out the handover", "cluster", member, "reason", err.Error())
		return
	}
	o.log.V(1).Info("Released a moved member", "cluster", member, "epoch", epoch, "handoverEnded", ended)
}

// releaseDrainTimeout bounds the wait for a moved member's syncs to end
// before its release; past it the new owner waits out the handover.
const releaseDrainTimeout = 30 * time.Second

// enqueueMember syncs every MemberReplicaSet and workload of member.
func (o *ownedSync) enqueueMember(ctx context.Context, member string) {
	if err := o.workers.EnqueueMember(ctx, member); err != nil && ctx.Err() == nil {
		o.log.Error(err, "Enqueueing the keys of an owned member", "cluster", member)
	}
}

// enqueueApplied syncs, for each FederatedReplicaSet whose targets or
// rollout were applied since the last call, its keys in the owned members.
func (o *ownedSync) enqueueApplied(ctx context.Context, owned map[string]uint64) {
	o.mu.Lock()
	pending := o.pending
	o.pending = nil
	o.mu.Unlock()
	for frs := range pending {
		for m := range owned {
			for _, k := range o.source.KeysOf(ctx, frs, m) {
				o.workers.Enqueue(k)
			}
		}
	}
}
