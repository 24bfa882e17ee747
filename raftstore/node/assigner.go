package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/ownership"
)

// AssignerConfig configures the leader's member assignment loop.
type AssignerConfig struct {
	// Lease and Margin are the owners' lease and the drift allowance: a
	// member moves away from an owner that stopped renewing only after
	// Lease plus Margin on the leader's clock since it saw the owner's
	// latest renewal (ownership.Watch). They must match the owners'
	// OwnerLease.
	Lease, Margin time.Duration
	// Interval is how often the leader looks; lease/3 when zero.
	Interval time.Duration
	// Damping is how long a replica must have renewed without a lapse,
	// on the leader's clock, before members are moved to it from a live
	// owner for balance (ownership.Watch.Stable); twice Lease when zero.
	// Members without a live owner are assigned at once regardless.
	Damping time.Duration
	// Clock is the leader's monotonic clock (clock.RealClock in production).
	Clock clock.Clock
	// Members lists the registered member clusters, complete: a member
	// missing from it is dropped from the table (as PruneMembers drops its
	// state), so it must not answer before the registry has synced.
	Members func() []string
}

// RunAssigner runs the assignment loop until ctx ends or the node stops.
// While this node leads it watches the owners' renewals and commits an
// AssignOwners whenever ownership.Assign changes the plan. A replica
// receives members moved from a live owner (each such move is a handover
// that stalls the member) only once it has renewed for cfg.Damping;
// members without a live owner go to any live replica at once. Every term
// starts a new watch at the moment this loop sees the leadership (after
// the Barrier, so no earlier than the election): a new leader moves
// nothing away from anyone before a full lease plus margin.
func (n *Node) RunAssigner(ctx context.Context, cfg AssignerConfig) {
	n.runWatching(ctx, cfg, func(ctx context.Context, w *ownership.Watch, term uint64) error {
		return n.assignOnce(ctx, w, term, cfg.Members())
	})
}

// RunUnsharded is the way back from sharding, for a replica running with
// sharding off (cfg.Members is not used). The FSM refuses unfenced writes
// to a member that has an owner, so while the table holds owners this
// replica's member writes there fail. While this node leads it watches the
// owners' renewals as RunAssigner does and, once lease plus margin has
// passed on its own clock since it saw an owner's latest renewal (counted
// from its election for one it has not seen renew), commits an
// AssignOwners that drops that owner's members from the table: their
// outstanding reservations are held (the new writer reissues those names
// first), and unfenced writes apply again. An owner that keeps renewing
// (a replica still running with sharding on) keeps its members.
func (n *Node) RunUnsharded(ctx context.Context, cfg AssignerConfig) {
	n.runWatching(ctx, cfg, n.unshardOnce)
}

// runWatching calls once every cfg.Interval (lease/3 when zero) while this
// node leads, with a watch of the owners' renewals started when it saw
// the term begin, until ctx ends or the node stops.
func (n *Node) runWatching(ctx context.Context, cfg AssignerConfig, once func(context.Context, *ownership.Watch, uint64) error) {
	interval := cfg.Interval
	if interval <= 0 {
		interval = cfg.Lease / 3
	}
	var w *ownership.Watch
	var term uint64
	for {
		if _, t, ok := n.Leading(); !ok {
			w = nil
		} else {
			if w == nil || t != term {
				w, term = ownership.NewWatch(cfg.Clock, cfg.Lease, cfg.Margin).WithDamping(cfg.Damping), t
			}
			if err := once(ctx, w, term); err != nil && ctx.Err() == nil {
				n.log.Info("Changing member owners failed", "reason", err.Error())
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-n.stopCh:
			return
		case <-cfg.Clock.After(interval):
		}
	}
}

// observeRenewals feeds w the owners' latest committed renewals and
// returns them.
func (n *Node) observeRenewals(w *ownership.Watch) map[string]fsm.Renewal {
	renewals := n.fsm.Renewals()
	idx := make(map[string]uint64, len(renewals))
	for o, r := range renewals {
		idx[o] = r.Index
	}
	w.Observe(idx)
	return renewals
}

// unshardOnce drops, in one AssignOwners of term, every member whose
// owner's lease has lapsed by w.
func (n *Node) unshardOnce(ctx context.Context, w *ownership.Watch, term uint64) error {
	owners := n.fsm.Owners()
	if len(owners) == 0 {
		return nil
	}
	n.observeRenewals(w)
	cmd := &fsm.AssignOwners{Meta: n.Meta()}
	cmd.Term = term
	for m, o := range owners {
		if !w.Live(o.Owner) {
			cmd.Drop = append(cmd.Drop, m)
		}
	}
	if len(cmd.Drop) == 0 {
		return nil
	}
	slices.Sort(cmd.Drop)
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.Apply(ctx, cmd); err != nil {
		return fmt.Errorf("dropping %d members from the ownership table: %w", len(cmd.Drop), err)
	}
	n.log.Info("Dropped members from the ownership table (sharding is off here)", "term", term, "members", cmd.Drop)
	return nil
}

// assignOnce observes the renewals committed so far and commits the plan's
// changes, if any, as one AssignOwners of term.
func (n *Node) assignOnce(ctx context.Context, w *ownership.Watch, term uint64, members []string) error {
	renewals := n.observeRenewals(w)
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("reading the raft configuration: %w", err)
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		ids = append(ids, string(s.ID))
	}
	current := map[string]string{}
	for m, o := range n.fsm.Owners() {
		current[m] = o.Owner
	}
	plan := ownership.Assign(members, w.Candidates(ids, current), current)
	cmd := &fsm.AssignOwners{Meta: n.Meta(), Drop: plan.Dropped}
	cmd.Term = term
	for o := range renewals {
		if !slices.Contains(ids, o) {
			cmd.ForgetOwners = append(cmd.ForgetOwners, o)
		}
	}
	slices.Sort(cmd.ForgetOwners)
	for _, m := range plan.Moves {
		cmd.Set = append(cmd.Set, fsm.OwnerAssignment{Member: m.Member, Owner: m.To, Handover: w.Handover(m),
			From: m.From, FromRenewal: renewals[m.From].Index})
	}
	if len(cmd.Set)+len(cmd.Drop)+len(cmd.ForgetOwners) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
	defer cancel()
	if _, err := n.Apply(ctx, cmd); err != nil {
		return fmt.Errorf("committing %d owner changes: %w", len(cmd.Set)+len(cmd.Drop), err)
	}
	n.log.Info("Assigned members to replicas", "term", term, "moves", len(cmd.Set), "dropped", len(cmd.Drop))
	return nil
}
