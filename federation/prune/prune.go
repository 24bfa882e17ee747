// Package prune keeps raft's per-member state bounded: on the raft leader it
// tells the store the complete list of registered members, and the store
// drops the health records and expectations of every other member.
//
// The list must be complete (a member missing from it loses its state), so
// it comes from the registrations (registry.Registry.Registered: kubeconfig
// Secrets from the synced hub cache plus static members), never from the
// members this replica happens to have engaged. A listing error skips the
// round.
package prune

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/federation/registry"
)

// DefaultInterval is how often the leader prunes when nothing asks earlier.
const DefaultInterval = 10 * time.Minute

// Node is the part of the raft node the pruner uses (raftstore/node.Node).
type Node interface {
	// Leading returns the leader context of the current term; ok is false
	// on followers.
	Leading() (ctx context.Context, term uint64, ok bool)
	// LeaderChanges receives true when this node starts leading.
	LeaderChanges() <-chan bool
	// PruneMembers drops the state of every member not in members.
	PruneMembers(ctx context.Context, members []string) error
}

// Pruner is a manager runnable that prunes on every replica that leads: when
// it starts leading (the registry has loaded by then: the hub cache is
// synced before runnables start), when Trigger is called (a member was
// removed) and every Interval.
type Pruner struct {
	// Node is the raft node.
	Node Node
	// Registered lists every registered member.
	Registered func(ctx context.Context) ([]registry.Registration, error)
	// Interval between periodic prunes; DefaultInterval when zero.
	Interval time.Duration
	// Clock is injected for tests; the real clock when nil.
	Clock clock.WithTicker
	// Done, when set, is called after each round with its error (tests).
	Done func(err error)

	kick chan struct{}
}

// New returns a Pruner.
func New(n Node, registered func(ctx context.Context) ([]registry.Registration, error)) *Pruner {
	return &Pruner{Node: n, Registered: registered, kick: make(chan struct{}, 1)}
}

// Trigger asks for a prune soon (a member was removed). It never blocks;
// requests made while one is pending are merged.
func (p *Pruner) Trigger() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection lets the pruner run on every replica: leadership is
// raft's, checked on every round.
func (p *Pruner) NeedLeaderElection() bool { return false }

// Start prunes until ctx ends.
func (p *Pruner) Start(ctx context.Context) error {
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	interval := p.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	if p.kick == nil {
		p.kick = make(chan struct{}, 1)
	}
	leader := p.Node.LeaderChanges()
	tick := clk.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case leading := <-leader:
			if !leading {
				continue
			}
		case <-p.kick:
		case <-tick.C():
		}
		err := p.Once(ctx)
		if err != nil {
			logr.FromContextOrDiscard(ctx).Error(err, "Pruning state of removed members")
		}
		if p.Done != nil {
			p.Done(err)
		}
	}
}

// Once prunes now if this replica leads; on a follower it does nothing.
func (p *Pruner) Once(ctx context.Context) error {
	lctx, _, ok := p.Node.Leading()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(lctx, cancel)
	defer stop()
	regs, err := p.Registered(ctx)
	if err != nil {
		return fmt.Errorf("listing registered members before pruning: %w", err)
	}
	names := make([]string, len(regs))
	for i, r := range regs {
		names[i] = r.Name
	}
	if err := p.Node.PruneMembers(ctx, names); err != nil {
		return fmt.Errorf("pruning state of members other than %v: %w", names, err)
	}
	logr.FromContextOrDiscard(ctx).V(2).Info("Pruned state of unregistered members", "registered", len(names))
	return nil
}
