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
// replaces them.
type Tracker struct {
	// SyncTimeout bounds how long an estimate waits for a member's
	// informers to sync; zero means DefaultSyncTimeout.
	SyncTimeout time.Duration

	mu      sync.RWMutex
	members map[string]*tracked
}

// DefaultSyncTimeout is Tracker.SyncTimeout's default.
const DefaultSyncTimeout = 10 * time.Second

type tracked struct {
	counters *Counters
	synced   []toolscache.InformerSynced
}

var _ multicluster.Aware = &Tracker{}

// NewTracker returns a Tracker with no members.
func NewTracker() *Tracker { return &Tracker{members: map[string]*tracked{}} }

// Engage implements multicluster.Aware: it adds the counters' handlers to
// the member's informers and removes them when ctx ends.
func (t *Tracker) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	member := string(name)
	c := NewCounters()
	podInf, err := cl.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting pod informer of %s: %w", member, err)
	}
	nodeInf, err := cl.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting node informer of %s: %w", member, err)
	}
	podReg, err := podInf.AddEventHandler(c.PodHandler())
	if err != nil {
		return fmt.Errorf("counting pods of %s: %w", member, err)
	}
	nodeReg, err := nodeInf.AddEventHandler(c.NodeHandler())
	if err != nil {
		_ = podInf.RemoveEventHandler(podReg)
		return fmt.Errorf("counting nodes of %s: %w", member, err)
	}
	tr := &tracked{counters: c, synced: []toolscache.InformerSynced{podReg.HasSynced, nodeReg.HasSynced}}
	t.mu.Lock()
	t.members[member] = tr
	t.mu.Unlock()
	go func() {
		<-ctx.Done()
		_ = podInf.RemoveEventHandler(podReg)
		_ = nodeInf.RemoveEventHandler(nodeReg)
		t.mu.Lock()
		if t.members[member] == tr {
			delete(t.members, member)
		}
		t.mu.Unlock()
	}()
	return nil
}

// Free estimates how many more pods of tmpl fit in the member, once its
// counters have seen every node and pod (waiting up to SyncTimeout, and no
// longer than ctx). ok is false for a member not engaged here or not synced
// in time: its capacity is unknown.
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
	return tr.counters.Estimate(tmpl), true
}

// Summary sums the member's nodes and what is bound to them; ok as for Free,
// without waiting.
func (t *Tracker) Summary(member string) (Summary, bool) {
	t.mu.RLock()
	tr := t.members[member]
	t.mu.RUnlock()
	if tr == nil || !tr.hasSynced() {
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
