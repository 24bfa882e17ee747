package server

import (
	"bytes"
	"context"
	"errors"
	"maps"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// ownedCapacity engages the capacity tracker by ownership
// (sharding.ownedPodsOnly): a member this replica owns is counted from its
// pods, any other from its nodes and the usage its owner publishes, so
// that no pod of it is cached here. The registry engages it in place of
// the tracker; Refresh follows a change of the owned members.
type ownedCapacity struct {
	tracker *capacity.Tracker
	owned   func(member string) bool

	mu      sync.Mutex
	members map[string]*countedMember
}

// countedMember is one engaged member: the engagement's context and
// cluster, how it is counted now, and how to end that counting.
type countedMember struct {
	ctx    context.Context
	cl     cluster.Cluster
	podFed bool
	cancel context.CancelFunc
}

var _ multicluster.Aware = (*ownedCapacity)(nil)

func newOwnedCapacity(t *capacity.Tracker, owned func(string) bool) *ownedCapacity {
	return &ownedCapacity{tracker: t, owned: owned, members: map[string]*countedMember{}}
}

// Engage implements multicluster.Aware.
func (c *ownedCapacity) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	n := string(name)
	m := &countedMember{ctx: ctx, cl: cl}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.countLocked(n, m); err != nil {
		return err
	}
	if old := c.members[n]; old != nil {
		old.cancel()
	}
	c.members[n] = m
	go func() {
		<-ctx.Done()
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.members[n] == m {
			delete(c.members, n)
		}
	}()
	return nil
}

// countLocked engages the tracker for m as its ownership says, replacing
// the tracker's earlier engagement of the member.
func (c *ownedCapacity) countLocked(n string, m *countedMember) error {
	cctx, cancel := context.WithCancel(m.ctx)
	podFed := c.owned(n)
	var err error
	if podFed {
		err = c.tracker.Engage(cctx, multicluster.ClusterName(n), m.cl)
	} else {
		err = c.tracker.EngageNodes(cctx, multicluster.ClusterName(n), m.cl)
	}
	if err != nil {
		cancel()
		return err
	}
	m.podFed, m.cancel = podFed, cancel
	return nil
}

// Refresh counts every member whose ownership changed the other way. A
// member no longer owned keeps the usage recorded for it; one owned again
// is counted from its pods.
func (c *ownedCapacity) Refresh(log logr.Logger) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for n, m := range c.members {
		if c.owned(n) == m.podFed || m.ctx.Err() != nil {
			continue
		}
		old := m.cancel
		if err := c.countLocked(n, m); err != nil {
			log.Error(err, "Counting a member's capacity after an ownership change", "cluster", n)
			continue
		}
		old()
	}
}

// usageLease is what usagePublisher needs of the owner lease
// (*node.OwnerLease).
type usageLease interface {
	Owned() []fsm.MemberEpoch
	PublishUsage(ctx context.Context, member string, usage []byte) error
}

// usageSource gives an owned member's usage (*capacity.Tracker).
type usageSource interface {
	Usage(member string) (capacity.Usage, bool)
}

// usagePublisher publishes, every interval, the capacity usage of each
// member this replica owns whose usage changed since its last publication
// (sharding.ownedPodsOnly): the other replicas plan the member from it.
type usagePublisher struct {
	lease    usageLease
	tracker  usageSource
	interval time.Duration
	log      logr.Logger

	// last is the encoding last committed per member.
	last map[string][]byte
	// missing is set once a publication found a server without the
	// feature, so it is logged once.
	missing bool
}

// NeedLeaderElection is false: every owner publishes.
func (p *usagePublisher) NeedLeaderElection() bool { return false }

// Start publishes until ctx ends.
func (p *usagePublisher) Start(ctx context.Context) error {
	p.last = map[string][]byte{}
	tick := time.NewTicker(p.interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			p.publishChanged(ctx)
		}
	}
}

// publishChanged publishes the owned members' changed usages and forgets
// what was published for members no longer owned (a member owned again
// publishes afresh: raft dropped its usage when it moved). The changed
// usages go out together, so the leader's group commit puts them in one
// raft entry rather than one each.
func (p *usagePublisher) publishChanged(ctx context.Context) {
	owned := map[string]bool{}
	changed := map[string][]byte{}
	for _, me := range p.lease.Owned() {
		owned[me.Member] = true
		u, ok := p.tracker.Usage(me.Member)
		if !ok {
			continue // not synced yet
		}
		enc, err := capacity.EncodeUsage(u)
		if err != nil {
			p.log.Error(err, "Encoding a member's capacity usage", "cluster", me.Member)
			continue
		}
		if !bytes.Equal(p.last[me.Member], enc) {
			changed[me.Member] = enc
		}
	}
	for m := range p.last {
		if !owned[m] {
			delete(p.last, m)
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for m, enc := range changed {
		wg.Go(func() {
			err := p.lease.PublishUsage(ctx, m, enc)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				p.failed(m, err)
				return
			}
			p.last[m] = enc
		})
	}
	wg.Wait()
}

// failed logs a publication that did not commit; the next tick retries.
func (p *usagePublisher) failed(member string, err error) {
	switch {
	case errors.Is(err, node.ErrFeatureMissing):
		if !p.missing {
			p.log.Info("Not publishing member capacity usage: a replica runs a version without it; the leader cannot estimate the room of members it does not own", "cluster", member)
			p.missing = true
		}
	case errors.Is(err, node.ErrNotPermitted), errors.Is(err, fsm.ErrStale):
		p.log.V(2).Info("Member capacity usage not published: ownership changing", "cluster", member, "reason", err.Error())
	default:
		p.log.V(1).Info("Publishing member capacity usage failed; retrying at the next interval", "cluster", member, "reason", err.Error())
	}
}

// usageFollower hands the usages raft applies to the capacity tracker, on
// every replica: a member this replica does not own is counted from them.
// The apply hook only notes the member; decoding runs off raft's apply
// path.
type usageFollower struct {
	n       *node.Node
	tracker *capacity.Tracker
	log     logr.Logger
	kick    chan struct{}

	mu      sync.Mutex
	pending map[string]bool
	all     bool
}

func newUsageFollower(n *node.Node, t *capacity.Tracker, log logr.Logger) *usageFollower {
	f := &usageFollower{n: n, tracker: t, log: log, kick: make(chan struct{}, 1), pending: map[string]bool{}, all: true}
	n.OnApply(f.applied)
	return f
}

// applied is the raft apply hook: nil is a restored snapshot.
func (f *usageFollower) applied(cmd fsm.Command) {
	f.mu.Lock()
	switch c := cmd.(type) {
	case *fsm.SetMemberUsage:
		f.pending[c.Member] = true
	case nil:
		f.all = true
	default:
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is false: every replica follows the usages.
func (f *usageFollower) NeedLeaderElection() bool { return false }

// Start hands over usages until ctx ends.
func (f *usageFollower) Start(ctx context.Context) error {
	for {
		f.handOver()
		select {
		case <-ctx.Done():
			return nil
		case <-f.kick:
		}
	}
}

// handOver gives the tracker the committed usage of every member noted
// since the last call (of every member after a snapshot or at start).
func (f *usageFollower) handOver() {
	f.mu.Lock()
	pending, all := f.pending, f.all
	f.pending, f.all = map[string]bool{}, false
	f.mu.Unlock()
	usages := map[string]fsm.MemberUsage{}
	if all {
		maps.Copy(usages, f.n.FSM().AllMemberUsage())
	}
	for m := range pending {
		// A member moved or dropped has none: the tracker keeps the last
		// one until the new owner publishes.
		if mu, ok := f.n.MemberUsage(m); ok {
			usages[m] = mu
		}
	}
	for m, mu := range usages {
		u, err := capacity.DecodeUsage(mu.Usage)
		if err == nil {
			err = f.tracker.SetUsage(m, u)
		}
		if err != nil {
			f.log.Error(err, "A member's published capacity usage cannot be used", "cluster", m, "owner", mu.Owner, "epoch", mu.Epoch)
		}
	}
}
