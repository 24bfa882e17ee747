package engine

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/internal/clientlimit"
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
	// acted is true when manageReplicas created or deleted a pod: the
	// status computed before is about to change.
	acted bool
	// awaitLull is true when the status write waits for the member's rate
	// limit to fall idle (deferWhileBusy).
	awaitLull bool
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
//  4. verifyTerm: before the first write of a term (of an ownership
//     epoch, behind a FencedGate), the cache must have caught up with a
//     quorum list: the key's own, or the member's one read of the term
//     when the store holds nothing for the key;
//  5. satisfiedExpectations, before the pods are listed;
//  6. listPods, filterPods, then claimPods (adopt and release);
//  7. manageReplicas, when the expectations are satisfied and nothing is
//     being deleted, once the dependencies exist;
//  8. calculateStatus, updateReplicaSetStatus (paced), report to the hub;
//  9. nextSync: when to look again without an event.
func (e *Engine) Sync(ctx context.Context, nn types.NamespacedName) (Result, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", e.o.Cluster, "memberReplicaSet", nn)
	ctx = ctrl.LoggerInto(ctx, log)

	gateCtx, p, done, ok := e.enter()
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
	// A sync's requests take the member's rate limit before events and
	// other background requests.
	ctx = clientlimit.First(ctx)
	return e.syncReplicaSet(p.into(ctx), nn, p)
}

// permit is the write permission a sync runs under: a leader term (a
// Gate), or a member ownership fence (a FencedGate, fenced true).
type permit struct {
	term   uint64
	fence  expectations.Fence
	fenced bool
}

// enter enters the member-write gate: EnterFenced when the gate is a
// FencedGate, else Enter.
func (e *Engine) enter() (context.Context, permit, func(), bool) {
	if e.fenced != nil {
		ctx, f, done, ok := e.fenced.EnterFenced()
		return ctx, permit{fence: f, fenced: true}, done, ok
	}
	ctx, term, done, ok := e.o.Gate.Enter()
	return ctx, permit{term: term}, done, ok
}

// into returns ctx carrying p for the expectations store: the fence
// (expectations.WithFence), else the term (expectations.WithTerm).
func (p permit) into(ctx context.Context) context.Context {
	if p.fenced {
		return expectations.WithFence(ctx, p.fence)
	}
	return expectations.WithTerm(ctx, p.term)
}

// reportedPermit is what a report made under ctx says of its permit
// (MemberStatus.Term and Fence): a fence's epoch and the fence, else the
// term.
func reportedPermit(ctx context.Context) (uint64, expectations.Fence) {
	if f, ok := expectations.FenceFrom(ctx); ok {
		return f.Epoch, f
	}
	t, _ := expectations.TermFrom(ctx)
	return t, expectations.Fence{}
}

// syncReplicaSet is Sync once the gate has let it in: steps 2 to 9.
func (e *Engine) syncReplicaSet(ctx context.Context, nn types.NamespacedName, p permit) (Result, error) {
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

	if err := e.verifyTerm(ctx, s, p); err != nil {
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
		// No pod is created: a wait for dependencies is over.
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

// verifyTerm checks, before the first pod write of a term (or of an
// ownership epoch, behind a FencedGate; or after the store dropped
// observations), that the cache has caught up with a quorum list, and
// settles earlier terms' (epochs') reservations from that list: a new
// leader or owner must not act on a cache that lags what the previous
// one saw. A key the store would settle nothing for needs no list of its
// own when the cache has caught up with the member's quorum read of the
// term (coveredByMember). It returns errCacheLags while the cache lags.
func (e *Engine) verifyTerm(ctx context.Context, s *syncScope, p permit) error {
	fresh := e.freshness(p)
	if e.verified.is(s.key, fresh) {
		return nil
	}
	covered, err := e.coveredByMember(ctx, s.key, fresh)
	if err != nil {
		return err
	}
	if covered {
		e.verified.set(s.key, fresh)
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
	return Result{RequeueAfter: soonest(available, statusDue, dependencies, unsatisfied), AwaitLull: s.awaitLull}
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
