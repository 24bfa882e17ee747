package worker

import (
	"context"
	"errors"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
)

// Manager runs one Worker per engaged member cluster. It implements
// multicluster.Aware: a provider engages a member when it joins and cancels
// the engage context when it leaves; the worker then stops and this
// process's local expectations state for the member is dropped
// (Store.DeleteCluster, which never changes replicated state: a worker stops
// on every replica, also while the leader is still acting on the member).
type Manager struct {
	o Options

	// switching serialises the replacement of a member's run (Engage of
	// a new cluster instance, Refresh), which waits for the run it
	// replaces to stop.
	switching sync.Mutex

	mu      sync.Mutex
	members map[string]*member
}

type member struct {
	cl cluster.Cluster
	// ctx is the engagement's: every run of the member ends with it.
	ctx context.Context
	// w is the running worker, replaced on a restart, nil while the
	// member is only observed; read under Manager.mu.
	w *Worker
	// cancel and done belong to the current run (a worker, or the
	// observer of a member this replica does not own); under Manager.mu.
	cancel context.CancelFunc
	done   chan struct{}
	// failed is the last start failure (under Manager.mu); it stands
	// until a later worker runs.
	failed error
}

// ConditionWorkerFailing is the MemberCluster condition type that says
// this member's worker on the writing replica fails to start
// (Manager.Failing): the member is engaged but nothing syncs it.
const ConditionWorkerFailing = "WorkerFailing"

// restartBackoff spaces the starts of a member worker that failed to start
// (see Manager.run).
var restartBackoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 8, Cap: time.Minute}

var _ multicluster.Aware = (*Manager)(nil)

// NewManager returns a Manager that builds workers with o.
func NewManager(o Options) *Manager {
	return &Manager{o: o, members: map[string]*member{}}
}

// Engage starts a worker for the member, bound to ctx, or, when
// Options.Owned says this replica does not own it, an observer of its
// MemberReplicaSets. Engaging the same cluster instance again is a no-op;
// a different instance under the same name replaces the running one.
func (m *Manager) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	n := name.String()
	m.switching.Lock()
	defer m.switching.Unlock()
	m.mu.Lock()
	old := m.members[n]
	m.mu.Unlock()
	if old != nil {
		if old.cl == cl {
			return nil
		}
		m.stop(old)
	}
	return m.start(n, &member{cl: cl, ctx: ctx})
}

// owned reports whether this replica runs the named member's worker.
func (m *Manager) owned(name string) bool { return m.o.Owned == nil || m.o.Owned(name) }

// start begins mem's run as Options.Owned says: a worker or an observer.
// The run ends with the engagement or a later stop; when the engagement
// has ended the member is forgotten.
func (m *Manager) start(n string, mem *member) error {
	owned := m.owned(n)
	var w *Worker
	if owned {
		var err error
		if w, err = New(n, mem.cl, m.o); err != nil {
			return err
		}
	}
	rctx, cancel := context.WithCancel(mem.ctx)
	done := make(chan struct{})
	m.mu.Lock()
	mem.w, mem.cancel, mem.done, mem.failed = w, cancel, done, nil
	m.members[n] = mem
	m.mu.Unlock()
	go func() {
		defer close(done)
		if owned {
			m.run(rctx, n, mem)
		} else {
			m.observe(rctx, n, mem.cl)
		}
		cancel()
		// Stopped: nothing of this worker is in flight any more. Local
		// cleanup only, see Store.DeleteCluster.
		m.o.Store.DeleteCluster(n)
		if mem.ctx.Err() == nil {
			return // a switch between worker and observer
		}
		m.mu.Lock()
		if m.members[n] == mem {
			delete(m.members, n)
		}
		m.mu.Unlock()
	}()
	return nil
}

// stop ends mem's current run and waits for it.
func (m *Manager) stop(mem *member) {
	m.mu.Lock()
	cancel, done := mem.cancel, mem.done
	m.mu.Unlock()
	cancel()
	<-done
}

// Refresh asks Options.Owned again for every engaged member: it starts
// the worker of a member this replica now owns, and stops the worker of
// one it no longer owns, which is then only observed, its pod informer
// removed so its pods leave this process's memory (sharding: a replica
// caches the pods of the members it owns). It waits for the workers it
// stops; call it when the owned members change. Without Options.Owned it
// does nothing.
func (m *Manager) Refresh(ctx context.Context) {
	if m.o.Owned == nil {
		return
	}
	m.switching.Lock()
	defer m.switching.Unlock()
	m.mu.Lock()
	switches := map[string]*member{}
	for n, mem := range m.members {
		if m.owned(n) != (mem.w != nil) {
			switches[n] = mem
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for n, mem := range switches {
		wg.Go(func() { m.switchRun(ctx, n, mem) })
	}
	wg.Wait()
}

// switchRun replaces mem's worker by an observer or the other way round.
func (m *Manager) switchRun(ctx context.Context, n string, mem *member) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", n)
	m.mu.Lock()
	wasWorker := mem.w != nil
	m.mu.Unlock()
	m.stop(mem)
	if mem.ctx.Err() != nil {
		return
	}
	if wasWorker {
		// Stops the informer and frees the pods it cached; a worker
		// started later builds a new one and lists the member afresh.
		if err := mem.cl.GetCache().RemoveInformer(ctx, &corev1.Pod{}); err != nil {
			log.Error(err, "Removing the pod informer of a member no longer owned")
		}
	}
	if err := m.start(n, mem); err != nil {
		log.Error(err, "Starting the member's run after an ownership change")
		m.mu.Lock()
		mem.failed = err
		m.mu.Unlock()
		return
	}
	log.V(1).Info("Member run switched", "worker", !wasWorker)
}

// run runs the member's worker until ctx ends. A worker that fails to
// start (the member does not serve the MemberReplicaSet CRD yet, a cache
// bound that does not match) is built and started again after a backoff,
// with the error logged each time: given up, this replica would leave the
// member unsynced whenever it leads, for as long as the process runs.
func (m *Manager) run(ctx context.Context, n string, mem *member) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", n)
	backoff := restartBackoff
	for {
		err := m.worker(mem).Start(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("the worker stopped while its member is engaged")
		}
		d := backoff.Step()
		log.Error(err, "Member worker failed; starting it again", "after", d)
		m.mu.Lock()
		mem.failed = err
		m.mu.Unlock()
		metrics.MemberWorkerRestarts.WithLabelValues(n).Inc()
		// Local state only (Store.DeleteCluster): the failed start has
		// nothing in flight.
		m.o.Store.DeleteCluster(n)
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
		w, err := New(n, mem.cl, m.o)
		if err != nil {
			log.Error(err, "Building the member worker again")
			return
		}
		m.mu.Lock()
		mem.w = w
		m.mu.Unlock()
	}
}

// Failing returns why the named member's worker does not run: the last
// start failure while no later worker runs; nil when it runs, has not
// failed yet or the member is not engaged.
func (m *Manager) Failing(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mem := m.members[name]
	if mem == nil || mem.failed == nil || (mem.w != nil && mem.w.Running()) {
		return nil
	}
	return mem.failed
}

// worker is the member's current worker.
func (m *Manager) worker(mem *member) *Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	return mem.w
}

// engaged is the current worker of the named member, nil when it is not
// engaged or only observed.
func (m *Manager) engaged(name string) *Worker {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mem := m.members[name]; mem != nil {
		return mem.w
	}
	return nil
}

// Enqueue asks the worker of key.Cluster, if engaged, to sync key.
func (m *Manager) Enqueue(key fedref.MemberObject) {
	if w := m.engaged(key.Cluster); w != nil {
		w.Enqueue(types.NamespacedName{Namespace: key.Namespace, Name: key.Name})
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
		if mem.w != nil {
			ws = append(ws, mem.w)
		}
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

// EnqueueMember asks the named member's worker, if engaged, to sync all
// its MemberReplicaSets and workloads (Worker.EnqueueAll), within
// enqueueAllTimeout: for a member whose write permission this replica
// just gained (sharding: it became the member's owner, or its epoch
// changed), where EnqueueAll would list every member.
func (m *Manager) EnqueueMember(ctx context.Context, cluster string) error {
	w := m.engaged(cluster)
	if w == nil {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, enqueueAllTimeout)
	defer cancel()
	return w.EnqueueAll(lctx)
}

// PodCacheIncomplete says why the named member's pod cache misses pods
// (Worker.PodCacheIncomplete); nil when it does not or the member is not
// engaged.
func (m *Manager) PodCacheIncomplete(member string) error {
	if w := m.engaged(member); w != nil {
		return w.PodCacheIncomplete()
	}
	return nil
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

// Stop cancels every worker and observer and waits for them to finish.
func (m *Manager) Stop() {
	m.mu.Lock()
	ms := make([]*member, 0, len(m.members))
	for _, mem := range m.members {
		ms = append(ms, mem)
	}
	m.mu.Unlock()
	for _, mem := range ms {
		m.stop(mem)
	}
}
