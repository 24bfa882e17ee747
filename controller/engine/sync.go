package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/internal/ctxjoin"
	"github.com/replicafed/replicafed/internal/fedref"
)

// syncScope is one sync of one MemberReplicaSet: what the steps of
// syncReplicaSet find and hand to the steps after them.
type syncScope struct {
	key fedref.MemberObject
	w   *Workload
	// mrs is the copy synced from; a spec or status write replaces it.
	mrs      *v1alpha1.MemberReplicaSet
	selector labels.Selector
	// deleting is true while the MemberReplicaSet or the hub object is
	// being deleted: no pod is created, deleted or adopted.
	deleting bool
	// needsSync is upstream's rsNeedsSync: the expectations are satisfied,
	// so replicas may be managed.
	needsSync bool
	// claimed are the active pods the MemberReplicaSet owns after claiming;
	// terminating are its pods on their way out (status only).
	claimed, terminating []*corev1.Pod
	// gate is what the dependency check decided; waiting is the condition
	// to show while it holds creation back.
	gate    gateState
	waiting *metav1.Condition
	// manageErr is manageReplicas' error: it is shown in the status, then
	// returned for a retry with backoff.
	manageErr error
}

// errCacheLags stops a sync whose pod cache has not caught up with a quorum
// list: nothing is written and the key is synced again shortly.
var errCacheLags = errors.New("pod cache behind a quorum list")

// Sync reconciles one MemberReplicaSet. An error means "retry with backoff".
// The steps, in order (upstream's syncReplicaSet, with the MemberReplicaSet
// in the role of the ReplicaSet):
//
//  1. enter the member-write gate; without a permit nothing is done;
//  2. read the MemberReplicaSet; while the pod cache is incomplete, only
//     report why (reportIfIncomplete);
//  3. syncOwner: create, update or forget the MemberReplicaSet;
//  4. verifyTerm: before the first write of a term, the cache must have
//     caught up with a quorum list;
//  5. satisfiedExpectations, before the pods are listed;
//  6. listPods, filterPods, then claimPods (adopt and release);
//  7. manageReplicas, when the expectations are satisfied and nothing is
//     being deleted, once the dependencies exist;
//  8. calculateStatus, updateReplicaSetStatus (paced), report to the hub;
//  9. nextSync: when to look again without an event.
func (e *Engine) Sync(ctx context.Context, nn types.NamespacedName) (Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", e.o.Cluster, "memberReplicaSet", nn)
	ctx = ctrl.LoggerInto(ctx, log)

	gateCtx, term, done, ok := e.o.Gate.Enter()
	if !ok {
		log.V(2).Info("Writes not allowed here, skipping sync")
		return Result{}, nil
	}
	defer done()
	if gateCtx.Err() != nil {
		return Result{}, nil
	}
	ctx, cancel := ctxjoin.Join(ctx, gateCtx)
	defer cancel()
	ctx = expectations.WithTerm(ctx, term)
	return e.syncReplicaSet(ctx, nn, term)
}

// syncReplicaSet is Sync once the gate has let it in: steps 2 to 9.
func (e *Engine) syncReplicaSet(ctx context.Context, nn types.NamespacedName, term uint64) (Result, error) {
	s := &syncScope{key: e.Key(nn)}
	w, wanted := e.o.Source.Workload(s.key)
	mrs, err := e.getOwner(ctx, nn)
	if err != nil {
		return Result{}, err
	}
	if e.reportIfIncomplete(ctx, s.key, mrs, w, wanted) {
		return Result{RequeueAfter: IncompleteRequeue}, nil
	}
	if s.mrs, err = e.syncOwner(ctx, nn, s.key, mrs, w, wanted); s.mrs == nil || err != nil {
		return Result{}, err
	}
	s.w, s.deleting = w, s.mrs.DeletionTimestamp != nil || w.Deleting
	if s.selector, err = metav1.LabelSelectorAsSelector(s.mrs.Spec.Selector); err != nil || s.selector.Empty() {
		ctrl.LoggerFrom(ctx).Error(err, "Invalid or empty selector, not syncing", "selector", s.mrs.Spec.Selector)
		return Result{}, nil
	}

	if err := e.verifyTerm(ctx, s, term); err != nil {
		return stopped(err)
	}
	if s.needsSync, err = e.satisfiedExpectations(ctx, s); err != nil {
		return stopped(err)
	}
	all, err := e.listPods(ctx, s.mrs)
	if err != nil {
		return Result{}, err
	}
	active, terminating := filterPods(all, s.mrs, s.selector)
	s.terminating = terminating
	if s.claimed, err = e.claimPods(ctx, s, active); err != nil {
		return Result{}, err
	}

	switch {
	case s.deleting:
		s.gate = gateOpen
	case s.needsSync:
		// Pods wait for the template's dependencies; deletions never do.
		if s.gate, s.waiting = e.checkDependencies(ctx, s.mrs, s.w, len(s.claimed)); s.gate == gateOpen {
			s.manageErr = e.manageReplicas(ctx, s)
		}
	}

	now := e.o.Clock.Now()
	st := calculateStatus(s, now)
	statusDue, err := e.updateReplicaSetStatus(ctx, s, &st, now)
	if err != nil {
		return Result{}, err
	}
	// The report carries this sync's counts, written or paced.
	e.report(ctx, s.key, s.mrs, st, s.claimed, now)
	if s.manageErr != nil {
		return Result{}, s.manageErr
	}
	return e.nextSync(s, st, statusDue, now), nil
}

// stopped is the outcome of a sync stopped by err: a retry shortly while
// the cache lags, else a retry with backoff.
func stopped(err error) (Result, error) {
	if errors.Is(err, errCacheLags) {
		return Result{RequeueAfter: cacheLagRequeue}, nil
	}
	return Result{}, err
}

// getOwner reads the MemberReplicaSet from the cache; nil when it does not
// exist.
func (e *Engine) getOwner(ctx context.Context, nn types.NamespacedName) (*v1alpha1.MemberReplicaSet, error) {
	mrs := &v1alpha1.MemberReplicaSet{}
	if err := e.o.Client.Get(ctx, nn, mrs); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading MemberReplicaSet %s from cache: %w", nn, err)
	}
	return mrs, nil
}

// reportIfIncomplete reports whether the pod cache misses pods of the
// member (Options.ViewIncomplete). If it does, the sync writes nothing and
// the hub is told why, for an existing MemberReplicaSet or one the
// workload still needs.
func (e *Engine) reportIfIncomplete(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, wanted bool) bool {
	if e.o.ViewIncomplete == nil {
		return false
	}
	why := e.o.ViewIncomplete()
	if why == nil {
		return false
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Pod cache incomplete, writing nothing to the member", "reason", why.Error())
	switch {
	case mrs != nil:
		e.reportIncomplete(ctx, key, mrs, why)
	case wanted && !w.Deleting:
		// Not created yet: the report says why it is not.
		e.reportIncomplete(ctx, key, &v1alpha1.MemberReplicaSet{Spec: v1alpha1.MemberReplicaSetSpec{Hub: w.Hub}}, why)
	}
	return true
}

// syncOwner brings the MemberReplicaSet in line with the workload: a key
// with neither is forgotten, a MemberReplicaSet without a workload is left
// alone, a missing one is created and a spec that differs is updated. It
// returns the copy to sync pods from, or nil when this sync ends here.
func (e *Engine) syncOwner(ctx context.Context, nn types.NamespacedName, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, wanted bool) (*v1alpha1.MemberReplicaSet, error) {
	switch {
	case mrs == nil && (!wanted || w.Deleting):
		e.forget(key)
		return nil, nil
	case !wanted:
		// Removing the MemberReplicaSet (and with it the pods) is the
		// federation's decision; without a workload we touch nothing.
		ctrl.LoggerFrom(ctx).V(2).Info("No workload for this member, leaving it alone")
		return nil, nil
	case mrs == nil:
		// Pods are created on a later sync, once the cache holds the owner, so
		// their add events resolve to it and settle expectations.
		return nil, e.createOwner(ctx, nn, w)
	}
	mrs = e.written.newest(key, mrs)
	if mrs.DeletionTimestamp == nil && !w.Deleting && ownerSpecDiffers(mrs, w) {
		return e.updateOwner(ctx, key, mrs, w)
	}
	return mrs, nil
}

// forget drops what the engine keeps for a key whose MemberReplicaSet and
// workload are both gone.
func (e *Engine) forget(key fedref.MemberObject) {
	e.o.Store.Delete(key)
	e.verified.forget(key)
	e.written.forget(key)
	e.paced.forget(key)
}

// verifyTerm checks, before the first pod write of a term (or after the
// store dropped observations), that the cache has caught up with a quorum
// list, and settles earlier terms' reservations from that list: a new
// leader must not act on a cache that lags what the old leader saw. It
// returns errCacheLags while the cache lags.
func (e *Engine) verifyTerm(ctx context.Context, s *syncScope, term uint64) error {
	fresh := e.freshness(term)
	if e.verified.is(s.key, fresh) {
		return nil
	}
	if err := e.verifyCache(ctx, s); err != nil {
		return err
	}
	e.verified.set(s.key, fresh)
	return nil
}

// verifyCache is verify with a lagging cache as errCacheLags.
func (e *Engine) verifyCache(ctx context.Context, s *syncScope) error {
	caughtUp, err := e.verify(ctx, s.key, s.mrs, s.selector)
	if err != nil {
		return err
	}
	if !caughtUp {
		return errCacheLags
	}
	return nil
}

// satisfiedExpectations is upstream's expectations check, made before the
// pods are listed so pods the informer has not shown yet cannot cause a
// duplicate create. Expectations unsatisfied for UnsatisfiedRequeue are
// settled from a quorum list instead of waiting for the TTL: an informer
// event that would settle them may have been missed. It returns
// errCacheLags while the cache lags that list.
func (e *Engine) satisfiedExpectations(ctx context.Context, s *syncScope) (bool, error) {
	needsSync := e.o.Store.Satisfied(s.key)
	if !needsSync && e.verified.unsatisfiedFor(s.key, e.o.Clock.Now()) >= e.o.UnsatisfiedRequeue {
		if err := e.verifyCache(ctx, s); err != nil {
			return false, err
		}
		e.verified.satisfied(s.key)
		needsSync = e.o.Store.Satisfied(s.key)
	}
	if needsSync {
		e.verified.satisfied(s.key)
	}
	return needsSync, nil
}

// filterPods splits the pods listed for mrs into the active ones (claim
// candidates) and those terminating that mrs controls and its selector
// matches (counted in the status only). Succeeded and failed pods are in
// neither.
func filterPods(all []*corev1.Pod, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector) (active, terminating []*corev1.Pod) {
	for _, p := range all {
		if podstate.IsActive(p) {
			active = append(active, p)
		} else if podstate.IsTerminating(p) && metav1.IsControlledBy(p, mrs) && selector.Matches(labels.Set(p.Labels)) {
			terminating = append(terminating, p)
		}
	}
	return active, terminating
}

// claimPods adopts matching orphans and releases owned pods that no longer
// match, and returns the active pods the MemberReplicaSet owns. An adoption
// first re-reads the owner live, as upstream.
func (e *Engine) claimPods(ctx context.Context, s *syncScope, active []*corev1.Pod) ([]*corev1.Pod, error) {
	cm := &claim.Claimer{Patcher: e.o.Client, Owner: s.mrs, Selector: s.selector, Deleting: s.deleting,
		CanAdopt: claim.RecheckOwner(e.o.APIReader, s.mrs)}
	claimed, err := cm.Claim(ctx, active)
	if err != nil {
		return nil, fmt.Errorf("claiming pods: %w", err)
	}
	return claimed, nil
}

// manageReplicas creates or deletes pods toward the target, at most
// BurstReplicas.
func (e *Engine) manageReplicas(ctx context.Context, s *syncScope) error {
	diff := len(s.claimed) - int(s.mrs.Spec.Replicas)
	switch {
	case diff < 0:
		return e.createPods(ctx, s.key, s.mrs, s.w, s.selector, len(s.claimed), min(-diff, e.o.BurstReplicas))
	case diff > 0:
		return e.deletePods(ctx, s.key, s.mrs, s.selector, s.claimed, min(diff, e.o.BurstReplicas))
	}
	return nil
}

// calculateStatus is the status this sync observed, with the dependency
// condition as the gate decided.
func calculateStatus(s *syncScope, now time.Time) v1alpha1.MemberReplicaSetStatus {
	st := replicastatus.Calculate(replicastatus.Input{
		Current: s.mrs.Status, Target: s.mrs.Spec.Replicas, TemplateLabels: s.w.Template.Labels,
		MinReadySeconds: s.mrs.Spec.MinReadySeconds, Active: s.claimed, Terminating: s.terminating,
		ManageErr: s.manageErr, Now: now,
	})
	st.Conditions = withDependencyCondition(st.Conditions, s.gate, s.waiting)
	return st
}

// updateReplicaSetStatus writes st when it differs from the status written:
// at once when the change is urgent, else no sooner than StatusInterval
// after the last write. A write sets st's observed generation and replaces
// s.mrs with what the API server returned. It returns how long a paced
// write waits, 0 when written or unchanged.
func (e *Engine) updateReplicaSetStatus(ctx context.Context, s *syncScope, st *v1alpha1.MemberReplicaSetStatus, now time.Time) (time.Duration, error) {
	mrs := s.mrs
	if !replicastatus.Changed(mrs.Status, *st, mrs.Generation) {
		return 0, nil
	}
	var due time.Duration
	if !replicastatus.Urgent(mrs.Status, *st, mrs.Generation, mrs.Spec.Replicas) {
		due = e.paced.wait(s.key, now)
	}
	if due > 0 {
		ctrl.LoggerFrom(ctx).V(4).Info("Pacing a count-only status write", "in", due)
		return due, nil
	}
	st.ObservedGeneration = mrs.Generation
	updated, err := e.writeStatus(ctx, s.key, mrs, *st)
	if err != nil {
		return 0, err
	}
	s.mrs = updated
	e.paced.wrote(s.key, now)
	return 0, nil
}

// nextSync says when to sync the key again without an event: the soonest
// of the next availability check, a paced status write, a recheck of
// missing dependencies and a look at expectations still unsatisfied.
func (e *Engine) nextSync(s *syncScope, st v1alpha1.MemberReplicaSetStatus, statusDue time.Duration, now time.Time) Result {
	available, _ := replicastatus.RequeueAfter(st, s.mrs.Spec.MinReadySeconds, s.claimed, now, e.o.Clock)
	var dependencies, unsatisfied time.Duration
	if s.gate == gateClosed {
		// The hub pokes the worker when it has copied the dependencies;
		// this covers objects that appear by other hands.
		dependencies = e.o.DependencyRecheck
	}
	if !s.needsSync && !s.deleting {
		// Outstanding expectations are settled by informer events; if one
		// never comes, look again (and re-verify from a quorum list) well
		// before the expectations TTL instead of waiting for an unrelated
		// event.
		unsatisfied = e.o.UnsatisfiedRequeue
	}
	return Result{RequeueAfter: soonest(available, statusDue, dependencies, unsatisfied)}
}

// soonest returns the smallest positive duration of ds, or 0 (no requeue)
// when there is none.
func soonest(ds ...time.Duration) time.Duration {
	var out time.Duration
	for _, d := range ds {
		if d > 0 && (out == 0 || d < out) {
			out = d
		}
	}
	return out
}
