package hub

import (
	"context"
	"fmt"
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
)

// planTargets asks the planner for per-member targets from the spec, the
// committed targets and the facts, and comes back when the plan would
// change by itself. A valid placement that selects no member holds the
// committed targets instead (holdWithoutCandidates).
func (r *Reconciler) planTargets(ctx context.Context, s *scope) (bool, error) {
	in := planner.NewInput(s.frs, s.prev, s.now, s.facts.members)
	in.Failover = withDefaults(in.Failover, r.Defaults)
	_, s.repairing = s.frs.Annotations[AnnotationReplan]
	if s.repairing && len(s.facts.missing) == 0 {
		// The repair moves replicas back within the move budget, whatever
		// the object's own moveBack policy (AnnotationReplan).
		in.Failover.MoveBack = v1alpha1.MoveBackOnRecovery
	}
	s.input, s.plan = in, planner.Plan(in)
	if len(s.plan.Targets) == 0 && in.Replicas > 0 {
		return r.holdWithoutCandidates(ctx, s)
	}
	s.targets = r.withDeparted(s, s.plan.TargetMap())
	s.changed = !maps.Equal(s.prev, s.targets) || s.prevGen != s.frs.Generation
	s.committed = s.prev
	s.outcome = &outcome{res: s.plan, notes: planNotes(s.plan)}
	metrics.Shortfall.WithLabelValues(s.frs.Namespace, s.frs.Name).Set(float64(s.plan.Shortfall))
	// Nothing else happens when a grace period, threshold or toleration
	// runs out, so come back then and plan again.
	s.requeue.at(s.plan.RequeueAt, s.now)
	return true, nil
}

// holdWithoutCandidates ends a pass whose valid placement selects no
// member: nothing can run anywhere, and deleting what runs helps no one. The
// members keep their last committed targets until a member is selected (or
// replicas is set to 0); see ReasonNoCandidateClusters.
func (r *Reconciler) holdWithoutCandidates(ctx context.Context, s *scope) (bool, error) {
	ctrl.LoggerFrom(ctx).V(1).Info("Placement selects no member; targets kept", "frs", klog.KObj(s.frs), "targets", s.prev)
	s.outcome = &outcome{planErr: &aggregate.PlanFailure{Reason: ReasonNoCandidateClusters, Message: noCandidatesMessage}}
	s.noCandidates = noCandidatesMessage
	// Nothing can be placed, which is not a lack of room.
	s.plan.Shortfall, s.plan.Unplaced = 0, 0
	s.targets = s.prev
	return r.holdTargets(ctx, s)
}

// holdTargets ends a pass that plans nothing: the members keep their last
// committed targets (a worker that lags behind them is asked to sync), and
// the status still shows what they run.
func (r *Reconciler) holdTargets(_ context.Context, s *scope) (bool, error) {
	s.committed = s.prev
	r.pokeLagging(s.frs, s.prev, s.facts)
	return false, nil
}

// markForRepair marks the object (AnnotationReplan) when its changed plan
// was made without some members' facts and those facts would likely have
// changed it, so that later passes repair the spread once they arrive. A
// mark that cannot be written stops the commit; the status says why.
func (r *Reconciler) markForRepair(ctx context.Context, s *scope) (bool, error) {
	if !s.changed || len(s.facts.missing) == 0 || s.repairing {
		return true, nil
	}
	opt := s.input
	opt.Members = optimistic(s.facts, s.prev)
	if maps.Equal(r.withDeparted(s, planner.Plan(opt).TargetMap()), s.targets) {
		return true, nil
	}
	if err := r.setReplan(ctx, s.frs, replanValue(s.facts.missing)); err != nil {
		s.commitErr = err
		s.outcome.planErr = &aggregate.PlanFailure{Reason: "MarkFailed", Message: err.Error()}
		return false, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Planned without some members' facts; marked for repair", "frs", klog.KObj(s.frs), "missing", s.facts.missingText())
	return true, nil
}

// commitTargets commits changed targets through raft and pokes every
// targeted member's worker; targets that did not change only poke the
// workers that lag behind them. A commit that fails is reported in the
// status and returned after it.
func (r *Reconciler) commitTargets(ctx context.Context, s *scope) (bool, error) {
	if !s.changed {
		s.committed = s.targets
		metrics.Plans.WithLabelValues("unchanged").Inc()
		r.pokeLagging(s.frs, s.targets, s.facts)
		return true, nil
	}
	if err := r.Targets.SetTargets(ctx, refOf(s.frs), s.frs.Generation, s.targets); err != nil {
		metrics.Plans.WithLabelValues("error").Inc()
		s.commitErr = fmt.Errorf("committing targets of %s: %w", s.key, err)
		s.outcome.planErr = &aggregate.PlanFailure{Reason: "CommitFailed",
			Message: fmt.Sprintf("committing the plan for generation %d failed: %v", s.frs.Generation, err)}
		r.warn(s.frs, "CommitFailed", "CommitFailed", "committing targets failed: %v", err)
		return false, nil
	}
	s.committed = s.targets
	metrics.Plans.WithLabelValues("committed").Inc()
	ctrl.LoggerFrom(ctx).V(1).Info("Targets committed", "frs", klog.KObj(s.frs), "targets", s.targets, "shortfall", s.plan.Shortfall)
	r.planEvents(s.frs, s.plan.Changes)
	for name := range s.targets {
		r.Poker.Enqueue(fedref.MemberObject{Cluster: name, Namespace: s.frs.Namespace, Name: s.frs.Name})
	}
	return true, nil
}

// clearRepairMark removes AnnotationReplan once the repair is done: every
// fact is in and the committed plan has no move pending.
func (r *Reconciler) clearRepairMark(ctx context.Context, s *scope) (bool, error) {
	if !s.repairing || len(s.facts.missing) > 0 || s.plan.MovesPending > 0 {
		return true, nil
	}
	if err := r.setReplan(ctx, s.frs, ""); err != nil {
		return false, err
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Spread repaired", "frs", klog.KObj(s.frs), "targets", s.committed)
	return true, nil
}

// withDeparted adds to a plan the members that held a target and are no
// longer candidates: they keep an explicit 0 until they have reported no
// pods, so their workers scale them down (also a member that is away now: it
// is reconciled to 0 when it returns).
func (r *Reconciler) withDeparted(s *scope, targets map[string]int32) map[string]int32 {
	for name := range s.prev {
		if _, ok := targets[name]; ok {
			continue
		}
		rep, ok := r.memberStatus(s, name)
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
