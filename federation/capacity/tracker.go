package capacity

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// Tracker keeps Counters for every engaged member, fed by the member's
// shared pod and node informers (those the member worker uses, so no watch
// is added). It is a multicluster.Aware: a member's counters live as long
// as its engagement, and a re-engagement (fresh informers after an outage)
// replaces them. A member whose pods are not cached here (sharding: owned
// by another replica) is engaged by EngageNodes instead, its pods counted
// from the usage its owner publishes (SetUsage); either engagement
// replaces the other when the member's ownership changes.
type Tracker struct {
	// SyncTimeout bounds how long an estimate waits for a member's
	// informers to sync; zero means DefaultSyncTimeout.
	SyncTimeout time.Duration

	mu      sync.RWMutex
	members map[string]*tracked
	// usages are the members' latest published usages, kept whether or
	// not the member is engaged: a publication can be applied before the
	// member is engaged here, and an unchanged usage is not published again.
	usages map[string]Usage
}

// DefaultSyncTimeout is Tracker.SyncTimeout's default.
const DefaultSyncTimeout = 10 * time.Second

type tracked struct {
	counters *Counters
	// synced are the informer registrations the counters wait for.
	synced []toolscache.InformerSynced
	// usageFed: engaged by EngageNodes, the pods counted from a Usage.
	usageFed bool
	// remove takes the node handler off the member's informer.
	remove func()
}

var _ multicluster.Aware = &Tracker{}

// NewTracker returns a Tracker with no members.
func NewTracker() *Tracker {
	return &Tracker{members: map[string]*tracked{}, usages: map[string]Usage{}}
}

// Engage implements multicluster.Aware: it adds the counters' handlers to
// the member's pod and node informers (the member is counted from its
// pods here, as its owner does) and removes them when ctx ends. It
// replaces any earlier engagement of the member, pod-fed or usage-fed.
func (t *Tracker) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	member := string(name)
	c := NewCounters()
	podInf, err := cl.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting pod informer of %s: %w", member, err)
	}
	podReg, err := podInf.AddEventHandler(c.PodHandler())
	if err != nil {
		return fmt.Errorf("counting pods of %s: %w", member, err)
	}
	tr, err := t.engageNodes(ctx, member, cl, c)
	if err != nil {
		_ = podInf.RemoveEventHandler(podReg)
		return err
	}
	tr.synced = append(tr.synced, podReg.HasSynced)
	t.start(ctx, member, tr, func() { _ = podInf.RemoveEventHandler(podReg) })
	return nil
}

// EngageNodes engages a member whose pods are not cached here: only the
// counters' node handler goes on the member's node informer (its pod
// informer is neither read nor started), and the pod-derived part comes
// from the member's latest published Usage (SetUsage). Free and Summary
// answer once the nodes have synced and a usage has been set, exactly as
// for a pod-fed member whose pods that usage was taken from. Like Engage,
// it replaces any earlier engagement of the member, and the handler is
// removed when ctx ends.
func (t *Tracker) EngageNodes(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	member := string(name)
	c := NewCounters()
	tr, err := t.engageNodes(ctx, member, cl, c)
	if err != nil {
		return err
	}
	tr.usageFed = true
	t.start(ctx, member, tr, func() {})
	return nil
}

// engageNodes adds c's node handler to the member's node informer and
// returns the engagement, not yet recorded.
func (t *Tracker) engageNodes(ctx context.Context, member string, cl cluster.Cluster, c *Counters) (*tracked, error) {
	nodeInf, err := cl.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("getting node informer of %s: %w", member, err)
	}
	nodeReg, err := nodeInf.AddEventHandler(c.NodeHandler())
	if err != nil {
		return nil, fmt.Errorf("counting nodes of %s: %w", member, err)
	}
	return &tracked{
		counters: c,
		synced:   []toolscache.InformerSynced{nodeReg.HasSynced},
		remove:   func() { _ = nodeInf.RemoveEventHandler(nodeReg) },
	}, nil
}

// start records tr as the member's engagement, replacing any earlier one,
// and undoes it (removing its handlers, the pod handler by removePods) when
// ctx ends. A replaced engagement's handlers stay until its own ctx ends:
// the caller that engaged it ends it. A usage-fed engagement starts from
// the member's recorded usage, given under the same lock SetUsage records
// under, so a publication applied meanwhile is never missed.
func (t *Tracker) start(ctx context.Context, member string, tr *tracked, removePods func()) {
	t.mu.Lock()
	if u, ok := t.usages[member]; ok && tr.usageFed {
		// Validated when it was recorded.
		_ = tr.counters.SetUsage(u)
	}
	t.members[member] = tr
	t.mu.Unlock()
	go func() {
		<-ctx.Done()
		removePods()
		tr.remove()
		t.mu.Lock()
		if t.members[member] == tr {
			delete(t.members, member)
		}
		t.mu.Unlock()
	}()
}

// SetUsage records the member's latest published usage (every publication
// applied here, this replica's own included) and gives it to the member's
// counters if it is engaged by EngageNodes; a later EngageNodes starts
// from it. A pod-fed member keeps counting its pods. It refuses a usage
// Validate refuses.
func (t *Tracker) SetUsage(member string, u Usage) error {
	if err := u.Validate(); err != nil {
		return fmt.Errorf("setting the usage of %s: %w", member, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	// A copy: the caller may reuse its maps.
	t.usages[member] = u.clone()
	if tr := t.members[member]; tr != nil && tr.usageFed {
		// Under t.mu, so a concurrent EngageNodes of the member either
		// sees this usage in t.usages or is replaced by its tracked here.
		if err := tr.counters.SetUsage(u); err != nil {
			return fmt.Errorf("setting the usage of %s: %w", member, err)
		}
	}
	return nil
}

// ForgetUsage drops the member's recorded usage (a member unregistered);
// a usage-fed engagement keeps the one it has.
func (t *Tracker) ForgetUsage(member string) {
	t.mu.Lock()
	delete(t.usages, member)
	t.mu.Unlock()
}

// Usage returns the pod-derived part of a pod-fed member's counters, for
// its owner to publish; ok is false for a member not engaged by Engage
// here, or whose informers have not synced (a partial count would be
// published as the member's usage).
func (t *Tracker) Usage(member string) (Usage, bool) {
	t.mu.RLock()
	tr := t.members[member]
	t.mu.RUnlock()
	if tr == nil || tr.usageFed || !tr.hasSynced() {
		return Usage{}, false
	}
	return tr.counters.Usage(), true
}

// Free estimates how many more pods of tmpl fit in the member, once its
// counters have seen every node and pod (waiting up to SyncTimeout, and no
// longer than ctx), or, for a member engaged by EngageNodes, every node and
// a published usage (not waited for). ok is false for a member not engaged
// here, not synced in time or without a usage: its capacity is unknown.
func (t *Tracker) Free(ctx context.Context, member string, tmpl *corev1.PodTemplateSpec) (int32, bool) {
	t.mu.RLock()
	tr := t.members[member]
	t.mu.RUnlock()
	if tr == nil {
		return 0, false
	}
	if !tr.hasSynced() {
		timeout := t.SyncTimeout
		if timeout <= 0 {
			timeout = DefaultSyncTimeout
		}
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		if !toolscache.WaitForCacheSync(ctx.Done(), tr.synced...) {
			return 0, false
		}
	}
	// A usage-fed member's usage is not waited for: it comes when its
	// owner publishes one, and meanwhile every plan would wait here.
	if tr.usageFed && !tr.counters.hasUsage() {
		return 0, false
	}
	return tr.counters.Estimate(tmpl), true
}

// Summary sums the member's nodes and what is bound to them; ok as for Free,
// without waiting.
func (t *Tracker) Summary(member string) (Summary, bool) {
	t.mu.RLock()
	tr := t.members[member]
	t.mu.RUnlock()
	if tr == nil || !tr.hasSynced() || (tr.usageFed && !tr.counters.hasUsage()) {
		return Summary{}, false
	}
	return tr.counters.Summary(), true
}

func (tr *tracked) hasSynced() bool {
	for _, s := range tr.synced {
		if !s() {
			return false
		}
	}
	return true
}
