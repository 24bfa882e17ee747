package planner

import (
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// Health is the planner's view of a member cluster's reachability.
type Health uint8

const (
	// HealthUnknown means no probe has completed; the member keeps its
	// previous target and receives no new replicas. It is the zero value so a
	// forgotten field never moves replicas.
	HealthUnknown Health = iota
	// Healthy means the member answers and can run replicas.
	Healthy
	// Unhealthy means the member has been unreachable since Member.UnhealthySince.
	Unhealthy
)

// String returns the health as a word, for notes and test output.
func (h Health) String() string {
	switch h {
	case Healthy:
		return "Healthy"
	case Unhealthy:
		return "Unhealthy"
	default:
		return "Unknown"
	}
}

// Member is one registered member cluster as seen for one FederatedReplicaSet.
type Member struct {
	// Name is the registered cluster name.
	Name string
	// Labels are the cluster's labels, matched by placement.clusterSelector.
	Labels map[string]string
	// Health of the member.
	Health Health
	// UnhealthySince is when the member became unreachable (Health == Unhealthy).
	// A zero time means "just now": the member is held, never failed over.
	UnhealthySince time.Time
	// FreeCapacity is how many more pods of this template fit in the member;
	// nil means unknown, treated as unbounded.
	FreeCapacity *int32
	// Current is the number of active (not terminating) pods of this FRS.
	Current int32
	// Ready is the number of ready pods of this FRS.
	Ready int32
	// Unschedulable is the number of pods the member's scheduler could not place.
	Unschedulable int32
	// UnschedulableSince is when the oldest of those pods became unschedulable.
	UnschedulableSince time.Time
	// Taints are the member's taints from its registration.
	Taints []Taint
}

// Taint is a taint on a member cluster (see v1alpha1.ClusterTaint).
type Taint struct {
	// Key and Value of the taint.
	Key, Value string
	// Effect is NoSchedule or NoExecute; other values are ignored.
	Effect v1alpha1.TaintEffect
	// TimeAdded is when the taint was added; a toleration's tolerationSeconds
	// count from it. A zero time means "just now": the toleration's window
	// has not started, so the member is never evicted by it (as a zero
	// UnhealthySince never fails a member over).
	TimeAdded time.Time
}

// Input is everything Plan needs for one FederatedReplicaSet.
//
// Failover and MoveBudget are the raw API values; Plan applies the API
// defaults (grace 60s, threshold 60s, moveBack Never, maxSurge 25% rounded up,
// maxUnavailable 0 rounded down) so callers never resolve them twice.
type Input struct {
	// UID of the FederatedReplicaSet; seeds the tie-break hash.
	UID string
	// Replicas wanted across the fleet (spec.replicas; negative counts as 0).
	Replicas int32
	// Placement from the spec.
	Placement v1alpha1.Placement
	// Failover from the spec.
	Failover v1alpha1.Failover
	// MoveBudget from the spec.
	MoveBudget v1alpha1.MoveBudget
	// Previous targets by member name, as last committed (nil for a new FRS).
	Previous map[string]int32
	// Now is the planning time, compared with the Since fields.
	Now time.Time
	// Members are the registered member clusters. Passing them sorted by name
	// saves Plan a sort; the result does not depend on their order.
	Members []Member
}

// NewInput fills an Input from a FederatedReplicaSet, applying the API default
// of one replica when spec.replicas is unset.
func NewInput(frs *v1alpha1.FederatedReplicaSet, previous map[string]int32, now time.Time, members []Member) Input {
	replicas := int32(1)
	if frs.Spec.Replicas != nil {
		replicas = *frs.Spec.Replicas
	}
	return Input{
		UID:        string(frs.UID),
		Replicas:   replicas,
		Placement:  frs.Spec.Placement,
		Failover:   frs.Spec.Failover,
		MoveBudget: frs.Spec.MoveBudget,
		Previous:   previous,
		Now:        now,
		Members:    members,
	}
}

// TargetState says how a candidate member took part in the plan.
type TargetState uint8

const (
	// StateActive members take part fully.
	StateActive TargetState = iota
	// StateHeld members are unreachable within the grace period or of unknown
	// health: they keep their previous target (lowered only on scale-down) and
	// get no new replicas.
	StateHeld
	// StateFailedOver members were unreachable longer than the grace period:
	// target 0, their share planned elsewhere.
	StateFailedOver
	// StateCordoned members are reachable but take no new replicas: they have
	// a NoSchedule taint the placement does not tolerate, or a NoExecute
	// taint tolerated only for a while. Their pods stay (within the previous
	// target) until a scale-down removes them.
	StateCordoned
	// StateEvicted members have a NoExecute taint the placement does not
	// tolerate (or no longer tolerates): target 0, their share planned
	// elsewhere, as for StateFailedOver.
	StateEvicted
	// StateExcluded members are outside the groups that the spread
	// constraints chose (or lack the constraint's label): target 0.
	StateExcluded
)

// String returns the state as a word.
func (s TargetState) String() string {
	switch s {
	case StateHeld:
		return "Held"
	case StateFailedOver:
		return "FailedOver"
	case StateCordoned:
		return "Cordoned"
	case StateEvicted:
		return "Evicted"
	case StateExcluded:
		return "Excluded"
	default:
		return "Active"
	}
}

// Target is the plan for one candidate member.
type Target struct {
	// Cluster is the member name.
	Cluster string
	// Replicas is the planned target.
	Replicas int32
	// Previous is Input.Previous[Cluster] (0 when absent).
	Previous int32
	// State is how the member took part.
	State TargetState
	// OverCapacity is how many of Replicas exceed the member's known capacity
	// (they will stay Pending until room appears).
	OverCapacity int32
}

// MemberNote explains something unusual about one member (held, failed over,
// capped by unschedulable pods, over capacity), for status and events.
type MemberNote struct {
	// Cluster is the member name.
	Cluster string
	// Message is a sentence for a status row or an event.
	Message string
}

// Reason says why a member's target changed.
type Reason string

// Reasons of a Change.
const (
	// ReasonScaleUp: the member's share grew (scale-up, spill-over or replacement).
	ReasonScaleUp Reason = "ScaleUp"
	// ReasonScaleDown: the member's share shrank (scale-down order).
	ReasonScaleDown Reason = "ScaleDown"
	// ReasonFailover: the member was unreachable longer than the grace period.
	ReasonFailover Reason = "Failover"
	// ReasonUnschedulable: pods stayed unschedulable past the threshold, so the
	// member is capped at its schedulable pods.
	ReasonUnschedulable Reason = "Unschedulable"
	// ReasonRebalance: moveBack OnRecovery moved replicas towards the weights.
	ReasonRebalance Reason = "Rebalance"
	// ReasonNotSelected: the member is no longer a candidate (placement changed
	// or the cluster was unregistered).
	ReasonNotSelected Reason = "NotSelected"
	// ReasonTaintEviction: the member has a NoExecute taint the placement
	// does not tolerate (any more).
	ReasonTaintEviction Reason = "TaintEviction"
	// ReasonSpreadConstraint: the member is outside the groups the spread
	// constraints chose.
	ReasonSpreadConstraint Reason = "SpreadConstraint"
)

// SpreadOutcome is how one spread constraint was met.
type SpreadOutcome struct {
	// TopologyKey is the constraint's member label key.
	TopologyKey string
	// MinGroups and MaxGroups are the resolved bounds (MaxGroups 0 when
	// unbounded).
	MinGroups, MaxGroups int32
	// Eligible is how many groups had a member able to run replicas.
	Eligible int32
	// Groups are the chosen label values, best first.
	Groups []string
	// Satisfied is false when fewer than MinGroups groups can run replicas
	// (too few eligible groups, or fewer replicas than MinGroups). The
	// replicas are then placed on the groups that are eligible, and Message
	// says why, for the SpreadUnsatisfied condition.
	Satisfied bool
	// Message explains an unsatisfied constraint.
	Message string
}

// Change is one member whose target differs from its previous target.
type Change struct {
	// Cluster is the member name.
	Cluster string
	// From is the previous target.
	From int32
	// To is the new target.
	To int32
	// Reason is why it changed.
	Reason Reason
}

// Result is the plan for one FederatedReplicaSet.
type Result struct {
	// Targets has one entry per candidate member, sorted by name, zero targets
	// included.
	Targets []Target
	// Shortfall is how many replicas do not fit the fleet's known capacity:
	// replicas planned beyond a member's capacity plus Unplaced.
	Shortfall int32
	// Unplaced is how many replicas no member could take at all (every
	// candidate at maxReplicas, failed over, or weight 0).
	Unplaced int32
	// Surge is how far the targets add up above Replicas while a move-back is
	// in progress (never above the resolved maxSurge); 0 in Duplicated mode,
	// where the targets add up to members x Replicas.
	Surge int32
	// MovesPending is how many replicas still have to move back to reach the
	// weighted division (moveBack OnRecovery); 0 when settled.
	MovesPending int32
	// MinimumsExceedReplicas is true when minReplicas add up to more than
	// Replicas, so some minimums could not be met.
	MinimumsExceedReplicas bool
	// Changes lists members whose target changed, sorted by cluster name,
	// including previous members that are no longer candidates.
	Changes []Change
	// Unregistered lists names in placement.clusters that match no member.
	Unregistered []string
	// SelectorError is set when placement.clusterSelector is invalid; the
	// selector then matches nothing.
	SelectorError error
	// MemberNotes explain unusual members, sorted by cluster name; members
	// with nothing to say have no entry.
	MemberNotes []MemberNote
	// Notes are plan-wide remarks for conditions and events (invalid budget
	// values that fell back to defaults, duplicate member names, ...).
	Notes []string
	// Spread has one outcome per placement.spreadConstraints entry, in order.
	Spread []SpreadOutcome
	// RequeueAt is the earliest time at which this plan would change with
	// nothing else changing: an unreachable member's grace period, an
	// unschedulable threshold or a NoExecute toleration running out. Zero
	// when no such deadline is ahead. The plan at RequeueAt already sees it
	// expired.
	RequeueAt time.Time
}

// SpreadUnsatisfied returns the messages of the spread constraints that are
// not met, or nil: the SpreadUnsatisfied condition's text.
func (r Result) SpreadUnsatisfied() []string {
	var out []string
	for _, s := range r.Spread {
		if !s.Satisfied {
			out = append(out, s.Message)
		}
	}
	return out
}

// Target returns the planned target of the named member (0 when it is not a
// candidate).
func (r Result) Target(cluster string) int32 {
	if i, ok := findTarget(r.Targets, cluster); ok {
		return r.Targets[i].Replicas
	}
	return 0
}

// TargetMap returns the targets as a map, one entry per candidate.
func (r Result) TargetMap() map[string]int32 {
	m := make(map[string]int32, len(r.Targets))
	for _, t := range r.Targets {
		m[t.Cluster] = t.Replicas
	}
	return m
}

// Note returns the note about the named member, or "".
func (r Result) Note(cluster string) string {
	for _, n := range r.MemberNotes {
		if n.Cluster == cluster {
			return n.Message
		}
	}
	return ""
}

// Total is the sum of all targets.
func (r Result) Total() int64 {
	var n int64
	for _, t := range r.Targets {
		n += int64(t.Replicas)
	}
	return n
}

func findTarget(ts []Target, name string) (int, bool) {
	lo, hi := 0, len(ts)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if ts[mid].Cluster < name {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo, lo < len(ts) && ts[lo].Cluster == name
}
