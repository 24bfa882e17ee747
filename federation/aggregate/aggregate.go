// Package aggregate sums what member workers report into a
// FederatedReplicaSet's status: the ReplicaSet counts over all members, one
// row per member, and the conditions. It is pure; the hub reconciler decides
// when to write the result. Everything it writes fits the status schema
// whatever the members send (see MaxMessage and the other bounds): sums are
// made in int64 and saturate, members' text is cut with TruncatedMarker.
package aggregate

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Report is what one member's worker last said about one FederatedReplicaSet.
type Report struct {
	Replicas, FullyLabeled, Ready, Available int32
	Terminating                              *int32
	Unschedulable                            int32
	// Failure is the member's ReplicaFailure message, empty when none.
	Failure string
	// FailureReason is FailedCreate or FailedDelete.
	FailureReason string
	// Time is when the report was made.
	Time time.Time
}

// Member is one member's part in the status.
type Member struct {
	Name   string
	Target int32
	Health v1alpha1.ClusterHealth
	// Report is nil when the member has not reported yet.
	Report *Report
	// Message explains the member's target, for example a planner reason.
	Message string
	// Problem says why replicafed cannot work in the member at all (for
	// example, the MemberReplicaSet CRD could not be installed); empty when none.
	Problem string
}

// Input is everything Compute needs.
type Input struct {
	Generation int64
	Desired    int32
	Selector   string
	Members    []Member
	// Shortfall is how many replicas the planner could not place.
	Shortfall int32
	// Previous is the current status, whose condition transition times are kept.
	Previous v1alpha1.FederatedReplicaSetStatus
	Now      time.Time
	// PlanFailure says why the latest plan is not what the members work
	// towards (it could not be made or committed); nil when it is. The member
	// rows then show the targets last committed.
	PlanFailure *PlanFailure
	// SpreadUnsatisfied are the messages of the spread constraints that are
	// not met (planner.Result.SpreadUnsatisfied).
	SpreadUnsatisfied []string
}

// spreadMembers and spreadChars bound status.spread (shown by kubectl get).
const (
	spreadMembers = 5
	spreadChars   = 200
)

// spreadText lists the members with a non-zero target as name=target in
// the order given, the first few only, then how many more.
func spreadText(members []Member) string {
	var b strings.Builder
	shown, total := 0, 0
	for _, m := range members {
		if m.Target <= 0 {
			continue
		}
		total++
		part := fmt.Sprintf("%s=%d", m.Name, m.Target)
		if shown == spreadMembers || b.Len()+len(part)+1 > spreadChars {
			continue
		}
		if shown > 0 {
			b.WriteByte(',')
		}
		b.WriteString(part)
		shown++
	}
	if rest := total - shown; rest > 0 {
		if shown > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "+%d more", rest)
	}
	return b.String()
}

// PlanFailure is a plan that was not made or not committed.
type PlanFailure struct {
	// Reason is a CamelCase reason for the Planned condition.
	Reason string
	// Message says what failed.
	Message string
}

// Compute returns the new status.
func Compute(in Input) v1alpha1.FederatedReplicaSetStatus {
	st := v1alpha1.FederatedReplicaSetStatus{
		ObservedGeneration: in.Generation,
		Selector:           in.Selector,
		Conditions:         append([]metav1.Condition(nil), in.Previous.Conditions...),
	}
	members := append([]Member(nil), in.Members...)
	sort.Slice(members, func(i, j int) bool { return members[i].Name < members[j].Name })
	st.Spread = spreadText(members)

	var t tally
	for _, m := range members {
		st.Clusters = append(st.Clusters, t.add(m))
	}
	st.Clusters = boundRows(st.Clusters)
	t.setCounts(&st)

	set := conditionSetter(&st, in)
	setProgressConditions(set, &st, in, &t)
	setProblemConditions(set, &st, in, &t)
	return st
}

// tally accumulates what Compute learns from the members, in name order.
// Sums over members are made in int64: int32 counts of many members can
// overflow, and a wrapped sum would read as a negative count.
type tally struct {
	unreachable, failed, unschedulable, progressing []string

	replicas, fullyLabeled, ready, available, unschedulableSum, terminating, clusterCount int64
	anyTerminating                                                                        bool
}

// add counts one member and returns its status row.
func (t *tally) add(m Member) v1alpha1.ClusterStatus {
	row := v1alpha1.ClusterStatus{Name: m.Name, Target: m.Target, Health: m.Health, Message: Truncate(m.Message, MaxMessage)}
	if row.Health == "" {
		row.Health = v1alpha1.ClusterHealthUnknown
	}
	if m.Target > 0 {
		t.clusterCount++
	}
	if m.Health == v1alpha1.ClusterUnreachable {
		t.unreachable = append(t.unreachable, m.Name)
	}
	if m.Problem != "" {
		t.failed = append(t.failed, m.Name+": "+Truncate(m.Problem, MaxMessage))
		if row.Message == "" {
			row.Message = Truncate(m.Problem, MaxMessage)
		}
	}
	if r := m.Report; r != nil {
		t.addReport(m, r, &row)
	} else if m.Target > 0 {
		t.progressing = append(t.progressing, m.Name)
	}
	return row
}

// addReport counts a member's report and copies its counts into the row.
func (t *tally) addReport(m Member, r *Report, row *v1alpha1.ClusterStatus) {
	row.Replicas, row.ReadyReplicas, row.AvailableReplicas = r.Replicas, r.Ready, r.Available
	row.UnschedulableReplicas = r.Unschedulable
	t.unschedulableSum += int64(r.Unschedulable)
	rt := metav1.NewTime(r.Time)
	row.LastReportTime = &rt
	t.replicas += int64(r.Replicas)
	t.fullyLabeled += int64(r.FullyLabeled)
	t.ready += int64(r.Ready)
	t.available += int64(r.Available)
	if r.Terminating != nil {
		t.anyTerminating = true
		t.terminating += int64(*r.Terminating)
	}
	if r.Failure != "" {
		t.failed = append(t.failed, m.Name+": "+Truncate(r.Failure, MaxMessage))
	}
	if r.Unschedulable > 0 {
		t.unschedulable = append(t.unschedulable, fmt.Sprintf("%s: %d pods", m.Name, r.Unschedulable))
	}
	if r.Replicas != m.Target || r.Available < m.Target {
		t.progressing = append(t.progressing, m.Name)
	}
}

// setCounts writes the summed counts, saturated to the int32 fields.
func (t *tally) setCounts(st *v1alpha1.FederatedReplicaSetStatus) {
	st.Replicas, st.FullyLabeledReplicas = clamp32(t.replicas), clamp32(t.fullyLabeled)
	st.ReadyReplicas, st.AvailableReplicas = clamp32(t.ready), clamp32(t.available)
	st.UnschedulableReplicas, st.ClusterCount = clamp32(t.unschedulableSum), clamp32(t.clusterCount)
	if t.anyTerminating {
		term := clamp32(t.terminating)
		st.TerminatingReplicas = &term
	}
}

// setCondition sets one condition on the status being computed.
type setCondition func(typ string, ok bool, reason, msg string)

// conditionSetter returns a setCondition that stamps the input's generation
// and time; meta.SetStatusCondition keeps the transition time when the
// status does not change.
func conditionSetter(st *v1alpha1.FederatedReplicaSetStatus, in Input) setCondition {
	return func(typ string, ok bool, reason, msg string) {
		status := metav1.ConditionFalse
		if ok {
			status = metav1.ConditionTrue
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: Truncate(msg, MaxConditionMessage),
			ObservedGeneration: in.Generation, LastTransitionTime: metav1.NewTime(in.Now),
		})
	}
}

// setProgressConditions sets Ready, Planned and Progressing, which are
// always present.
func setProgressConditions(set setCondition, st *v1alpha1.FederatedReplicaSetStatus, in Input, t *tally) {
	if t.available >= int64(in.Desired) && t.replicas == int64(in.Desired) && len(t.progressing) == 0 {
		set(v1alpha1.ConditionReady, true, "ReplicasAvailable", fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, in.Desired))
	} else {
		set(v1alpha1.ConditionReady, false, "ReplicasNotAvailable", fmt.Sprintf("%d of %d replicas available", st.AvailableReplicas, in.Desired))
	}
	if in.PlanFailure != nil {
		set(v1alpha1.ConditionPlanned, false, in.PlanFailure.Reason, Truncate(in.PlanFailure.Message, MaxMessage))
	} else {
		set(v1alpha1.ConditionPlanned, true, "TargetsCommitted", "member targets are committed for this generation")
	}
	switch {
	case in.PlanFailure != nil:
		// The members work towards older targets: "at its target" would
		// say nothing about the spec.
		set(v1alpha1.ConditionProgressing, false, "PlanNotCommitted", "members keep their last committed targets: "+Truncate(in.PlanFailure.Message, MaxMessage))
	case len(t.progressing) > 0:
		set(v1alpha1.ConditionProgressing, true, "MembersConverging", joinBounded("converging: ", t.progressing, ", ", MaxConditionMessage))
	default:
		set(v1alpha1.ConditionProgressing, false, "MembersAtTarget", "every member is at its target")
	}
}

// setProblemConditions sets ReplicaFailure, ClusterUnavailable,
// Unschedulable and SpreadUnsatisfied while they hold and removes them when
// they do not, so a listed condition always means a problem.
func setProblemConditions(set setCondition, st *v1alpha1.FederatedReplicaSetStatus, in Input, t *tally) {
	if len(t.failed) > 0 {
		set(v1alpha1.ConditionReplicaFailure, true, "MemberReplicaFailure", joinBounded("", t.failed, "; ", MaxConditionMessage))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionReplicaFailure)
	}
	if len(t.unreachable) > 0 {
		set(v1alpha1.ConditionClusterUnavailable, true, "MemberUnreachable", joinBounded("unreachable: ", t.unreachable, ", ", MaxConditionMessage))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionClusterUnavailable)
	}
	switch {
	case in.Shortfall > 0:
		set(v1alpha1.ConditionUnschedulable, true, "InsufficientCapacity",
			fmt.Sprintf("the fleet lacks room for %d replicas", in.Shortfall))
	case len(t.unschedulable) > 0:
		set(v1alpha1.ConditionUnschedulable, true, "PodsUnschedulable", joinBounded("", t.unschedulable, "; ", MaxConditionMessage))
	default:
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionUnschedulable)
	}
	if len(in.SpreadUnsatisfied) > 0 {
		spread := make([]string, len(in.SpreadUnsatisfied))
		for i, s := range in.SpreadUnsatisfied {
			spread[i] = Truncate(s, MaxMessage)
		}
		set(v1alpha1.ConditionSpreadUnsatisfied, true, "SpreadUnsatisfied", joinBounded("", spread, "; ", MaxConditionMessage))
	} else {
		meta.RemoveStatusCondition(&st.Conditions, v1alpha1.ConditionSpreadUnsatisfied)
	}
}

// Equal reports whether two statuses differ only in report times, so callers
// can skip writes that would change nothing an operator reads.
func Equal(a, b v1alpha1.FederatedReplicaSetStatus) bool {
	strip := func(s v1alpha1.FederatedReplicaSetStatus) v1alpha1.FederatedReplicaSetStatus {
		s = *s.DeepCopy()
		for i := range s.Clusters {
			s.Clusters[i].LastReportTime = nil
		}
		for i := range s.Conditions {
			s.Conditions[i].LastTransitionTime = metav1.Time{}
		}
		return s
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// Converged reports whether next is the status that ends a change: Ready
// turns True with it (or stays True for a newly observed generation). That
// is what `kubectl wait` and rollout tooling wait for, so it is written
// without the pause between status writes; it happens once per change.
func Converged(prev, next v1alpha1.FederatedReplicaSetStatus) bool {
	c := meta.FindStatusCondition(next.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue {
		return false
	}
	old := meta.FindStatusCondition(prev.Conditions, v1alpha1.ConditionReady)
	return old == nil || old.Status != metav1.ConditionTrue || prev.ObservedGeneration != next.ObservedGeneration
}

// FirstProgress reports whether next is the first status of a new object
// that is only making progress: no generation observed before, and no
// condition but Ready, Planned=True and Progressing=True. Its pods are
// being made, so a status that shows them follows within seconds; holding
// this one like a count-only change spares a small object's first write
// when it settles within the hold, and a problem (any other condition, a
// failed plan) is never held.
func FirstProgress(prev, next v1alpha1.FederatedReplicaSetStatus) bool {
	if prev.ObservedGeneration != 0 {
		return false
	}
	for _, c := range next.Conditions {
		switch {
		case c.Type == v1alpha1.ConditionReady:
		case c.Type == v1alpha1.ConditionPlanned && c.Status == metav1.ConditionTrue:
		case c.Type == v1alpha1.ConditionProgressing && c.Status == metav1.ConditionTrue:
		default:
			return false
		}
	}
	return true
}

// Settled reports whether every member of st runs exactly its target, all
// ready and available, and nothing terminates: counts that will not move
// again without a new change, such as the end of a scale-down or of a
// recovery while Ready stayed True. Like a Converged status it ends a
// change, so it is not held back.
func Settled(st *v1alpha1.FederatedReplicaSetStatus) bool {
	if st.TerminatingReplicas != nil && *st.TerminatingReplicas > 0 {
		return false
	}
	for _, c := range st.Clusters {
		if c.Replicas != c.Target || c.ReadyReplicas != c.Target || c.AvailableReplicas != c.Target {
			return false
		}
	}
	return true
}

// Significant reports whether next differs from prev in something a user
// or tool waits on: the observed generation, the selector, a condition
// appearing, going or changing status or reason, or a member's target or
// health (the plan). Counts alone, and the condition messages that repeat
// them, are not significant: under load their writes can be spaced out.
func Significant(prev, next v1alpha1.FederatedReplicaSetStatus) bool {
	if prev.ObservedGeneration != next.ObservedGeneration || prev.Selector != next.Selector ||
		len(prev.Conditions) != len(next.Conditions) || len(prev.Clusters) != len(next.Clusters) {
		return true
	}
	for _, c := range next.Conditions {
		old := meta.FindStatusCondition(prev.Conditions, c.Type)
		if old == nil || old.Status != c.Status || old.Reason != c.Reason {
			return true
		}
	}
	for i := range next.Clusters {
		a, b := &prev.Clusters[i], &next.Clusters[i]
		if a.Name != b.Name || a.Target != b.Target || a.Health != b.Health {
			return true
		}
	}
	return false
}
