package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/fedref"
)

// RolloutStore keeps each rolling FederatedReplicaSet's rollout record
// (raft in production), so a new leader continues the stage.
type RolloutStore interface {
	// Rollout returns the committed record of frs (a non-empty UID must
	// match).
	Rollout(frs fedref.FRS) (*rollout.Record, bool)
	// SetRollout commits a record.
	SetRollout(ctx context.Context, frs fedref.FRS, rec *rollout.Record) error
	// DeleteRollout forgets a FederatedReplicaSet's record.
	DeleteRollout(ctx context.Context, frs fedref.FRS) error
}

// rolloutRequeue is how soon a pass that moved the state machine comes
// back: the new stage's first step is already committed, this reads the
// members' answer to it even when no report arrives.
const rolloutRequeue = 2 * time.Second

// isRolling reports whether frs is driven by the rollout: type Rolling, or
// a record left from an earlier Rolling spec (the members run one
// MemberReplicaSet per revision, so the record keeps serving them).
func isRolling(frs *v1alpha1.FederatedReplicaSet, rec *rollout.Record) bool {
	if rec != nil {
		return true
	}
	u := frs.Spec.UpdateStrategy
	return u != nil && u.Type == v1alpha1.UpdateRolling
}

// rolloutObjects are the MemberReplicaSet names of a record's live
// revisions; nil without a record.
func rolloutObjects(rec *rollout.Record) []string {
	if rec == nil {
		return nil
	}
	out := make([]string, 0, len(rec.Revisions))
	for i := range rec.Revisions {
		out = append(out, rec.Revisions[i].Object)
	}
	return out
}

// sumReports adds up a member's reports of several revision objects into
// one, as the planner and the status read a member.
func sumReports(revs map[string]engine.MemberStatus) (engine.MemberStatus, bool) {
	var sum engine.MemberStatus
	for _, name := range slices.Sorted(maps.Keys(revs)) {
		rep := revs[name]
		if sum.ReportedAt.IsZero() || rep.ReportedAt.Before(sum.ReportedAt) {
			sum.ReportedAt = rep.ReportedAt
		}
		sum.Hub = rep.Hub
		sum.Target += rep.Target
		sum.Replicas += rep.Replicas
		sum.FullyLabeledReplicas += rep.FullyLabeledReplicas
		sum.ReadyReplicas += rep.ReadyReplicas
		sum.AvailableReplicas += rep.AvailableReplicas
		sum.TerminatingReplicas += rep.TerminatingReplicas
		sum.Unschedulable += rep.Unschedulable
		if !rep.UnschedulableSince.IsZero() && (sum.UnschedulableSince.IsZero() || rep.UnschedulableSince.Before(sum.UnschedulableSince)) {
			sum.UnschedulableSince = rep.UnschedulableSince
		}
		if sum.ReplicaFailure == nil {
			sum.ReplicaFailure = rep.ReplicaFailure
		}
	}
	return sum, len(revs) > 0
}

// loadRollout reads frs's record; nil when there is none (or no store).
func (r *Reconciler) loadRollout(frs *v1alpha1.FederatedReplicaSet) *rollout.Record {
	if r.Rollouts == nil {
		return nil
	}
	if rec, ok := r.Rollouts.Rollout(refOf(frs)); ok {
		return rec
	}
	return nil
}

// rolloutStep runs one pass of the rollout after the plan is committed:
// it splits each member's committed target between revisions, advances
// the state machine, commits the record, pokes the members' workers for
// the revisions whose targets changed, deletes the MemberReplicaSets of
// retired revisions, and emits one event per transition.
func (r *Reconciler) rolloutStep(ctx context.Context, s *scope) (bool, error) {
	if r.Rollouts == nil || !isRolling(s.frs, s.rec) || s.commitErr != nil {
		return true, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("frs", klog.KObj(s.frs))
	prev := s.rec
	if prev == nil {
		prev = &rollout.Record{}
	}
	in := r.passInput(s)
	res, err := rollout.Pass(*prev, in)
	if err != nil {
		// The spec passed validation; a stage that does not resolve is a
		// bug, reported on the object rather than retried.
		r.warn(s.frs, "RolloutFailed", "RolloutFailed", "rollout: %v", err)
		return true, nil
	}
	if !sameRecord(prev, &res.Record) {
		// TODO(issue 28, history): record every new revision of
		// res.Record.Revisions as a ControllerRevision here (federation/history),
		// before the record that names it is committed.
		if err := r.Rollouts.SetRollout(ctx, refOf(s.frs), &res.Record); err != nil {
			s.commitErr = fmt.Errorf("committing the rollout of %s: %w", s.key, err)
			r.warn(s.frs, "CommitFailed", "CommitFailed", "committing the rollout failed: %v", err)
			return false, nil
		}
		log.V(1).Info("Rollout committed", "phase", res.Record.State.Phase, "stage", res.Record.State.StageName(res.Stages),
			"update", res.Record.State.UpdateRevision, "stable", res.Record.State.StableRevision)
		r.pokeRevisions(s.frs, prev, &res.Record)
	}
	s.pass = &res
	for _, t := range res.Transitions {
		typ := corev1.EventTypeNormal
		if t.Reason == v1alpha1.ReasonProgressDeadlineExceeded || t.Reason == v1alpha1.ReasonHealthGateFailed || t.Reason == v1alpha1.ReasonAutomaticRollback {
			typ = corev1.EventTypeWarning
		}
		stage := t.Stage
		if stage == "" {
			stage = "-"
		}
		r.event(s.frs, typ, t.Reason, "Rollout", "stage %s: %s -> %s: %s", stage, orNone(string(t.From)), t.To, t.Message)
	}
	if rollout.StartedRollout(res.Transitions) {
		r.clearPromotion(ctx, s.frs)
	}
	r.retireRevisions(ctx, s, res.Retired)
	if len(res.Transitions) > 0 {
		s.requeue.after(rolloutRequeue)
	}
	s.requeue.at(res.Record.State.NextDeadline(res.Policy), s.now)
	return true, nil
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

// passInput is what the rollout's pass is given: the committed targets,
// what each member runs per revision, and the spec's strategy and budget.
func (r *Reconciler) passInput(s *scope) rollout.PassInput {
	// The fleet-wide target: spec.replicas, or the sum of the members'
	// targets for a Duplicated placement.
	replicas := desiredReplicas(s.frs, s.plan)
	surge, unavailable := planner.ResolveBudget(s.frs.Spec.MoveBudget, replicas)
	in := rollout.PassInput{
		Name: s.frs.Name, Template: &s.frs.Spec.Template, Strategy: s.frs.Spec.UpdateStrategy,
		Replicas: replicas, MaxSurge: surge, MaxUnavailable: unavailable,
		// Committed targets before this pass mean members may run the
		// object's pods already: the first revision adopts them.
		Adopt: s.prev != nil, Now: s.now, Promote: s.frs.Annotations[v1alpha1.AnnotationPromote],
		// The pods' readiness and availability are the gate: Step's
		// Settled counts only Available pods (minReadySeconds). Restarts
		// are not in the members' reports yet.
		Health: rollout.HealthPassed,
	}
	names := map[string]bool{}
	for n := range s.committed {
		names[n] = true
	}
	if s.rec != nil {
		for n := range s.rec.Targets {
			names[n] = true
		}
	}
	byName := map[string]*planner.Member{}
	for i := range s.facts.members {
		byName[s.facts.members[i].Name] = &s.facts.members[i]
	}
	for _, n := range slices.Sorted(maps.Keys(names)) {
		pm := rollout.PassMember{Name: n, Target: s.committed[n], Pods: map[string]rollout.Counts{}}
		_, missing := s.facts.missing[n]
		if m, ok := byName[n]; ok {
			pm.Labels, pm.Room = m.Labels, m.FreeCapacity
			pm.Reachable = m.Health == planner.Healthy && !missing && !s.facts.stalled[n]
		}
		if revs, ok := s.facts.revisions[n]; ok {
			for obj, rep := range revs {
				pm.Pods[obj] = rollout.Counts{Replicas: rep.Replicas, Ready: rep.ReadyReplicas, Available: rep.AvailableReplicas, Terminating: rep.TerminatingReplicas}
			}
		} else if rep, ok := s.facts.reports[n]; ok && s.rec == nil {
			// No record yet: what runs is the object's own MemberReplicaSet.
			pm.Pods[s.frs.Name] = rollout.Counts{Replicas: rep.Replicas, Ready: rep.ReadyReplicas, Available: rep.AvailableReplicas, Terminating: rep.TerminatingReplicas}
		}
		in.Members = append(in.Members, pm)
	}
	return in
}

// sameRecord reports whether two records encode alike.
func sameRecord(a, b *rollout.Record) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && string(ja) == string(jb)
}

// pokeRevisions asks the workers to sync each revision object whose
// target changed in a member (a new one included).
func (r *Reconciler) pokeRevisions(frs *v1alpha1.FederatedReplicaSet, prev, next *rollout.Record) {
	for member := range next.Targets {
		for i := range next.Revisions {
			l := &next.Revisions[i]
			old := prev.Revision(l.Name)
			if old != nil && prev.HasMember(member) && prev.Target(member, l.Name) == next.Target(member, l.Name) {
				continue
			}
			r.Poker.Enqueue(fedref.MemberObject{Cluster: member, Namespace: frs.Namespace, Name: l.Object})
		}
	}
}

// retireRevisions deletes, in every engaged member, the MemberReplicaSets
// of revisions that left the record: their targets and pods are 0 there.
// A member that cannot be reached keeps its empty object; the deletion of
// the FederatedReplicaSet removes it.
func (r *Reconciler) retireRevisions(ctx context.Context, s *scope, retired []rollout.LiveRevision) {
	for _, l := range retired {
		for _, m := range r.Registry.Members() {
			key := fedref.MemberObject{Cluster: m.Name, Namespace: s.frs.Namespace, Name: l.Object}
			mrs := &v1alpha1.MemberReplicaSet{}
			cctx, cancel := context.WithTimeout(ctx, r.memberTimeout())
			err := m.Cluster.GetCache().Get(cctx, types.NamespacedName{Namespace: s.frs.Namespace, Name: l.Object}, mrs)
			if err == nil && mrs.Spec.Hub.UID == s.frs.UID && mrs.DeletionTimestamp == nil {
				err = m.Cluster.GetClient().Delete(cctx, mrs, client.Preconditions{UID: &mrs.UID})
				if err == nil {
					r.event(s.frs, corev1.EventTypeNormal, "RevisionRetired", "Rollout", "cluster %s: deleted MemberReplicaSet %s of revision %d", m.Name, l.Object, l.Number)
				}
			}
			cancel()
			if err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				ctrl.LoggerFrom(ctx).Error(err, "Deleting a retired revision's MemberReplicaSet", "frs", klog.KObj(s.frs), "cluster", m.Name, "object", l.Object)
			}
			if r.Expectations != nil {
				r.Expectations.Delete(key)
			}
		}
	}
}

// clearPromotion removes a promote annotation left from an earlier
// rollout once a new one starts, so it cannot promote a stage of the same
// name later. A failure is only logged: Pass ignores the value in the pass
// that starts the rollout, and the next new rollout tries again.
func (r *Reconciler) clearPromotion(ctx context.Context, frs *v1alpha1.FederatedReplicaSet) {
	if _, ok := frs.Annotations[v1alpha1.AnnotationPromote]; !ok {
		return
	}
	patch := client.MergeFrom(frs.DeepCopy())
	delete(frs.Annotations, v1alpha1.AnnotationPromote)
	if err := r.Hub.Patch(ctx, frs, patch); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Clearing a stale promote annotation", "frs", klog.KObj(frs))
	}
}

// rolloutStatus writes the rollout's part of the status: revisions, the
// per-member split, the phase and stage, and its conditions.
func rolloutStatus(st *v1alpha1.FederatedReplicaSetStatus, s *scope) {
	if s.pass == nil {
		// No rollout pass this time (a spec held, a failed commit): keep
		// what the last one wrote rather than blank it.
		prev := &s.frs.Status
		st.CurrentRevision, st.UpdateRevision, st.Revision, st.CollisionCount = prev.CurrentRevision, prev.UpdateRevision, prev.Revision, prev.CollisionCount
		st.UpdatedReplicas, st.Revisions, st.Rollout = prev.UpdatedReplicas, prev.Revisions, prev.Rollout
		return
	}
	rec, state := &s.pass.Record, &s.pass.Record.State
	st.CurrentRevision, st.UpdateRevision = state.StableRevision, state.UpdateRevision
	st.CollisionCount = &rec.CollisionCount
	if l := rec.Revision(state.UpdateRevision); l != nil {
		st.Revision = l.Number
	}
	st.UpdatedReplicas, st.Revisions = 0, nil
	for i := range rec.Revisions {
		l := &rec.Revisions[i]
		rs := v1alpha1.RevisionStatus{Name: l.Name, Revision: l.Number}
		for j := range st.Clusters {
			c := &st.Clusters[j]
			rep := s.facts.revisions[c.Name][l.Object]
			crs := v1alpha1.ClusterRevisionStatus{Name: l.Name, Target: rec.Target(c.Name, l.Name), Replicas: rep.Replicas, AvailableReplicas: rep.AvailableReplicas}
			if crs.Target == 0 && crs.Replicas == 0 {
				continue
			}
			c.Revisions = append(c.Revisions, crs)
			rs.Target += crs.Target
			rs.Replicas += rep.Replicas
			rs.ReadyReplicas += rep.ReadyReplicas
			rs.AvailableReplicas += rep.AvailableReplicas
		}
		if l.Name == state.UpdateRevision {
			st.UpdatedReplicas = rs.Replicas
		}
		st.Revisions = append(st.Revisions, rs)
	}
	ro := &v1alpha1.RolloutStatus{Phase: state.Phase, StageIndex: int32(min(state.Stage, len(s.pass.Stages))),
		StageName: state.StageName(s.pass.Stages), FailedRevision: state.FailedRevision, Message: state.Message,
		StageStartTime: timeOrNil(state.StageStart), BakeStartTime: timeOrNil(state.BakeStart), LastProgressTime: timeOrNil(state.LastProgress)}
	st.Rollout = ro
	for _, c := range state.Conditions(s.frs.Generation, s.now) {
		meta.SetStatusCondition(&st.Conditions, c)
	}
}

func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

// rolloutChanged reports whether the rollout's phase, stage or revisions
// changed: a status a user waits on, written without pacing.
func rolloutChanged(prev, next *v1alpha1.FederatedReplicaSetStatus) bool {
	if (prev.Rollout == nil) != (next.Rollout == nil) || prev.UpdateRevision != next.UpdateRevision || prev.CurrentRevision != next.CurrentRevision {
		return true
	}
	return next.Rollout != nil && (prev.Rollout.Phase != next.Rollout.Phase || prev.Rollout.StageIndex != next.Rollout.StageIndex)
}

// deleteRevisionObjects deletes, while frs is deleted, its MemberReplicaSets
// in m other than the one named after it (that one goes through the usual
// protocol): those of a rollout's revisions, found by LabelFederatedName
// and checked by the hub UID. It returns how many still exist.
func (r *Reconciler) deleteRevisionObjects(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, c client.Client, rd client.Reader, policy metav1.DeletionPropagation) (int, error) {
	list := &v1alpha1.MemberReplicaSetList{}
	if err := rd.List(ctx, list, client.InNamespace(frs.Namespace), client.MatchingLabels{v1alpha1.LabelFederatedName: frs.Name}); err != nil {
		if meta.IsNoMatchError(err) {
			return 0, nil
		}
		return 0, fmt.Errorf("listing revision MemberReplicaSets: %w", err)
	}
	left := 0
	for i := range list.Items {
		mrs := &list.Items[i]
		if mrs.Name == frs.Name || mrs.Spec.Hub.UID != frs.UID {
			continue
		}
		left++
		if mrs.DeletionTimestamp != nil {
			continue
		}
		if err := c.Delete(ctx, mrs, client.PropagationPolicy(policy), client.Preconditions{UID: &mrs.UID}); err != nil && !apierrors.IsNotFound(err) {
			return left, fmt.Errorf("deleting MemberReplicaSet %s: %w", klog.KObj(mrs), err)
		}
	}
	return left, nil
}
