package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/ctxjoin"
	"github.com/replicafed/replicafed/internal/metrics"
)

// Reconciler plans and reports FederatedReplicaSets on the leader.
type Reconciler struct {
	// Hub is the hub client (cached reads, writes).
	Hub client.Client
	// Registry lists engaged members.
	Registry Members
	// Health gives each member's reachability.
	Health HealthSource
	// Targets holds committed targets.
	Targets TargetStore
	// Rollouts holds the rollout records of FederatedReplicaSets with
	// spec.updateStrategy type Rolling; nil plans every template change as
	// a ReplicaSet does.
	Rollouts RolloutStore
	// History writes and reads the ControllerRevisions that keep a rolling
	// object's revisions for undo (uncached reads); nil keeps no history.
	History client.Client
	// Reports holds member statuses.
	Reports *Reports
	// Capacity estimates members' free room from incrementally kept
	// counters; nil lists every node and pod of the member on each
	// estimate instead (tests, tools).
	Capacity CapacitySource
	// PodsCached says whether this replica caches a member's pods; nil
	// means every member's. A member whose pods are not cached (sharding:
	// another replica owns it) is planned from Capacity alone, never from
	// its member cache's pods: a list there would start a pod informer.
	PodsCached func(member string) bool
	// Gate permits writes on the leader only.
	Gate Gate
	// Poker pokes member workers after targets change.
	Poker Poker
	// Expectations are dropped for a FederatedReplicaSet once it is gone.
	Expectations ExpectationsForgetter
	// Recorder emits events on FederatedReplicaSets.
	Recorder events.EventRecorder
	// StatusInterval is the least time between two status writes of one object.
	StatusInterval time.Duration
	// StatusBudget bounds, in writes per second, the status writes of
	// changes that are not significant (counts) while many objects have
	// one waiting: with n waiting, each object writes at most once per
	// n/StatusBudget seconds. Zero leaves StatusInterval as the only bound.
	StatusBudget float64
	// Clock is injected for tests.
	Clock clock.PassiveClock
	// Intents remembers orphan deletions seen on the event path; optional.
	Intents *DeletionIntents
	// MemberProblems says why a member cannot be worked in (empty when it can);
	// optional.
	MemberProblems func(cluster string) string
	// Defaults fill the failover fields a FederatedReplicaSet leaves unset.
	Defaults v1alpha1.Failover
	// Registered lists the registered members, engaged here or not
	// (registry.Registry.Registered); optional, the engaged ones otherwise.
	Registered func(ctx context.Context) ([]registry.Registration, error)
	// RecordedTaints returns a member's taints with the timeAdded recorded
	// for those registered without one (memberstatus.RecordedTaints);
	// optional.
	RecordedTaints func(ctx context.Context, cluster string) []v1alpha1.ClusterTaint
	// MemberTimeout bounds each wait on a member (DefaultMemberTimeout when
	// zero): one that does not answer in time is unknown for that pass.
	MemberTimeout time.Duration

	status statusPacer
	// taints stands in for missing taint times; warned dedupes warnings.
	taints taintClock
	warned warnings
	// awaiting records since when a plan waits for member facts.
	awaiting syncMap[string, time.Time]
	term     termMark
	// stalls are the members that recently did not answer in time.
	stalls stalls
	// liveChecks records, by namespace/name, when a deletion last called
	// every member (waitOnCaches).
	liveChecks syncMap[string, liveCheck]
}

// memberTimeout is MemberTimeout, or its default when unset.
func (r *Reconciler) memberTimeout() time.Duration {
	if r.MemberTimeout > 0 {
		return r.MemberTimeout
	}
	return DefaultMemberTimeout
}

// Reconcile implements reconcile.Reconciler: one pass over one
// FederatedReplicaSet, in the phases the package documentation lists.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lctx, ok := r.Gate.Allowed()
	if !ok {
		r.forgetIfGone(ctx, req)
		return ctrl.Result{}, nil
	}
	ctx, cancel := ctxjoin.Join(ctx, lctx)
	defer cancel()
	frs, err := r.fetch(ctx, req)
	if err != nil || frs == nil {
		return ctrl.Result{}, err
	}
	if frs.DeletionTimestamp != nil {
		return r.finalize(ctx, frs)
	}
	if err := r.ensureFinalizer(ctx, frs); err != nil {
		return ctrl.Result{}, err
	}
	return r.reconcileSpec(ctx, r.newScope(lctx, frs))
}

// forgetIfGone is all a follower does: it writes nothing, but what it kept
// as an earlier leader must not outlive the object.
func (r *Reconciler) forgetIfGone(ctx context.Context, req ctrl.Request) {
	if err := r.Hub.Get(ctx, req.NamespacedName, &v1alpha1.FederatedReplicaSet{}); apierrors.IsNotFound(err) {
		r.forget(req.Namespace, req.Name)
	}
}

// fetch reads the FederatedReplicaSet of req; nil with no error when it is
// gone (what was kept for it is forgotten).
func (r *Reconciler) fetch(ctx context.Context, req ctrl.Request) (*v1alpha1.FederatedReplicaSet, error) {
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := r.Hub.Get(ctx, req.NamespacedName, frs); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Namespace, req.Name)
			return nil, nil
		}
		return nil, fmt.Errorf("reading FederatedReplicaSet %s: %w", req, err)
	}
	return frs, nil
}

// ensureFinalizer adds the cascade finalizer before anything is planned, so
// no member gets a target the deletion protocol would not clean up. On hubs
// where the chart's admission policy (api/policy.Finalizer) added it
// already, this costs no write.
func (r *Reconciler) ensureFinalizer(ctx context.Context, frs *v1alpha1.FederatedReplicaSet) error {
	if controllerutil.ContainsFinalizer(frs, v1alpha1.FinalizerCascade) {
		return nil
	}
	patch := client.MergeFrom(frs.DeepCopy())
	controllerutil.AddFinalizer(frs, v1alpha1.FinalizerCascade)
	if err := r.Hub.Patch(ctx, frs, patch); err != nil {
		return fmt.Errorf("adding finalizer to %s: %w", klog.KObj(frs), err)
	}
	return nil
}

// scope is one pass over one FederatedReplicaSet that is not being deleted:
// what it read, what it decided and the status it builds. Phases fill it in
// order; what must outlive the pass is kept on the Reconciler instead.
type scope struct {
	frs *v1alpha1.FederatedReplicaSet
	// key is namespace/name, the key of what the Reconciler keeps per object.
	key string
	// now is the pass's time; termStart is when this replica's current
	// leadership began.
	now, termStart time.Time
	// prev are the targets last committed, planned for generation prevGen.
	prev    map[string]int32
	prevGen int64
	// problems say why the spec cannot be interpreted; none when it can.
	problems []planner.Problem
	// facts are what the plan is made from (gather).
	facts facts

	// input and plan are what the planner was given and returned.
	input planner.Input
	plan  planner.Result
	// repairing: the object carries AnnotationReplan.
	repairing bool
	// targets are the plan with departed members held at 0; changed says
	// they, or the generation, differ from what is committed.
	targets map[string]int32
	changed bool
	// committed are the targets the members work towards after this pass.
	committed map[string]int32
	// rec is the rollout record read at the start of the pass (nil when
	// the object has none); pass is this pass's rollout, nil without one.
	rec  *rollout.Record
	pass *rollout.PassResult
	// commitErr says why the plan could not be committed (its mark or the
	// targets could not be written); the status reports it.
	commitErr error
	// noCandidates is the warning while a valid placement selects no member.
	noCandidates string

	// outcome is the status under construction: nil while the pass has
	// nothing to report (it waits for facts).
	outcome *outcome
	// requeue is when the pass wants to come back.
	requeue requeue
}

// newScope starts a pass over frs in the leadership term of lctx.
func (r *Reconciler) newScope(lctx context.Context, frs *v1alpha1.FederatedReplicaSet) *scope {
	now := r.Clock.Now()
	prev, prevGen, _ := r.Targets.Targets(refOf(frs))
	return &scope{
		frs:       frs,
		key:       frs.Namespace + "/" + frs.Name,
		now:       now,
		termStart: r.term.observe(lctx, now),
		prev:      prev,
		prevGen:   prevGen,
		problems:  specProblems(frs),
		rec:       r.loadRollout(frs),
	}
}

// phase is one step of a pass. It records what it read and decided in s.
// It returns false when nothing is left for the phases after it, and an
// error when the pass must end without a status write (it is retried with
// backoff).
type phase func(ctx context.Context, s *scope) (more bool, err error)

// phases are the steps of a pass over s, in order.
func (r *Reconciler) phases(s *scope) []phase {
	if len(s.problems) > 0 {
		// Never planned: the members keep their last committed targets.
		return []phase{r.rejectSpec, r.gatherFacts, r.holdTargets}
	}
	return []phase{r.gatherFacts, r.awaitFacts, r.planTargets, r.markForRepair, r.commitTargets, r.rolloutStep, r.clearRepairMark}
}

// reconcileSpec runs the phases of s until one leaves nothing for the rest,
// then reports: the pass's warnings and its one status write.
func (r *Reconciler) reconcileSpec(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, p := range r.phases(s) {
		more, err := p(ctx, s)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !more {
			break
		}
	}
	if s.outcome == nil {
		// Waiting for facts: nothing new to report yet.
		return s.requeue.result(), nil
	}
	return r.report(ctx, s)
}

// report emits the warnings of the pass and writes its status. A commit
// that failed is returned once the status says so, to be retried with
// backoff.
func (r *Reconciler) report(ctx context.Context, s *scope) (ctrl.Result, error) {
	r.warnings(s)
	wait, err := r.writeStatus(ctx, s)
	if err := errors.Join(s.commitErr, err); err != nil {
		return ctrl.Result{}, err
	}
	s.requeue.after(wait)
	return s.requeue.result(), nil
}

// forget drops everything kept for the object namespace/name once it is
// gone: reports, status pacing, waits, warnings, metric series, intents.
func (r *Reconciler) forget(namespace, name string) {
	key := namespace + "/" + name
	r.Reports.Forget(namespace, name)
	r.status.forget(key)
	r.awaiting.Delete(key)
	r.liveChecks.Delete(key)
	r.warned.forget(key)
	metrics.Shortfall.DeleteLabelValues(namespace, name)
	if r.Intents != nil {
		r.Intents.ForgetObject(namespace, name)
	}
}

// event records an event on frs when the reconciler has a recorder.
func (r *Reconciler) event(frs *v1alpha1.FederatedReplicaSet, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(frs, nil, typ, reason, action, format, args...)
	}
}
