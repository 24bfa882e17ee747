// Package worker runs the member engine for one member cluster: informers on
// pods and MemberReplicaSets with upstream's event rules, a node informer for
// node cost tiers, a rate-limited workqueue and N sync goroutines. Manager
// engages one Worker per member through multicluster-runtime.
package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Component is the event source name in member clusters.
const Component = "replicafed"

// DefaultWorkers is the number of concurrent syncs per member, as upstream's
// --concurrent-replicaset-syncs.
const DefaultWorkers = 5

// Options configure workers; the same Options serve every member.
type Options struct {
	// Workers is the number of concurrent syncs per member; 0 means 5.
	Workers int
	// BurstReplicas caps creations or deletions per sync; 0 means 500.
	BurstReplicas int
	// CreateNamespaces creates namespaces missing in the member.
	CreateNamespaces bool
	// Store holds expectations (shared by all members; keys carry the cluster).
	Store expectations.Store
	// Source says what the hub wants.
	Source engine.WorkloadSource
	// Sink receives statuses; optional.
	Sink engine.StatusSink
	// Gate permits writes; nil means always open.
	Gate engine.Gate
	// GateFor returns the named member's gate (sharding: each member has
	// its own, an engine.FencedGate from its owner lease); nil gives every
	// member Gate. It is called once per worker built.
	GateFor func(cluster string) engine.Gate
	// MemberStatusChanged is called when a MemberReplicaSet's status
	// changed in a member, whoever wrote it, with its key and hub
	// reference (which names the FederatedReplicaSet, also for a rollout
	// revision's MemberReplicaSet). It lets the leader learn of status
	// written by the owner of a member it does not own (sharding), whose
	// reports do not reach it. Optional; it runs on the informer's event
	// goroutine and must not block (enqueue and return).
	MemberStatusChanged func(key fedref.MemberObject, hub v1alpha1.HubReference)
	// Owned reports whether this replica runs the named member's worker
	// (sharding: the members it owns); nil means every engaged member.
	// The Manager only observes any other member: the status changes of
	// its MemberReplicaSets reach MemberStatusChanged, and no pod of it is
	// cached. Manager.Refresh applies a change of its answers.
	Owned func(cluster string) bool
	// Clock for the engine; nil means the real clock.
	Clock clock.PassiveClock
	// RateLimiter for the queue; nil means client-go's default controller
	// limiter (per-item 5ms..1000s exponential, overall 10 qps burst 100).
	RateLimiter workqueue.TypedRateLimiter[types.NamespacedName]
	// UnsatisfiedRequeue is engine.Options.UnsatisfiedRequeue.
	UnsatisfiedRequeue time.Duration
	// Dependencies builds the member's engine.Options.Dependencies from
	// its cluster; nil leaves pod creation unchecked.
	Dependencies func(cl cluster.Cluster) engine.DependencyChecker
	// MaxStatusDeferral is engine.Options.MaxStatusDeferral: the longest a
	// MemberReplicaSet's status write waits for a busy member rate limit.
	MaxStatusDeferral time.Duration
	// MaxCachedPods is the most pods one member's cache keeps (config
	// controller.maxCachedPodsPerMember); 0 means no bound. Over it the
	// member's cache stops taking new pods, so one huge member cannot grow
	// the process until it is killed, and the member is degraded: nothing
	// is created or deleted there on the partial view (engine
	// Options.ViewIncomplete), every FederatedReplicaSet it runs shows a
	// ReplicaFailure with reason PodCacheIncomplete, PodCacheIncomplete
	// says so, and replicafed_member_pod_cache_incomplete is 1. The member's
	// cache must be built with CacheOptionsFor(MaxCachedPods): Start fails
	// on a cache with another bound or none.
	MaxCachedPods int
}

// Worker runs the engine for one member cluster.
type Worker struct {
	name   string
	cl     cluster.Cluster
	o      Options
	eng    *engine.Engine
	reader client.Reader
	queue  workqueue.TypedRateLimitingInterface[types.NamespacedName]

	mu     sync.Mutex
	podInf cache.Informer
	bound  *PodBound

	// running is set once the caches synced and the sync goroutines run.
	running atomic.Bool

	// busy is the member rate limit's clientlimit.Busy; parked holds the
	// keys whose status writes wait until it is false, woken batch at a
	// time (wakeParked).
	busy   func() bool
	parked parked
	batch  int
}

// New builds a worker for member name. Nothing runs until Start.
func New(name string, cl cluster.Cluster, o Options) (*Worker, error) {
	if o.Store == nil || o.Source == nil {
		return nil, errors.New("worker options need a Store and a Source")
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	rl := o.RateLimiter
	if rl == nil {
		rl = workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]()
	}
	w := &Worker{name: name, cl: cl, o: o, reader: cl.GetCache(), busy: clientlimit.Busy(cl.GetConfig()), batch: wakeBatch(cl.GetConfig())}
	w.queue = workqueue.NewTypedRateLimitingQueueWithConfig(rl, workqueue.TypedRateLimitingQueueConfig[types.NamespacedName]{Name: "replicafed-" + name})
	var deps engine.DependencyChecker
	if o.Dependencies != nil {
		deps = o.Dependencies(cl)
	}
	gate := o.Gate
	if o.GateFor != nil {
		gate = o.GateFor(name)
	}
	w.eng = engine.New(engine.Options{
		Cluster: name, Client: cl.GetClient(), APIReader: cl.GetAPIReader(), Store: o.Store,
		Source: o.Source, Sink: o.Sink, Gate: gate, Recorder: cl.GetEventRecorder(Component),
		BurstReplicas: o.BurstReplicas, Clock: o.Clock, CreateNamespaces: o.CreateNamespaces,
		PodStoreRV: w.podStoreRV, PodsByController: w.podsByController, UnsatisfiedRequeue: o.UnsatisfiedRequeue,
		// Node cost tiers read node labels from the cache's node informer
		// (shared with the hub's capacity estimate), never live.
		Nodes: cl.GetCache(),
		// Pods wait for their dependencies (spec.propagateDependencies).
		Dependencies:   deps,
		ViewIncomplete: w.PodCacheIncomplete,
		// Status writes wait while pod writes queue for the member's
		// shared rate limit (internal/clientlimit).
		Busy: w.busy, MaxStatusDeferral: o.MaxStatusDeferral,
	})
	return w, nil
}

// storeRVer is what client-go's shared informers offer: the resource
// version their store has caught up to.
type storeRVer interface {
	LastStoreSyncResourceVersion() string
}

// podStoreRV is the resource version the pod informer's store has caught
// up to, or "" before Start or when the informer does not say.
func (w *Worker) podStoreRV() string {
	w.mu.Lock()
	inf := w.podInf
	w.mu.Unlock()
	if i, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		if s, ok := i.GetIndexer().(storeRVer); ok {
			return s.LastStoreSyncResourceVersion()
		}
	}
	return ""
}

// podsByController returns the pods the pod informer's store holds under
// the engine's controller index for namespace and value, without copying
// them (ok false before Start). It reads the index controller-runtime's
// field indexer registers: named "field:<name>", keyed "<namespace>/<value>".
func (w *Worker) podsByController(namespace, value string) ([]*corev1.Pod, bool) {
	w.mu.Lock()
	inf := w.podInf
	w.mu.Unlock()
	i, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, false
	}
	objs, err := i.GetIndexer().ByIndex("field:"+engine.PodControllerIndex, namespace+"/"+value)
	if err != nil {
		return nil, false
	}
	pods := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return nil, false
		}
		pods = append(pods, p)
	}
	return pods, true
}

// Running reports whether Start synced the caches and syncs keys now.
func (w *Worker) Running() bool { return w.running.Load() }

// Name returns the member's name.
func (w *Worker) Name() string { return w.name }

// Enqueue asks for a sync of one FederatedReplicaSet in this member, for
// example when the hub changed its target or created it.
func (w *Worker) Enqueue(nn types.NamespacedName) { w.queue.Add(nn) }

// EnqueueAll asks for a sync of every MemberReplicaSet in the cache, for
// example when write permission was just granted.
func (w *Worker) EnqueueAll(ctx context.Context) error {
	var l v1alpha1.MemberReplicaSetList
	if err := w.reader.List(ctx, &l); err != nil {
		return fmt.Errorf("listing MemberReplicaSets of %s: %w", w.name, err)
	}
	for i := range l.Items {
		w.queue.Add(client.ObjectKeyFromObject(&l.Items[i]))
	}
	return w.enqueueWorkloads(ctx)
}

// enqueueWorkloads asks for a sync of every workload the source knows for
// this member, those without a MemberReplicaSet yet included.
func (w *Worker) enqueueWorkloads(ctx context.Context) error {
	src, ok := w.o.Source.(engine.WorkloadLister)
	if !ok {
		return nil
	}
	keys, err := src.WorkloadKeys(ctx, w.name)
	if err != nil {
		return fmt.Errorf("listing the workloads of %s: %w", w.name, err)
	}
	for _, k := range keys {
		w.queue.Add(types.NamespacedName{Namespace: k.Namespace, Name: k.Name})
	}
	return nil
}

// Start registers the pod index and event handlers, waits for the caches,
// runs the sync goroutines and blocks until ctx ends; then it removes its
// handlers, shuts the queue down and waits for in-flight syncs. The cluster's
// cache must be started by its owner.
func (w *Worker) Start(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", w.name)
	ctx = ctrl.LoggerInto(ctx, log)
	defer w.queue.ShutDown()

	podInf, err := w.cl.GetCache().GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting pod informer of %s: %w", w.name, err)
	}
	// A re-engage of the same cache finds the index already there.
	if !hasIndex(podInf, engine.PodControllerIndex) {
		if err := w.cl.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, engine.PodControllerIndex, engine.PodControllerIndexFunc); err != nil {
			return fmt.Errorf("indexing pods by controller in %s: %w", w.name, err)
		}
	}
	bound := podBoundOf(podInf)
	if w.o.MaxCachedPods > 0 && (bound == nil || bound.Max() != w.o.MaxCachedPods) {
		have := 0
		if bound != nil {
			have = bound.Max()
		}
		return fmt.Errorf("member %s: the worker's maximum of cached pods is %d but its cache keeps at most %d (0: no bound); build the member cluster with worker.CacheOptionsFor(%d)",
			w.name, w.o.MaxCachedPods, have, w.o.MaxCachedPods)
	}
	w.mu.Lock()
	w.podInf, w.bound = podInf, bound
	w.mu.Unlock()
	if bound != nil {
		stop := w.watchBound(ctx, bound)
		defer stop()
	}
	mrsInf, err := w.cl.GetCache().GetInformer(ctx, &v1alpha1.MemberReplicaSet{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting MemberReplicaSet informer of %s: %w", w.name, err)
	}
	// Started here so the first scale-down with node cost tiers finds it
	// synced instead of starting it on the sync path.
	nodeInf, err := w.cl.GetCache().GetInformer(ctx, &corev1.Node{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting node informer of %s: %w", w.name, err)
	}
	h := &handlers{w: w, log: log}
	podReg, err := podInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: h.addPod, UpdateFunc: h.updatePod, DeleteFunc: h.deletePod})
	if err != nil {
		return fmt.Errorf("watching pods of %s: %w", w.name, err)
	}
	defer func() { _ = podInf.RemoveEventHandler(podReg) }()
	mrsReg, err := mrsInf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: h.addOwner, UpdateFunc: h.updateOwner, DeleteFunc: h.deleteOwner})
	if err != nil {
		return fmt.Errorf("watching MemberReplicaSets of %s: %w", w.name, err)
	}
	defer func() { _ = mrsInf.RemoveEventHandler(mrsReg) }()

	if !toolscache.WaitForCacheSync(ctx.Done(), podReg.HasSynced, mrsReg.HasSynced, nodeInf.HasSynced) {
		return fmt.Errorf("waiting for caches of %s: %w", w.name, ctx.Err())
	}
	// Every workload of the member once: what was enqueued while no worker
	// ran (the member engaged before its worker could start, a restart
	// after a failed start) would otherwise wait for the next resync. The
	// MemberReplicaSets need no listing: the informer's add events above
	// enqueue each one.
	if err := w.enqueueWorkloads(ctx); err != nil {
		log.Error(err, "Enqueueing the member's workloads at start")
	}
	log.V(1).Info("Member worker started", "workers", w.o.Workers)
	w.running.Store(true)
	defer w.running.Store(false)
	var wg sync.WaitGroup
	for range w.o.Workers {
		wg.Go(func() { wait.UntilWithContext(ctx, w.run, time.Second) })
	}
	wg.Go(func() { wait.UntilWithContext(ctx, w.wakeParked, LullCheck) })
	<-ctx.Done()
	w.queue.ShutDown()
	wg.Wait()
	log.V(1).Info("Member worker stopped")
	return nil
}

// hasIndex reports whether the informer already has a field index named
// name (controller-runtime prefixes field indexes with "field:").
func hasIndex(inf cache.Informer, name string) bool {
	i, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return false
	}
	_, exists := i.GetIndexer().GetIndexers()["field:"+name]
	return exists
}

func (w *Worker) run(ctx context.Context) {
	for w.next(ctx) {
	}
}

func (w *Worker) next(ctx context.Context) bool {
	key, quit := w.queue.Get()
	if quit {
		return false
	}
	defer w.queue.Done(key)
	res, err := w.eng.Sync(ctx, key)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Sync failed", "memberReplicaSet", key)
		w.queue.AddRateLimited(key)
		return true
	}
	w.queue.Forget(key)
	if res.AwaitLull {
		w.parked.add(key)
	} else {
		w.parked.remove(key)
	}
	if res.RequeueAfter > 0 {
		w.queue.AddAfter(key, res.RequeueAfter)
	}
	return true
}

// handlers apply upstream's informer rules, with the MemberReplicaSet in the
// role of the ReplicaSet.
type handlers struct {
	w   *Worker
	log klog.Logger
}

func (h *handlers) key(nn types.NamespacedName) fedref.MemberObject {
	return fedref.MemberObject{Cluster: h.w.name, Namespace: nn.Namespace, Name: nn.Name}
}

// resolve returns the MemberReplicaSet a controller reference points to, or
// nil when the kind differs, it is not cached, or its UID differs.
func (h *handlers) resolve(namespace string, ref *metav1.OwnerReference) *v1alpha1.MemberReplicaSet {
	if ref.Kind != claim.Kind {
		return nil
	}
	mrs := &v1alpha1.MemberReplicaSet{}
	if err := h.w.reader.Get(context.Background(), types.NamespacedName{Namespace: namespace, Name: ref.Name}, mrs); err != nil {
		return nil
	}
	if mrs.UID != ref.UID {
		return nil
	}
	return mrs
}

// matching returns every MemberReplicaSet in the pod's namespace whose
// non-empty selector matches the pod's labels.
func (h *handlers) matching(p *corev1.Pod) []types.NamespacedName {
	if len(p.Labels) == 0 {
		return nil
	}
	var l v1alpha1.MemberReplicaSetList
	if err := h.w.reader.List(context.Background(), &l, client.InNamespace(p.Namespace)); err != nil {
		return nil
	}
	var out []types.NamespacedName
	for i := range l.Items {
		sel, err := metav1.LabelSelectorAsSelector(l.Items[i].Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(p.Labels)) {
			continue
		}
		out = append(out, client.ObjectKeyFromObject(&l.Items[i]))
	}
	if len(out) > 1 {
		h.log.Info("More than one MemberReplicaSet selects a pod (user error)", "pod", klog.KObj(p), "owners", out)
	}
	return out
}

func (h *handlers) addPod(obj any) {
	p := obj.(*corev1.Pod)
	if p.DeletionTimestamp != nil {
		// Seen for the first time already terminating: never a creation.
		h.deletePod(p)
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		h.observe(p, ref, h.w.o.Store.CreationObserved)
		return
	}
	for _, nn := range h.matching(p) {
		h.w.queue.Add(nn)
	}
}

func (h *handlers) updatePod(oldObj, newObj any) {
	cur, old := newObj.(*corev1.Pod), oldObj.(*corev1.Pod)
	if cur.ResourceVersion == old.ResourceVersion {
		return // periodic resync
	}
	labelsChanged := !labels.Equals(cur.Labels, old.Labels)
	if cur.DeletionTimestamp != nil {
		// Graceful deletion: count it now so a replacement starts at once.
		h.deletePod(cur)
		if labelsChanged {
			h.deletePod(old)
		}
		return
	}
	curRef, oldRef := metav1.GetControllerOfNoCopy(cur), metav1.GetControllerOfNoCopy(old)
	refChanged := !equalRefs(curRef, oldRef)
	if refChanged && oldRef != nil {
		if mrs := h.resolve(old.Namespace, oldRef); mrs != nil {
			h.w.queue.Add(client.ObjectKeyFromObject(mrs))
		}
	}
	if curRef != nil {
		mrs := h.resolve(cur.Namespace, curRef)
		if mrs == nil {
			return
		}
		nn := client.ObjectKeyFromObject(mrs)
		h.w.queue.Add(nn)
		if !podstate.IsReady(old) && podstate.IsReady(cur) && mrs.Spec.MinReadySeconds > 0 {
			h.w.queue.AddAfter(nn, time.Duration(mrs.Spec.MinReadySeconds)*time.Second)
		}
		return
	}
	if labelsChanged || refChanged {
		for _, nn := range h.matching(cur) {
			h.w.queue.Add(nn)
		}
	}
}

func equalRefs(a, b *metav1.OwnerReference) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.UID == b.UID && a.Kind == b.Kind && a.Name == b.Name && a.APIVersion == b.APIVersion &&
		ptrEq(a.Controller, b.Controller) && ptrEq(a.BlockOwnerDeletion, b.BlockOwnerDeletion)
}

func ptrEq(a, b *bool) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// deleted is the object of a delete event: the object itself, or the last
// state the informer knew when it missed the delete (a tombstone).
func deleted[T any](obj any) (T, bool) {
	if o, ok := obj.(T); ok {
		return o, true
	}
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		o, ok := tomb.Obj.(T)
		return o, ok
	}
	var zero T
	return zero, false
}

func (h *handlers) deletePod(obj any) {
	p, ok := deleted[*corev1.Pod](obj)
	if !ok {
		return
	}
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		h.observe(p, ref, h.w.o.Store.DeletionObserved)
	}
}

// observe records p under the MemberReplicaSet its controller reference
// names and queues that owner; a pod of an owner not known here is ignored.
func (h *handlers) observe(p *corev1.Pod, ref *metav1.OwnerReference, record func(fedref.MemberObject, string)) {
	mrs := h.resolve(p.Namespace, ref)
	if mrs == nil {
		return
	}
	nn := client.ObjectKeyFromObject(mrs)
	record(h.key(nn), p.Name)
	h.w.queue.Add(nn)
}

func (h *handlers) addOwner(obj any) {
	h.w.queue.Add(client.ObjectKeyFromObject(obj.(*v1alpha1.MemberReplicaSet)))
}

func (h *handlers) updateOwner(oldObj, newObj any) {
	cur, old := newObj.(*v1alpha1.MemberReplicaSet), oldObj.(*v1alpha1.MemberReplicaSet)
	if cur.UID != old.UID {
		// Deleted and recreated between two watch events.
		h.deleteOwner(toolscache.DeletedFinalStateUnknown{Key: old.Namespace + "/" + old.Name, Obj: old})
	}
	nn := client.ObjectKeyFromObject(cur)
	h.w.queue.Add(nn)
	if changed := h.w.o.MemberStatusChanged; changed != nil && statusChanged(old, cur) {
		changed(h.key(nn), cur.Spec.Hub)
	}
}

func (h *handlers) deleteOwner(obj any) {
	mrs, ok := deleted[*v1alpha1.MemberReplicaSet](obj)
	if !ok {
		return
	}
	nn := client.ObjectKeyFromObject(mrs)
	// A recreated owner starts without expectations.
	h.w.o.Store.Delete(h.key(nn))
	h.w.queue.Add(nn)
}
