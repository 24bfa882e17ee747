package hub

import (
	"context"
	"fmt"
	"maps"
	"math"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/ctxjoin"
	"github.com/replicafed/replicafed/internal/fedref"
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
	// Reports holds member statuses.
	Reports *Reports
	// Capacity estimates members' free room from incrementally kept
	// counters; nil lists every node and pod of the member on each
	// estimate instead (tests, tools).
	Capacity CapacitySource
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
}

func (r *Reconciler) memberTimeout() time.Duration {
	if r.MemberTimeout > 0 {
		return r.MemberTimeout
	}
	return DefaultMemberTimeout
}

// reportGrace bounds how long a plan waits for the facts of every candidate
// member (engaged here, health known, a report of its pods when it holds
// replicas). A new leader, or a replica that just started, may lack them;
// planning without them would treat running replicas as missing, so it waits.
// Past the bound it plans anyway (a member may be broken for good) and marks
// the object for repair (AnnotationReplan) if the missing facts changed the
// plan.
const reportGrace = 10 * time.Second

// requeueWhileDeleting is how often a blocked deletion is retried.
const requeueWhileDeleting = 5 * time.Second

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lctx, ok := r.Gate.Allowed()
	if !ok {
		// A follower writes nothing, but what it kept as an earlier leader
		// must not outlive the object.
		if err := r.Hub.Get(ctx, req.NamespacedName, &v1alpha1.FederatedReplicaSet{}); apierrors.IsNotFound(err) {
			r.forget(req.Namespace, req.Name)
		}
		return ctrl.Result{}, nil
	}
	ctx, cancel := ctxjoin.Join(ctx, lctx)
	defer cancel()
	log := ctrl.LoggerFrom(ctx)

	frs := &v1alpha1.FederatedReplicaSet{}
	if err := r.Hub.Get(ctx, req.NamespacedName, frs); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading FederatedReplicaSet %s: %w", req, err)
	}
	if frs.DeletionTimestamp != nil {
		return r.finalize(ctx, frs)
	}
	if !controllerutil.ContainsFinalizer(frs, v1alpha1.FinalizerCascade) {
		patch := client.MergeFrom(frs.DeepCopy())
		controllerutil.AddFinalizer(frs, v1alpha1.FinalizerCascade)
		if err := r.Hub.Patch(ctx, frs, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer to %s: %w", req, err)
		}
	}
	if problems := specProblems(frs); len(problems) > 0 {
		return r.reportInvalid(ctx, lctx, frs, problems)
	}

	now := r.Clock.Now()
	termStart := r.term.observe(lctx, now)
	ref := refOf(frs)
	prev, prevGen, _ := r.Targets.Targets(ref)
	f := r.gather(ctx, frs, prev, termStart, now)
	if wait := r.awaitFacts(frs, f, termStart, now); wait > 0 {
		log.V(2).Info("Waiting for member facts before planning", "frs", klog.KObj(frs), "missing", f.missingText())
		// A member may lack a report because its worker never got the
		// key: ask it.
		r.pokeLagging(frs, prev, f)
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	if since, waited := r.awaiting.Load(frs.Namespace + "/" + frs.Name); waited && len(f.missing) > 0 {
		f.waitedOut(since)
	}
	in := planner.NewInput(frs, prev, now, f.members)
	in.Failover = withDefaults(in.Failover, r.Defaults)
	_, repairing := frs.Annotations[AnnotationReplan]
	if repairing && len(f.missing) == 0 {
		in.Failover.MoveBack = v1alpha1.MoveBackOnRecovery
	}
	res := planner.Plan(in)
	var planErr *aggregate.PlanFailure
	if len(res.Targets) == 0 && in.Replicas > 0 {
		// A valid placement that selects no member: nothing can run
		// anywhere, and deleting what runs helps no one. The members keep
		// their last committed targets until a member is selected (or
		// replicas is set to 0); see ReasonNoCandidateClusters.
		log.V(1).Info("Placement selects no member; targets kept", "frs", klog.KObj(frs), "targets", prev)
		planErr = &aggregate.PlanFailure{Reason: ReasonNoCandidateClusters, Message: noCandidatesMessage}
		r.pokeLagging(frs, prev, f)
		// Nothing can be placed, which is not a lack of room.
		held := res
		held.Shortfall, held.Unplaced = 0, 0
		r.warnings(frs, prev, held, f, nil, noCandidatesMessage)
		result, err := r.writeStatus(ctx, frs, prev, outcome{planErr: planErr}, f, now)
		return result, err
	}
	targets := r.withDeparted(frs, prev, res.TargetMap(), f)
	changed := !maps.Equal(prev, targets) || prevGen != frs.Generation
	var commitErr error
	if changed && len(f.missing) > 0 && !repairing {
		opt := in
		opt.Members = optimistic(f, prev)
		if !maps.Equal(r.withDeparted(frs, prev, planner.Plan(opt).TargetMap(), f), targets) {
			if err := r.setReplan(ctx, frs, replanValue(f.missing)); err != nil {
				commitErr = err
				planErr = &aggregate.PlanFailure{Reason: "MarkFailed", Message: err.Error()}
			} else {
				log.V(1).Info("Planned without some members' facts; marked for repair", "frs", klog.KObj(frs), "missing", f.missingText())
			}
		}
	}
	committed := prev
	if changed && commitErr == nil {
		if err := r.Targets.SetTargets(ctx, ref, frs.Generation, targets); err != nil {
			metrics.Plans.WithLabelValues("error").Inc()
			commitErr = fmt.Errorf("committing targets of %s: %w", req, err)
			planErr = &aggregate.PlanFailure{Reason: "CommitFailed",
				Message: fmt.Sprintf("committing the plan for generation %d failed: %v", frs.Generation, err)}
			r.warn(frs, "CommitFailed", "CommitFailed", "committing targets failed: %v", err)
		} else {
			committed = targets
			metrics.Plans.WithLabelValues("committed").Inc()
			log.V(1).Info("Targets committed", "frs", klog.KObj(frs), "targets", targets, "shortfall", res.Shortfall)
			r.planEvents(frs, res.Changes)
			for name := range targets {
				r.Poker.Enqueue(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
			}
		}
	} else if !changed {
		committed = targets
		metrics.Plans.WithLabelValues("unchanged").Inc()
		r.pokeLagging(frs, targets, f)
	}
	if repairing && len(f.missing) == 0 && commitErr == nil && res.MovesPending == 0 {
		if err := r.setReplan(ctx, frs, ""); err != nil {
			return ctrl.Result{}, err
		}
		log.V(1).Info("Spread repaired", "frs", klog.KObj(frs), "targets", committed)
	}
	metrics.Shortfall.WithLabelValues(frs.Namespace, frs.Name).Set(float64(res.Shortfall))
	r.warnings(frs, targets, res, f, commitErr, "")
	result, err := r.writeStatus(ctx, frs, committed, outcome{res: res, planErr: planErr, notes: planNotes(res)}, f, now)
	if commitErr != nil {
		// The status above says what failed; the error retries with backoff.
		return ctrl.Result{}, commitErr
	}
	if err != nil {
		return result, err
	}
	// Nothing else happens when a grace period, threshold or toleration
	// runs out, so come back then and plan again.
	if d := res.RequeueAt.Sub(now); !res.RequeueAt.IsZero() && d > 0 && (result.RequeueAfter == 0 || d < result.RequeueAfter) {
		result.RequeueAfter = d
	}
	return result, nil
}

// planEvents emits one event per reason for a committed plan, listing its
// members' changes: an FRS created or scaled across many members costs the
// hub one event write, not one per member.
func (r *Reconciler) planEvents(frs *v1alpha1.FederatedReplicaSet, changes []planner.Change) {
	var reasons []planner.Reason
	byReason := map[planner.Reason][]string{}
	for _, ch := range changes {
		if ch.From == ch.To {
			continue
		}
		if _, seen := byReason[ch.Reason]; !seen {
			reasons = append(reasons, ch.Reason)
		}
		byReason[ch.Reason] = append(byReason[ch.Reason], fmt.Sprintf("%s %d -> %d", ch.Cluster, ch.From, ch.To))
	}
	for _, reason := range reasons {
		r.event(frs, corev1.EventTypeNormal, string(reason), "Plan", "targets: %s (%s)", strings.Join(byReason[reason], ", "), reason)
	}
}

// pokeLagging asks the workers of members that have not taken up their
// committed target (no MemberReplicaSet yet, or one with another target) to
// sync. The poke after a commit can be lost (the worker skips keys while its
// write gate is shut, say during a lease lapse), and the leader's periodic
// resync only reaches keys whose MemberReplicaSet exists: without this an
// FRS whose first poke was lost never gets its MemberReplicaSets.
func (r *Reconciler) pokeLagging(frs *v1alpha1.FederatedReplicaSet, targets map[string]int32, f facts) {
	for name, target := range targets {
		if rep, ok := f.reports[name]; ok && rep.Target == target {
			continue
		}
		r.Poker.Enqueue(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
	}
}

// warnings emits the warning events of one pass, each only when its state
// changes (a standing warning is not repeated every pass). noCandidates is
// the message of a placement that selects no member, "" when it selects some.
func (r *Reconciler) warnings(frs *v1alpha1.FederatedReplicaSet, targets map[string]int32, res planner.Result, f facts, commitErr error, noCandidates string) {
	current := map[string]bool{}
	emit := func(key, reason, format string, args ...any) {
		current[key] = true
		r.warn(frs, key, reason, format, args...)
	}
	if commitErr != nil {
		current["CommitFailed"] = true // emitted where it happened
	}
	if noCandidates != "" {
		emit(ReasonNoCandidateClusters, ReasonNoCandidateClusters, "%s", noCandidates)
	}
	if res.Shortfall > 0 {
		emit("InsufficientCapacity", "InsufficientCapacity", "the fleet lacks room for %d replicas", res.Shortfall)
	}
	if r.MemberProblems != nil {
		for name := range targets {
			if p := r.MemberProblems(name); p != "" {
				emit("MemberNotPrepared/"+name, "MemberNotPrepared", "cluster %s: %s", name, p)
			}
		}
	}
	for name, why := range f.taintErrors {
		emit("InvalidTaints/"+name, "InvalidTaints", "cluster %s: %s (it takes no new replicas)", name, why)
	}
	if len(res.Unregistered) > 0 {
		emit("UnknownCluster", "UnknownCluster", "placement names unregistered clusters: %v", res.Unregistered)
	}
	if msgs := res.SpreadUnsatisfied(); len(msgs) > 0 {
		emit("SpreadUnsatisfied", "SpreadUnsatisfied", "%s", boundedJoin(msgs, "; ", maxEventMessage))
	}
	// Plan-wide notes, once per distinct set: a standing note is not
	// repeated, a changed one is.
	if notes := planNotes(res); len(notes) > 0 {
		emit("PlanNotes", "PlanNotes", "%s", boundedJoin(notes, "; ", maxEventMessage))
	}
	r.warned.keep(frs.Namespace+"/"+frs.Name, current)
}

// ReasonNoCandidateClusters is the Planned condition's reason (False) and the
// warning's while a valid placement selects no member and spec.replicas is
// above 0. The members keep their last committed targets: a selector that
// matches no cluster (a label typo, every member relabelled) never deletes
// running replicas; scaling to 0 or deleting the object does.
const ReasonNoCandidateClusters = "NoCandidateClusters"

const noCandidatesMessage = "placement selects no registered member cluster: members keep their last committed targets"

// planNotes are the plan-wide remarks of res for the Planned condition and a
// warning: the planner's notes, and why replicas could not be placed at all.
func planNotes(res planner.Result) []string {
	notes := append([]string(nil), res.Notes...)
	if res.Unplaced > 0 {
		notes = append(notes, fmt.Sprintf("%d replicas could not be placed: no candidate member can take more "+
			"(each is at its maxReplicas, held, failed over, cordoned, evicted, outside the spread constraints' groups or of weight 0)", res.Unplaced))
	}
	return notes
}

// reportInvalid handles a spec that cannot be interpreted: nothing is
// planned or committed (the members keep their last committed targets, so
// nothing is deleted on its account), the Invalid condition and a warning
// say why, and the status still shows what the members run.
func (r *Reconciler) reportInvalid(ctx, lctx context.Context, frs *v1alpha1.FederatedReplicaSet, problems []planner.Problem) (ctrl.Result, error) {
	now := r.Clock.Now()
	cond := invalidCondition(problems, frs.Generation)
	ctrl.LoggerFrom(ctx).V(1).Info("Spec cannot be interpreted; targets kept", "frs", klog.KObj(frs), "reason", cond.Reason, "problems", cond.Message)
	key := frs.Namespace + "/" + frs.Name
	r.warn(frs, ConditionInvalid, cond.Reason, "%s", cond.Message)
	r.warned.keep(key, map[string]bool{ConditionInvalid: true})
	r.awaiting.Delete(key)
	prev, _, _ := r.Targets.Targets(refOf(frs))
	f := r.gather(ctx, frs, prev, r.term.observe(lctx, now), now)
	r.pokeLagging(frs, prev, f)
	return r.writeStatus(ctx, frs, prev, outcome{
		planErr: &aggregate.PlanFailure{Reason: "InvalidSpec", Message: "the spec cannot be interpreted (condition Invalid says why)"},
		invalid: &cond,
	}, f, now)
}

// forget drops everything kept for the object namespace/name once it is
// gone: reports, status pacing, waits, warnings, metric series, intents.
func (r *Reconciler) forget(namespace, name string) {
	key := namespace + "/" + name
	r.Reports.Forget(namespace, name)
	r.status.forget(key)
	r.awaiting.Delete(key)
	r.warned.forget(key)
	metrics.Shortfall.DeleteLabelValues(namespace, name)
	if r.Intents != nil {
		r.Intents.ForgetObject(namespace, name)
	}
}

// warn emits a warning event unless the same one (by key and text) was the
// last emitted for frs.
func (r *Reconciler) warn(frs *v1alpha1.FederatedReplicaSet, key, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.warned.changed(frs.Namespace+"/"+frs.Name, key, msg) {
		r.event(frs, corev1.EventTypeWarning, reason, "Plan", "%s", msg)
	}
}

// awaitFacts returns how long to wait before planning because some member's
// facts are missing (bounded by reportGrace from the first wait in this
// term: a wait left from an earlier term of this replica does not count).
func (r *Reconciler) awaitFacts(frs *v1alpha1.FederatedReplicaSet, f facts, termStart, now time.Time) time.Duration {
	key := frs.Namespace + "/" + frs.Name
	waitFor := 0
	for name := range f.missing {
		if !f.stalled[name] { // a member that does not answer is never waited for
			waitFor++
		}
	}
	if waitFor == 0 {
		r.awaiting.Delete(key)
		return 0
	}
	since, ok := r.awaiting.Load(key)
	if !ok || since.Before(termStart) {
		r.awaiting.Store(key, now)
		since = now
	}
	if left := reportGrace - now.Sub(since); left > 0 {
		return min(left, time.Second)
	}
	return 0
}

// withDeparted adds to a plan the members that held a target and are no
// longer candidates: they keep an explicit 0 until they have reported no
// pods, so their workers scale them down (also a member that is away now: it
// is reconciled to 0 when it returns).
func (r *Reconciler) withDeparted(frs *v1alpha1.FederatedReplicaSet, prev, targets map[string]int32, f facts) map[string]int32 {
	for name := range prev {
		if _, ok := targets[name]; ok {
			continue
		}
		rep, ok := f.reports[name]
		if !ok {
			rep, ok = r.Reports.Get(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
		}
		if !ok || rep.Replicas > 0 || rep.TerminatingReplicas > 0 {
			targets[name] = 0
		}
	}
	return targets
}

// setReplan sets (value != "") or clears the repair mark on frs.
func (r *Reconciler) setReplan(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, value string) error {
	_, has := frs.Annotations[AnnotationReplan]
	if (value == "" && !has) || (value != "" && has) {
		return nil
	}
	patch := client.MergeFrom(frs.DeepCopy())
	if value == "" {
		delete(frs.Annotations, AnnotationReplan)
	} else {
		if frs.Annotations == nil {
			frs.Annotations = map[string]string{}
		}
		frs.Annotations[AnnotationReplan] = value
	}
	if err := r.Hub.Patch(ctx, frs, patch); err != nil {
		return fmt.Errorf("marking %s for re-planning: %w", klog.KObj(frs), err)
	}
	return nil
}

// memberCapacity estimates free room for the template: from the counters
// when the reconciler has them, else from the member's cache.
func (r *Reconciler) memberCapacity(ctx context.Context, m *registry.Member, tmpl *corev1.PodTemplateSpec) (int32, bool) {
	if r.Capacity != nil {
		return r.Capacity.Free(ctx, m.Name, tmpl)
	}
	// Read-only use: skip the cache's deep copies, which dominate the cost of
	// this estimate in a large member.
	nodes := &corev1.NodeList{}
	if err := m.Cluster.GetCache().List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	pods := &corev1.PodList{}
	if err := m.Cluster.GetCache().List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	return capacity.Estimate(nodes.Items, pods.Items, tmpl), true
}

// podsTakingRoom counts the member's non-terminal pods of frs as its cache
// holds them (the cache the capacity counters are fed from), or -1 when it
// cannot tell. They are the pods of the FRS's MemberReplicaSet and the
// orphans its selector matches, read through the engine's controller index:
// a list by selector would match every pod of the namespace for every FRS
// (with 1,000 FRS in one namespace, most of the idle leader's CPU).
func (r *Reconciler) podsTakingRoom(ctx context.Context, m *registry.Member, frs *v1alpha1.FederatedReplicaSet) int32 {
	sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector)
	if err != nil || sel.Empty() {
		return -1
	}
	c := m.Cluster.GetCache()
	owners := []string{engine.OrphanIndexValue}
	mrs := &v1alpha1.MemberReplicaSet{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(frs), mrs); {
	case err == nil:
		owners = append(owners, string(mrs.UID))
	case !apierrors.IsNotFound(err):
		return -1
	}
	var n int32
	for _, owner := range owners {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(frs.Namespace),
			client.MatchingFields{engine.PodControllerIndex: owner}, client.UnsafeDisableDeepCopy); err != nil {
			return -1
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if owner == engine.OrphanIndexValue && !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				n++
			}
		}
	}
	return n
}

// roomBeyondReport turns the member's free room (from the capacity counters,
// every non-terminal pod's room already taken, bound or not) into the room
// beyond the pods the member's report counts, which is what the planner adds
// to that report. The FRS's own pods in the same cache (own, -1 unknown) are
// the base: a report that lags the cache (pods created a moment ago, counted
// by the counters but not yet reported) or runs ahead of it moves the room
// the other way, so the total own + free is the same whichever was seen
// first, and a plan does not flap with the lag.
func roomBeyondReport(free, own, reported int32) int32 {
	if own < 0 {
		return free
	}
	return max(int32(min(int64(free)+int64(own)-int64(reported), math.MaxInt32)), 0)
}

// outcome is what one pass decided, for the status.
type outcome struct {
	// res is the plan (zero when none was made).
	res planner.Result
	// planErr says why the plan is not what the members work towards.
	planErr *aggregate.PlanFailure
	// notes are plan-wide remarks (planNotes).
	notes []string
	// invalid is the Invalid condition; nil removes it.
	invalid *metav1.Condition
}

// writeStatus writes what the members run, against the targets they were
// last given (committed), whether or not the latest plan was committed
// (o.planErr says what failed). Every member that reports pods of frs has a
// row, with a target or not.
func (r *Reconciler) writeStatus(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, committed map[string]int32, o outcome, f facts, now time.Time) (ctrl.Result, error) {
	res := o.res
	in := aggregate.Input{
		Generation:        frs.Generation,
		Desired:           max(ptrOr(frs.Spec.Replicas, 1), 0),
		Shortfall:         res.Shortfall,
		Previous:          frs.Status,
		Now:               now,
		PlanFailure:       o.planErr,
		SpreadUnsatisfied: res.SpreadUnsatisfied(),
	}
	if frs.Spec.Placement.Mode == v1alpha1.PlacementDuplicated {
		// Every selected member runs spec.replicas: the fleet wants the sum
		// of the plan's targets (spec.replicas while no member can run any,
		// so the status does not call nothing ready).
		if total := res.Total(); total > 0 {
			in.Desired = int32(min(total, math.MaxInt32))
		}
	}
	if sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector); err == nil {
		in.Selector = sel.String()
	}
	notes := map[string]string{}
	for _, n := range res.MemberNotes {
		notes[n.Cluster] = n.Message
	}
	rows := maps.Clone(committed)
	if rows == nil {
		rows = map[string]int32{}
	}
	for name, rep := range f.reports {
		if _, ok := rows[name]; !ok && (rep.Replicas > 0 || rep.TerminatingReplicas > 0) {
			rows[name] = 0
		}
	}
	for name, target := range rows {
		m := aggregate.Member{Name: name, Target: target, Message: notes[name]}
		if m.Message == "" {
			m.Message = f.taintErrors[name]
		}
		if r.MemberProblems != nil {
			m.Problem = r.MemberProblems(name)
		}
		if st, ok := r.Health.State(name); ok {
			m.Health = st.Health
		} else if _, engaged := r.Registry.Get(name); !engaged {
			m.Health = v1alpha1.ClusterUnreachable
			m.Message = "member not registered"
		}
		rep, ok := f.reports[name]
		if !ok {
			rep, ok = r.Reports.Get(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
		}
		if ok {
			ar := &aggregate.Report{
				Replicas: rep.Replicas, FullyLabeled: rep.FullyLabeledReplicas, Ready: rep.ReadyReplicas,
				Available: rep.AvailableReplicas, Unschedulable: rep.Unschedulable, Time: rep.ReportedAt,
			}
			t := rep.TerminatingReplicas
			ar.Terminating = &t
			if rep.ReplicaFailure != nil {
				ar.Failure, ar.FailureReason = rep.ReplicaFailure.Message, rep.ReplicaFailure.Reason
			}
			m.Report = ar
		}
		in.Members = append(in.Members, m)
	}
	st := aggregate.Compute(in)
	annotateConditions(&st, o, now)
	key := frs.Namespace + "/" + frs.Name
	if aggregate.Equal(st, frs.Status) {
		r.status.settled(key)
		return ctrl.Result{}, nil
	}
	// A change waiting here is not lost: the requeue computes the status
	// afresh, coalescing whatever changed meanwhile into one write.
	if wait := r.status.wait(key, now, aggregate.Significant(frs.Status, st), r.StatusInterval, r.StatusBudget); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	patch := client.MergeFrom(frs.DeepCopy())
	frs.Status = st
	if err := r.Hub.Status().Patch(ctx, frs, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status of %s: %w", key, err)
	}
	r.status.written(key, now)
	return ctrl.Result{}, nil
}

// annotateConditions adds what the aggregate does not know to the computed
// conditions: Invalid (set or removed), the plan's notes on Planned, and on
// Unschedulable the members' notes saying why replicas do not fit.
func annotateConditions(st *v1alpha1.FederatedReplicaSetStatus, o outcome, now time.Time) {
	if o.invalid != nil {
		c := *o.invalid
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&st.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&st.Conditions, ConditionInvalid)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPlanned); c != nil && c.Status == metav1.ConditionTrue && len(o.notes) > 0 {
		c.Message = c.Message + "; notes: " + boundedJoin(o.notes, "; ", maxConditionMessage)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionUnschedulable); c != nil && o.res.Shortfall > 0 {
		var why []string
		for _, n := range o.res.MemberNotes {
			if n.Message != "" {
				why = append(why, n.Cluster+": "+n.Message)
			}
		}
		if len(why) > 0 {
			c.Message = c.Message + "; " + boundedJoin(why, "; ", maxConditionMessage)
		}
	}
}

func (r *Reconciler) event(frs *v1alpha1.FederatedReplicaSet, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(frs, nil, typ, reason, action, format, args...)
	}
}

// withDefaults fills unset failover fields from the configured defaults.
func withDefaults(f, def v1alpha1.Failover) v1alpha1.Failover {
	if f.UnreachableGracePeriod == nil {
		f.UnreachableGracePeriod = def.UnreachableGracePeriod
	}
	if f.UnschedulableThreshold == nil {
		f.UnschedulableThreshold = def.UnschedulableThreshold
	}
	if f.MoveBack == "" {
		f.MoveBack = def.MoveBack
	}
	return f
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
