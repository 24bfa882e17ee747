package hub

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// warnings emits the warning events of a pass, each only when its state
// changes (a standing warning is not repeated every pass). A spec that
// cannot be interpreted has the Invalid warning alone: nothing else was
// decided.
func (r *Reconciler) warnings(s *scope) {
	current := map[string]bool{}
	emit := func(key, reason, format string, args ...any) {
		current[key] = true
		r.warn(s.frs, key, reason, format, args...)
	}
	if c := s.outcome.invalid; c != nil {
		emit(ConditionInvalid, c.Reason, "%s", c.Message)
		r.warned.keep(s.key, current)
		return
	}
	if s.commitErr != nil {
		// Emitted where it happened; kept standing here.
		current["CommitFailed"] = true
	}
	if s.noCandidates != "" {
		emit(ReasonNoCandidateClusters, ReasonNoCandidateClusters, "%s", s.noCandidates)
	}
	res, f := s.plan, s.facts
	if res.Shortfall > 0 {
		emit("InsufficientCapacity", "InsufficientCapacity", "the fleet lacks room for %d replicas", res.Shortfall)
	}
	if r.MemberProblems != nil {
		for name := range s.targets {
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
	r.warned.keep(s.key, current)
}

// warn emits a warning event unless the same one (by key and text) was the
// last emitted for frs.
func (r *Reconciler) warn(frs *v1alpha1.FederatedReplicaSet, key, reason, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	if r.warned.changed(frs.Namespace+"/"+frs.Name, key, msg) {
		r.event(frs, corev1.EventTypeWarning, reason, "Plan", "%s", msg)
	}
}
