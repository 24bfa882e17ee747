package hub

import (
	"context"
	"fmt"
	"maps"
	"math"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/internal/fedref"
)

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

// countHold is how long a count-only status change waits for more
// (statusPacer): about the time a small FederatedReplicaSet's pods take to
// be created and turn Ready in one member, like the member engine's
// engine.GenerationHold.
const countHold = 5 * time.Second

// writeStatus writes the status s built, the one status write of a pass:
// what the members run, against the targets they were last given
// (s.committed), whether or not the latest plan was committed (the
// outcome's planErr says what failed). It returns how long to wait when
// the write is paced for later.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) (time.Duration, error) {
	st := aggregate.Compute(r.statusInput(s))
	annotateConditions(&st, *s.outcome, s.now)
	if isRolling(s.frs, s.rec) || s.pass != nil {
		rolloutStatus(&st, s)
	}
	if aggregate.Equal(st, s.frs.Status) {
		r.status.settled(s.key)
		return 0, nil
	}
	// A change waiting here is not lost: the requeue computes the status
	// afresh, coalescing whatever changed meanwhile into one write. The
	// status that ends a change is not held back (aggregate.Converged).
	interval, hold := r.StatusInterval, countHold
	if aggregate.Converged(s.frs.Status, st) {
		interval, hold = 0, 0
	}
	if aggregate.Settled(&st) {
		// The end of a scale-down or a recovery (Ready stays True): no
		// more counts to wait for.
		hold = 0
	}
	significant := aggregate.Significant(s.frs.Status, st) || rolloutChanged(&s.frs.Status, &st)
	if significant && aggregate.FirstProgress(s.frs.Status, st) {
		// A new object's first status is held like counts (unless it is
		// already Converged or Settled): a small one often settles within
		// the hold and then costs the hub one status write, not two.
		significant = false
	}
	if wait := r.status.wait(s.key, s.now, significant, interval, hold, r.StatusBudget); wait > 0 {
		return wait, nil
	}
	patch := client.MergeFrom(s.frs.DeepCopy())
	s.frs.Status = st
	if err := r.Hub.Status().Patch(ctx, s.frs, patch); err != nil {
		return 0, fmt.Errorf("writing status of %s: %w", s.key, err)
	}
	r.status.written(s.key, s.now)
	return 0, nil
}

// statusInput is what the status is computed from: the spec, the outcome
// of the pass and a row per member (statusRows).
func (r *Reconciler) statusInput(s *scope) aggregate.Input {
	frs, res := s.frs, s.outcome.res
	in := aggregate.Input{
		Generation:        frs.Generation,
		Desired:           desiredReplicas(frs, res),
		Shortfall:         res.Shortfall,
		Previous:          frs.Status,
		Now:               s.now,
		PlanFailure:       s.outcome.planErr,
		SpreadUnsatisfied: res.SpreadUnsatisfied(),
	}
	if sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector); err == nil {
		in.Selector = sel.String()
	}
	notes := map[string]string{}
	for _, n := range res.MemberNotes {
		notes[n.Cluster] = n.Message
	}
	for name, target := range statusRows(s.committed, s.facts.reports) {
		in.Members = append(in.Members, r.memberRow(s, name, target, notes[name]))
	}
	return in
}

// desiredReplicas is how many replicas the fleet wants of frs given its
// plan res.
func desiredReplicas(frs *v1alpha1.FederatedReplicaSet, res planner.Result) int32 {
	desired := max(ptrOr(frs.Spec.Replicas, 1), 0)
	if frs.Spec.Placement.Mode == v1alpha1.PlacementDuplicated {
		// Every selected member runs spec.replicas: the fleet wants the sum
		// of the plan's targets (spec.replicas while no member can run any,
		// so the status does not call nothing ready).
		if total := res.Total(); total > 0 {
			desired = int32(min(total, math.MaxInt32))
		}
	}
	return desired
}

// statusRows are the members the status has a row for, with their
// targets: every committed target, and a target of 0 for each member that
// reports pods (running or terminating) without one.
func statusRows(committed map[string]int32, reports map[string]engine.MemberStatus) map[string]int32 {
	rows := maps.Clone(committed)
	if rows == nil {
		rows = map[string]int32{}
	}
	for name, rep := range reports {
		if _, ok := rows[name]; !ok && (rep.Replicas > 0 || rep.TerminatingReplicas > 0) {
			rows[name] = 0
		}
	}
	return rows
}

// memberRow is member name's row of the status: its target, health, report
// and why it does not run what it should (note, else its taints' error).
func (r *Reconciler) memberRow(s *scope, name string, target int32, note string) aggregate.Member {
	m := aggregate.Member{Name: name, Target: target, Message: note}
	if m.Message == "" {
		m.Message = s.facts.taintErrors[name]
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
	if rep, ok := r.memberStatus(s, name); ok {
		m.Report = aggregateReport(rep)
	}
	return m
}

// memberStatus is member name's latest report for the object of s: the one
// read this pass, else the last one its worker made.
func (r *Reconciler) memberStatus(s *scope, name string) (engine.MemberStatus, bool) {
	if rep, ok := s.facts.reports[name]; ok {
		return rep, true
	}
	return r.Reports.Get(fedref.MemberObject{Cluster: name, Namespace: s.frs.Namespace, Name: s.frs.Name})
}

// aggregateReport is a member's report as the aggregate reads it.
func aggregateReport(rep engine.MemberStatus) *aggregate.Report {
	ar := &aggregate.Report{
		Replicas: rep.Replicas, FullyLabeled: rep.FullyLabeledReplicas, Ready: rep.ReadyReplicas,
		Available: rep.AvailableReplicas, Unschedulable: rep.Unschedulable, Time: rep.ReportedAt,
	}
	t := rep.TerminatingReplicas
	ar.Terminating = &t
	if rep.ReplicaFailure != nil {
		ar.Failure, ar.FailureReason = rep.ReplicaFailure.Message, rep.ReplicaFailure.Reason
	}
	return ar
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

// ptrOr is *p, or def when p is nil.
func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}
