// Package podstate holds the small predicates over a pod's phase and
// conditions that the member engine, ranking and status math share.
package podstate

import (
	"time"

	corev1 "k8s.io/api/core/v1"
)

// IsActive reports whether the pod counts toward replicas: not terminal and
// not being deleted.
func IsActive(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded &&
		p.Status.Phase != corev1.PodFailed &&
		p.DeletionTimestamp == nil
}

// IsTerminating reports whether the pod is being deleted but has not reached a
// terminal phase.
func IsTerminating(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded &&
		p.Status.Phase != corev1.PodFailed &&
		p.DeletionTimestamp != nil
}

// ReadyCondition returns the pod's Ready condition, or nil.
func ReadyCondition(p *corev1.Pod) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// IsReady reports whether the pod's Ready condition is True.
func IsReady(p *corev1.Pod) bool {
	c := ReadyCondition(p)
	return c != nil && c.Status == corev1.ConditionTrue
}

// ReadySince returns the Ready condition's last transition time when the pod
// is ready, and the zero time otherwise.
func ReadySince(p *corev1.Pod) time.Time {
	c := ReadyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// IsAvailable reports whether the pod has been ready for at least
// minReadySeconds at now. With minReadySeconds > 0 a ready pod whose Ready
// transition time is unknown is never available, as upstream.
func IsAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	if !IsReady(p) {
		return false
	}
	if minReadySeconds == 0 {
		return true
	}
	since := ReadySince(p)
	if since.IsZero() {
		return false
	}
	return !since.Add(time.Duration(minReadySeconds) * time.Second).After(now)
}

// UnschedulableSince returns the transition time of the pod's PodScheduled=False
// condition with reason Unschedulable, and whether the pod has one.
func UnschedulableSince(p *corev1.Pod) (time.Time, bool) {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}

// Restarts is the sum of the restart counts of p's app containers and of
// its sidecars (init containers with restartPolicy Always); plain init
// containers do not restart once the pod runs.
func Restarts(p *corev1.Pod) int32 {
	var n int32
	for _, c := range p.Status.ContainerStatuses {
		n += c.RestartCount
	}
	for _, c := range p.Status.InitContainerStatuses {
		if isSidecar(p, c.Name) {
			n += c.RestartCount
		}
	}
	return n
}

func isSidecar(p *corev1.Pod, name string) bool {
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

// ReasonCrashLoopBackOff is the waiting reason of a container the kubelet
// holds back after repeated crashes.
const ReasonCrashLoopBackOff = "CrashLoopBackOff"

// CrashLooping reports whether a container of p (a sidecar included) waits
// in CrashLoopBackOff.
func CrashLooping(p *corev1.Pod) bool {
	for _, ss := range [][]corev1.ContainerStatus{p.Status.ContainerStatuses, p.Status.InitContainerStatuses} {
		for _, c := range ss {
			if c.State.Waiting != nil && c.State.Waiting.Reason == ReasonCrashLoopBackOff {
				return true
			}
		}
	}
	return false
}
