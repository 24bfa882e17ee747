// Package engine is the member-side ReplicaSet reconcile for one
// FederatedReplicaSet in one member cluster: the equivalent of upstream's
// syncReplicaSet and manageReplicas, with the MemberReplicaSet in the role of
// the ReplicaSet. See controller/doc.go for the design and the deliberate
// differences from upstream.
package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/ranking"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/controller/slowstart"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
)

// DefaultBurstReplicas caps creations or deletions per sync, as upstream.
const DefaultBurstReplicas = 500

// Event reasons, as upstream's ReplicaSet controller.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// Options configure an Engine for one member cluster.
type Options struct {
	// Cluster is the member's name, used in expectation keys and logs.
	Cluster string
	// Client reads pods and MemberReplicaSets from the member's informer cache
	// (with PodControllerIndex registered) and writes to the member.
	Client client.Client
	// APIReader reads the member live, for the adoption re-check and the
	// status-update retry.
	APIReader client.Reader
	// Store holds expectations.
	Store expectations.Store
	// Source says what the hub wants.
	Source WorkloadSource
	// Sink receives statuses; optional.
	Sink StatusSink
	// Gate permits writes; nil means always open.
	Gate Gate
	// Recorder emits events in the member; optional.
	Recorder events.EventRecorder
	// CreateNamespaces creates a missing namespace in the member (labelled
	// as managed by replicafed); when false, the member reports a
	// ReplicaFailure with reason NamespaceMissing instead.
	CreateNamespaces bool
	// BurstReplicas caps creations or deletions per sync; 0 means 500.
	BurstReplicas int
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// PodStoreRV returns the resource version the pod informer's store has
	// caught up to ("" when unknown); optional. It makes the cache check
	// before the first write of a term cheap; without it pods are compared.
	PodStoreRV func() string
	// UnsatisfiedRequeue is how soon a key whose expectations are not
	// satisfied is synced again without an event; it must be well below the
	// expectations TTL. 0 means DefaultUnsatisfiedRequeue.
	UnsatisfiedRequeue time.Duration
	// Nodes reads the member's nodes for node cost tiers; it must be an
	// informer cache so a scale-down costs no API call. nil means Client.
	Nodes client.Reader
	// Dependencies checks that a workload's dependencies exist before pods
	// are created; nil creates pods without checking.
	Dependencies DependencyChecker
	// DependencyRecheck is how soon a key waiting for dependencies is
	// synced again without an event; 0 means DefaultDependencyRecheck.
	DependencyRecheck time.Duration
	// ViewIncomplete says why the pod cache does not hold every pod of the
	// member (a bounded cache that is full), nil when it does; optional.
	// While it returns an error a sync writes nothing to the member: no
	// pod is created or deleted on a partial view, no owner or status is
	// written. It reports the MemberReplicaSet's last written counts to the
	// Sink with a ReplicaFailure condition, reason PodCacheIncomplete, and
	// the key is synced again after IncompleteRequeue (the worker also
	// requeues every key when the view is complete again).
	ViewIncomplete func() error
}

// ReasonPodCacheIncomplete is the ReplicaFailure reason a member reports
// while its pod cache misses pods (Options.ViewIncomplete).
const ReasonPodCacheIncomplete = "PodCacheIncomplete"

// IncompleteRequeue is how soon a key is synced again while the member's
// view is incomplete.
const IncompleteRequeue = 30 * time.Second

// DefaultUnsatisfiedRequeue is the default Options.UnsatisfiedRequeue.
const DefaultUnsatisfiedRequeue = 15 * time.Second

// cacheLagRequeue is how soon a key is synced again when the pod cache has
// not caught up with a quorum list yet.
const cacheLagRequeue = 200 * time.Millisecond

// Engine syncs MemberReplicaSets of one member. It is safe for concurrent use
// on different keys; the caller must not sync one key concurrently (the
// workqueue guarantees that).
type Engine struct {
	o        Options
	verified verified
	written  written
	paced    statusPace
}

// Result tells the caller when to sync the key again without an event.
type Result struct {
	// RequeueAfter > 0 asks for another sync after that delay.
	RequeueAfter time.Duration
}

// New returns an Engine with defaults filled in.
func New(o Options) *Engine {
	if o.Gate == nil {
		o.Gate = OpenGate{}
	}
	if o.BurstReplicas <= 0 {
		o.BurstReplicas = DefaultBurstReplicas
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.APIReader == nil {
		o.APIReader = o.Client
	}
	if o.Nodes == nil {
		o.Nodes = o.Client
	}
	if o.UnsatisfiedRequeue <= 0 {
		o.UnsatisfiedRequeue = DefaultUnsatisfiedRequeue
	}
	if o.DependencyRecheck <= 0 {
		o.DependencyRecheck = DefaultDependencyRecheck
	}
	return &Engine{o: o}
}

// Key returns the expectations key of a MemberReplicaSet in this member.
func (e *Engine) Key(nn types.NamespacedName) fedref.MemberObject {
	return fedref.MemberObject{Cluster: e.o.Cluster, Namespace: nn.Namespace, Name: nn.Name}
}

func ownerSpec(w *Workload) v1alpha1.MemberReplicaSetSpec {
	return v1alpha1.MemberReplicaSetSpec{Replicas: w.Target, Selector: w.Selector.DeepCopy(), MinReadySeconds: w.MinReadySeconds,
		NodeCost: w.NodeCost.DeepCopy(), Hub: w.Hub}
}

func ownerSpecDiffers(mrs *v1alpha1.MemberReplicaSet, w *Workload) bool {
	return !equality.Semantic.DeepEqual(mrs.Spec, ownerSpec(w))
}

func (e *Engine) createOwner(ctx context.Context, nn types.NamespacedName, w *Workload) error {
	mrs := &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: nn.Namespace, Name: nn.Name,
			Labels:      map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelFederatedName: w.Hub.Name},
			Annotations: map[string]string{v1alpha1.AnnotationHubUID: string(w.Hub.UID)},
		},
		Spec: ownerSpec(w),
	}
	err := e.o.Client.Create(ctx, mrs)
	if apierrors.IsNotFound(err) {
		err = e.namespaceMissing(ctx, nn, w, mrs)
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind; its add event will requeue the key.
			return nil
		}
		return fmt.Errorf("creating MemberReplicaSet %s: %w", nn, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Created MemberReplicaSet", "target", w.Target)
	return nil
}

// namespaceMissing handles a create refused because the namespace does not
// exist in the member: create it and retry, or report the failure to the hub.
func (e *Engine) namespaceMissing(ctx context.Context, nn types.NamespacedName, w *Workload, mrs *v1alpha1.MemberReplicaSet) error {
	if !e.o.CreateNamespaces {
		err := fmt.Errorf("namespace %s does not exist in member %s and controller.createNamespaces is false", nn.Namespace, e.o.Cluster)
		if e.o.Sink != nil {
			e.o.Sink.Report(ctx, w.Key, MemberStatus{
				Target: w.Target, Hub: w.Hub, ReportedAt: e.o.Clock.Now(),
				ReplicaFailure: &metav1.Condition{Type: "ReplicaFailure", Status: metav1.ConditionTrue, Reason: "NamespaceMissing", Message: err.Error()},
			})
		}
		return err
	}
	nsLabels := PodSecurityLabels(w.NamespaceLabels)
	nsLabels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nn.Namespace, Labels: nsLabels}}
	if err := e.o.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", nn.Namespace, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Created missing namespace", "namespace", nn.Namespace, "labels", nsLabels)
	return e.o.Client.Create(ctx, mrs)
}

func (e *Engine) updateOwner(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload) (*v1alpha1.MemberReplicaSet, error) {
	upd := mrs.DeepCopy()
	upd.Spec = ownerSpec(w)
	if err := e.o.Client.Update(ctx, upd); err != nil {
		return nil, fmt.Errorf("updating MemberReplicaSet %s spec: %w", klog.KObj(mrs), err)
	}
	e.written.record(key, mrs, upd)
	ctrl.LoggerFrom(ctx).V(1).Info("Updated MemberReplicaSet spec", "target", w.Target, "previousTarget", mrs.Spec.Replicas)
	return upd, nil
}

// listPods returns the pods controlled by mrs plus the orphans in its
// namespace, straight from the cache: they must not be modified.
func (e *Engine) listPods(ctx context.Context, mrs *v1alpha1.MemberReplicaSet) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, v := range []string{string(mrs.UID), OrphanIndexValue} {
		var l corev1.PodList
		if err := e.o.Client.List(ctx, &l, client.InNamespace(mrs.Namespace),
			client.MatchingFields{PodControllerIndex: v}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing pods from cache: %w", err)
		}
		for i := range l.Items {
			out = append(out, &l.Items[i])
		}
	}
	return out, nil
}

func (e *Engine) event(mrs *v1alpha1.MemberReplicaSet, typ, reason, action, note string, args ...any) {
	// Every pod create and delete outcome passes here once, so the counters
	// follow the events an operator sees in the member.
	switch reason {
	case ReasonSuccessfulCreate:
		metrics.PodOperations.WithLabelValues(e.o.Cluster, "create", "success").Inc()
	case ReasonFailedCreate:
		metrics.PodOperations.WithLabelValues(e.o.Cluster, "create", "failure").Inc()
	case ReasonSuccessfulDelete:
		metrics.PodOperations.WithLabelValues(e.o.Cluster, "delete", "success").Inc()
	case ReasonFailedDelete:
		metrics.PodOperations.WithLabelValues(e.o.Cluster, "delete", "failure").Inc()
	}
	if e.o.Recorder != nil {
		e.o.Recorder.Eventf(mrs, nil, typ, reason, action, note, args...)
	}
}

func (e *Engine) createPods(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, selector labels.Selector, active, n int) error {
	log := ctrl.LoggerFrom(ctx)
	// Refused before any expectation or call, so a bad template costs nothing
	// but an event and the ReplicaFailure condition.
	if err := validateTemplate(&w.Template, selector); err != nil {
		e.event(mrs, corev1.EventTypeWarning, ReasonFailedCreate, "Create", "Error creating: %v", err)
		return err
	}
	names, err := e.o.Store.ExpectCreations(ctx, key, expectations.CreateIntent{
		Target: mrs.Spec.Replicas, Active: active, Count: n, Prefix: mrs.Name + "-"})
	if err != nil {
		return fmt.Errorf("reserving %d pod creations: %w", n, err)
	}
	log.V(1).Info("Too few replicas", "need", mrs.Spec.Replicas, "active", active, "creating", len(names))
	done := make([]bool, len(names))
	createErrs := make([]error, len(names))
	sent := make([]bool, len(names))
	successes, err := slowstart.Run(len(names), 1, func(i int) error {
		pod := NewPod(mrs, &w.Template, names[i])
		sent[i] = true
		cerr := e.o.Client.Create(ctx, pod)
		switch {
		case cerr == nil:
			done[i] = true
			e.event(mrs, corev1.EventTypeNormal, ReasonSuccessfulCreate, "Create", "Created pod: %v", pod.Name)
			return nil
		case names[i] != "" && apierrors.IsAlreadyExists(cerr):
			// A reserved name that exists was created by an earlier attempt.
			done[i] = true
			return nil
		case apierrors.HasStatusCause(cerr, corev1.NamespaceTerminatingCause):
			// Every create will fail until the namespace is gone; upstream
			// counts this as success and stays quiet.
			done[i] = true
			return nil
		}
		createErrs[i] = cerr
		e.event(mrs, corev1.EventTypeWarning, ReasonFailedCreate, "Create", "Error creating: %v", cerr)
		return fmt.Errorf("creating pod for %s: %w", klog.KObj(mrs), cerr)
	})
	if skipped := len(names) - successes; skipped > 0 {
		log.V(2).Info("Slow-start failure, lowering expectations", "skipped", skipped)
	}
	for i, ok := range done {
		switch {
		case ok:
		case sent[i] && names[i] != "" && !writeRefused(createErrs[i]):
			// The pod may exist or still appear (a timeout, a cancelled
			// call): keep the name for the slot, never a new one.
			e.o.Store.CreationUnknown(key, names[i])
		default:
			e.o.Store.CreationFailed(key, names[i])
		}
	}
	return err
}

// ErrNotSent marks a member write that a client-side fence stopped before it
// left the process (the leader's write lease had lapsed): its outcome is
// known, nothing was created or deleted.
var ErrNotSent = errors.New("member write not sent")

// writeRefused reports whether a pod create or delete failed in a way that
// proves it did not happen: it never left (ErrNotSent), or the API server
// answered with a client error other than a timeout. Anything else (5xx,
// timeouts, transport errors, a cancelled context) leaves the outcome
// unknown.
func writeRefused(err error) bool {
	if errors.Is(err, ErrNotSent) {
		return true
	}
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err)
}

func validateTemplate(t *corev1.PodTemplateSpec, selector labels.Selector) error {
	if len(t.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	if !selector.Matches(labels.Set(t.Labels)) {
		return fmt.Errorf("unable to create pods: template labels %v do not match selector %v", t.Labels, selector)
	}
	return nil
}

func (e *Engine) deletePods(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector, active []*corev1.Pod, n int) error {
	log := ctrl.LoggerFrom(ctx)
	// The MemberReplicaSet stands in for a Deployment-owned ReplicaSet with no
	// siblings: related pods are the ones its selector matches.
	var related corev1.PodList
	if err := e.o.Client.List(ctx, &related, client.InNamespace(mrs.Namespace),
		client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "Listing related pods, ranking without colocation")
	}
	rel := make([]*corev1.Pod, len(related.Items))
	for i := range related.Items {
		rel[i] = &related.Items[i]
	}
	candidates := append([]*corev1.Pod(nil), active...)
	var tierOf func(*corev1.Pod) ranking.NodeTier
	if nc := mrs.Spec.NodeCost; nc != nil && n < len(active) {
		tierOf = e.nodeTiers(ctx, nc)
	}
	victims := ranking.PodsToDelete(candidates, rel, n, e.o.Clock.Now(), tierOf)
	refs := make([]expectations.PodRef, len(victims))
	for i, p := range victims {
		refs[i] = expectations.PodRef{Name: p.Name, UID: p.UID}
	}
	if err := e.o.Store.ExpectDeletions(ctx, key, refs); err != nil {
		return fmt.Errorf("recording %d pod deletions: %w", len(refs), err)
	}
	log.V(1).Info("Too many replicas", "need", mrs.Spec.Replicas, "active", len(active), "deleting", len(victims), "nodeCost", tierOf != nil)
	return e.deleteExact(ctx, key, mrs, refs)
}

// deleteExact deletes the given pods of mrs's namespace in parallel, each
// only if its UID still matches. Their deletions must already be expected
// in the store; a delete that fails settles its expectation at once.
func (e *Engine) deleteExact(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, pods []expectations.PodRef) error {
	errs := make(chan error, len(pods))
	var wg sync.WaitGroup
	for _, p := range pods {
		wg.Go(func() {
			target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: mrs.Namespace, Name: p.Name}}
			uid := p.UID
			err := e.o.Client.Delete(ctx, target, client.Preconditions{UID: &uid})
			switch {
			case err == nil:
				e.event(mrs, corev1.EventTypeNormal, ReasonSuccessfulDelete, "Delete", "Deleted pod: %v", p.Name)
				return
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Our pod is gone (or replaced): nothing to wait for.
				e.o.Store.DeletionObserved(key, p.Name)
				return
			case writeRefused(err):
				// It did not happen and the informer will not report it.
				e.o.Store.DeletionObserved(key, p.Name)
			default:
				// It may still land (a timeout, a call cancelled by a
				// handover): the expectation stays, so neither this leader
				// nor the next chooses another victim while this one may
				// still go; the next reconcile sends it again (upstream
				// settles every failed delete at once).
			}
			e.event(mrs, corev1.EventTypeWarning, ReasonFailedDelete, "Delete", "Error deleting: %v", err)
			errs <- fmt.Errorf("unable to delete pods: %w", err)
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

// writeStatus PUTs the status subresource, retrying once on a live copy with
// the same new status, as upstream. What the API server returns is
// remembered, so the next sync does not start from a cache that has not
// shown this write yet.
func (e *Engine) writeStatus(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, st v1alpha1.MemberReplicaSetStatus) (*v1alpha1.MemberReplicaSet, error) {
	upd := mrs.DeepCopy()
	upd.Status = st
	err := e.o.Client.Status().Update(ctx, upd)
	if err == nil {
		e.written.record(key, mrs, upd)
		return upd, nil
	}
	fresh := &v1alpha1.MemberReplicaSet{}
	if gerr := e.o.APIReader.Get(ctx, client.ObjectKeyFromObject(mrs), fresh); gerr != nil {
		return nil, fmt.Errorf("re-reading MemberReplicaSet %s after failed status update: %w", klog.KObj(mrs), gerr)
	}
	liveRV := fresh.ResourceVersion
	fresh.Status = st
	if err := e.o.Client.Status().Update(ctx, fresh); err != nil {
		return nil, fmt.Errorf("updating MemberReplicaSet %s status: %w", klog.KObj(mrs), err)
	}
	e.written.record(key, mrs, fresh, liveRV)
	return fresh, nil
}

// report sends the hub this sync's view of the member: mrs's spec and the
// status computed now (cur), whether or not it was written yet.
func (e *Engine) report(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, cur v1alpha1.MemberReplicaSetStatus, active []*corev1.Pod, now time.Time) {
	if e.o.Sink == nil {
		return
	}
	uns, since := replicastatus.Unschedulable(active)
	st := MemberStatus{
		Target: mrs.Spec.Replicas, Hub: mrs.Spec.Hub,
		Replicas: cur.Replicas, FullyLabeledReplicas: cur.FullyLabeledReplicas,
		ReadyReplicas: cur.ReadyReplicas, AvailableReplicas: cur.AvailableReplicas,
		Unschedulable: uns, UnschedulableSince: since,
		ObservedGeneration: cur.ObservedGeneration, ReportedAt: now,
	}
	if cur.TerminatingReplicas != nil {
		st.TerminatingReplicas = *cur.TerminatingReplicas
	}
	if c := replicastatus.FindCondition(cur.Conditions, replicastatus.ConditionReplicaFailure); c != nil {
		cc := *c
		st.ReplicaFailure = &cc
	}
	e.o.Sink.Report(ctx, key, st)
}

// reportIncomplete reports the MemberReplicaSet's last written counts with
// a ReplicaFailure saying why nothing is done in the member.
func (e *Engine) reportIncomplete(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, why error) {
	now := e.o.Clock.Now()
	cur := *mrs.Status.DeepCopy()
	cur.Conditions = replicastatus.SetCondition(cur.Conditions, metav1.Condition{
		Type: replicastatus.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: ReasonPodCacheIncomplete,
		Message: why.Error(), LastTransitionTime: metav1.NewTime(now),
	})
	e.report(ctx, key, mrs, cur, nil, now)
}
