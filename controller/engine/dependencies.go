package engine

import (
	"context"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/replicastatus"
)

// The MemberReplicaSet condition and event of a member that holds pod
// creation back until the template's dependencies exist there.
const (
	// ConditionWaitingForDependencies is True while pods are not created
	// because a dependency is missing (or could not be checked); it is
	// removed as soon as creation may go ahead or none is needed.
	ConditionWaitingForDependencies = "WaitingForDependencies"
	// ReasonDependenciesMissing: some required objects do not exist yet;
	// the message names them.
	ReasonDependenciesMissing = "DependenciesMissing"
	// ReasonDependencyCheckFailed: reading the member to check them failed.
	ReasonDependencyCheckFailed = "DependencyCheckFailed"
)

// DefaultDependencyRecheck is the default Options.DependencyRecheck.
const DefaultDependencyRecheck = 5 * time.Second

// gateState is what the dependency check of one sync decided.
type gateState int

const (
	// gateNotChecked: the sync did not get to creating pods; the
	// condition stays as it is.
	gateNotChecked gateState = iota
	// gateOpen: pods may be created (or none are needed).
	gateOpen
	// gateClosed: creation waits.
	gateClosed
)

// needsDependencyCheck reports whether a sync that is about to manage
// replicas must first check dependencies: only when it would create pods
// and the workload names some.
func needsDependencyCheck(w *Workload, active int, target int32) bool {
	return len(w.Dependencies) > 0 && active < int(target)
}

// dependencyCondition is the condition for a check that found missing (or
// failed with err); nil when creation may go ahead.
func dependencyCondition(missing []dependencies.Ref, err error, now time.Time) *metav1.Condition {
	c := &metav1.Condition{Type: ConditionWaitingForDependencies, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	switch {
	case err != nil:
		c.Reason = ReasonDependencyCheckFailed
		c.Message = "pods are not created until their dependencies can be checked: " + err.Error()
	case len(missing) > 0:
		names := make([]string, len(missing))
		for i, r := range missing {
			names[i] = r.String()
		}
		c.Reason = ReasonDependenciesMissing
		c.Message = "pods are not created until these exist in the namespace: " + strings.Join(names, ", ")
	default:
		return nil
	}
	return c
}

// withDependencyCondition returns conds as the gate decided: c set (the
// transition time kept while status, reason and message stay the same),
// the condition removed when the gate is open, conds unchanged when the
// gate was not checked.
func withDependencyCondition(conds []metav1.Condition, state gateState, c *metav1.Condition) []metav1.Condition {
	switch state {
	case gateOpen:
		if replicastatus.FindCondition(conds, ConditionWaitingForDependencies) != nil {
			return replicastatus.RemoveCondition(conds, ConditionWaitingForDependencies)
		}
	case gateClosed:
		if cur := replicastatus.FindCondition(conds, ConditionWaitingForDependencies); cur != nil &&
			cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message {
			return conds
		}
		return append(replicastatus.RemoveCondition(conds, ConditionWaitingForDependencies), *c)
	}
	return conds
}

// checkDependencies runs the gate before pods are created. It returns
// gateOpen when nothing holds creation back, or gateClosed with the
// condition to show; an event is emitted when what is waited for changes.
func (e *Engine) checkDependencies(ctx context.Context, mrs *v1alpha1.MemberReplicaSet, w *Workload, active int) (gateState, *metav1.Condition) {
	if !needsDependencyCheck(w, active, mrs.Spec.Replicas) {
		return gateOpen, nil
	}
	if e.o.Dependencies == nil {
		// Nothing to check against (tests, or wiring without it): behave as
		// before dependencies existed.
		return gateOpen, nil
	}
	missing, err := e.o.Dependencies.Missing(ctx, mrs.Namespace, w.Dependencies)
	c := dependencyCondition(missing, err, e.o.Clock.Now())
	if c == nil {
		return gateOpen, nil
	}
	log := ctrl.LoggerFrom(ctx)
	if err != nil {
		log.Error(err, "Checking dependencies, not creating pods")
	} else {
		log.V(1).Info("Dependencies missing, not creating pods", "missing", c.Message)
	}
	if cur := replicastatus.FindCondition(mrs.Status.Conditions, ConditionWaitingForDependencies); cur == nil || cur.Message != c.Message {
		if e.o.Recorder != nil {
			e.o.Recorder.Eventf(mrs, nil, corev1.EventTypeNormal, ConditionWaitingForDependencies, "Create", "%s", c.Message)
		}
	}
	return gateClosed, c
}
