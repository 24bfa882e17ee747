package worker

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/internal/fedref"
)

// Manager runs one Worker per engaged member cluster. It implements
// multicluster.Aware: a provider engages a member when it joins and cancels
// the engage context when it leaves; the worker then stops and this
// process's local expectations state for the member is dropped
// (Store.DeleteCluster, which never changes replicated state: a worker stops
// on every replica, also while the leader is still acting on the member).
type Manager struct {
	o Options

	mu      sync.Mutex
	members map[string]*member
}

type member struct {
	cl     cluster.Cluster
	w      *Worker
	cancel context.CancelFunc
	done   chan struct{}
}

var _ multicluster.Aware = (*Manager)(nil)

// NewManager returns a Manager that builds workers with o.
func NewManager(o Options) *Manager {
	return &Manager{o: o, members: map[string]*member{}}
}

// Engage starts a worker for the member, bound to ctx. Engaging the same
// cluster instance again is a no-op; a different instance under the same name
// replaces the running worker.
func (m *Manager) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	n := name.String()
	m.mu.Lock()
	old := m.members[n]
	m.mu.Unlock()
	if old != nil {
		if old.cl == cl {
			return nil
		}
		old.cancel()
		<-old.done
	}
	w, err := New(n, cl, m.o)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithCancel(ctx)
	mem := &member{cl: cl, w: w, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.members[n] = mem
	m.mu.Unlock()
	go func() {
		defer close(mem.done)
		log := ctrl.LoggerFrom(ctx).WithValues("cluster", n)
		if err := w.Start(wctx); err != nil {
			log.Error(err, "Member worker failed")
		}
		cancel()
		// Stopped: nothing of this worker is in flight any more. Local
		// cleanup only, see Store.DeleteCluster.
		m.o.Store.DeleteCluster(n)
		m.mu.Lock()
		if m.members[n] == mem {
			delete(m.members, n)
		}
		m.mu.Unlock()
	}()
	return nil
}

// Enqueue asks the worker of key.Cluster, if engaged, to sync key.
func (m *Manager) Enqueue(key fedref.MemberObject) {
	m.mu.Lock()
	mem := m.members[key.Cluster]
	m.mu.Unlock()
	if mem != nil {
		mem.w.Enqueue(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
	}
}

// enqueueAllTimeout bounds each worker's list in EnqueueAll: a cache that
// is being replaced (a member re-engaged after a health flap or a kubeconfig
// rotation) may never sync, and a list on it waits for its context; that
// must not hold up the other members (a leader's periodic resync once
// stalled for three minutes behind one).
var enqueueAllTimeout = 10 * time.Second

// EnqueueAll asks every engaged worker to sync all its MemberReplicaSets.
// Workers are listed in parallel, each within enqueueAllTimeout.
func (m *Manager) EnqueueAll(ctx context.Context) {
	m.mu.Lock()
	ws := make([]*Worker, 0, len(m.members))
	for _, mem := range m.members {
		ws = append(ws, mem.w)
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, enqueueAllTimeout)
			defer cancel()
			if err := w.EnqueueAll(lctx); err != nil && ctx.Err() == nil {
				ctrl.LoggerFrom(ctx).Error(err, "Enqueueing all MemberReplicaSets", "cluster", w.Name())
			}
		})
	}
	wg.Wait()
}

// PodCacheIncomplete says why the named member's pod cache misses pods
// (Worker.PodCacheIncomplete); nil when it does not or the member is not
// engaged.
func (m *Manager) PodCacheIncomplete(member string) error {
	m.mu.Lock()
	mem := m.members[member]
	m.mu.Unlock()
	if mem == nil {
		return nil
	}
	return mem.w.PodCacheIncomplete()
}

// Members returns the names of engaged members.
func (m *Manager) Members() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.members))
	for n := range m.members {
		out = append(out, n)
	}
	return out
}

// Stop cancels every worker and waits for them to finish.
func (m *Manager) Stop() {
	m.mu.Lock()
	ms := make([]*member, 0, len(m.members))
	for _, mem := range m.members {
		ms = append(ms, mem)
	}
	m.mu.Unlock()
	for _, mem := range ms {
		mem.cancel()
		<-mem.done
	}
}
