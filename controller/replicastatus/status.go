// Package replicastatus computes a MemberReplicaSet's status from its pods the
// way upstream computes a ReplicaSet's: counts, the ReplicaFailure condition
// and when to look again for pods becoming available.
package replicastatus

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
)

// Condition type and reasons, as upstream's ReplicaSet.
const (
	// ConditionReplicaFailure is set while creating or deleting pods fails.
	ConditionReplicaFailure = "ReplicaFailure"
	// ReasonFailedCreate means the member has too few pods and creating failed.
	ReasonFailedCreate = "FailedCreate"
	// ReasonFailedDelete means the member has too many pods and deleting failed.
	ReasonFailedDelete = "FailedDelete"
	// reasonFailed stands in for upstream's empty reason, which a
	// metav1.Condition may not carry.
	reasonFailed = "Failed"
	// maxMessage is metav1.Condition's message length limit.
	maxMessage = 32768
)

// Input is everything Calculate needs.
type Input struct {
	// Current is the status as last written; its conditions are kept.
	Current v1alpha1.MemberReplicaSetStatus
	// Target is spec.replicas.
	Target int32
	// TemplateLabels are the pod template's labels, for fullyLabeledReplicas.
	TemplateLabels map[string]string
	// MinReadySeconds decides availability.
	MinReadySeconds int32
	// Active are the claimed active pods; Terminating the claimed terminating ones.
	Active, Terminating []*corev1.Pod
	// ManageErr is the error of this sync's create/delete step, if any.
	ManageErr error
	// Now is the single instant the status is computed at.
	Now time.Time
}

// Calculate returns the new status. ObservedGeneration is left as in Current:
// the writer sets it only when it writes.
func Calculate(in Input) v1alpha1.MemberReplicaSetStatus {
	st := *in.Current.DeepCopy()
	tmpl := labels.SelectorFromSet(in.TemplateLabels)
	var full, ready, avail, restarts, looping int32
	for _, p := range in.Active {
		if tmpl.Matches(labels.Set(p.Labels)) {
			full++
		}
		restarts += podstate.Restarts(p)
		if podstate.CrashLooping(p) {
			looping++
		}
		if podstate.IsReady(p) {
			ready++
			if podstate.IsAvailable(p, in.MinReadySeconds, in.Now) {
				avail++
			}
		}
	}
	st.Replicas = int32(len(in.Active))
	st.FullyLabeledReplicas = full
	st.ReadyReplicas = ready
	st.AvailableReplicas = avail
	st.Restarts, st.CrashLoopingReplicas = restarts, looping
	st.TerminatingReplicas = ptr.To(int32(len(in.Terminating)))

	existing := FindCondition(st.Conditions, ConditionReplicaFailure)
	switch {
	case in.ManageErr != nil && existing == nil:
		reason := reasonFailed
		if diff := len(in.Active) - int(in.Target); diff < 0 {
			reason = ReasonFailedCreate
		} else if diff > 0 {
			reason = ReasonFailedDelete
		}
		msg := in.ManageErr.Error()
		if len(msg) > maxMessage {
			msg = msg[:maxMessage]
		}
		st.Conditions = SetCondition(st.Conditions, metav1.Condition{
			Type: ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: reason,
			Message: msg, LastTransitionTime: metav1.NewTime(in.Now),
		})
	case in.ManageErr == nil && existing != nil:
		st.Conditions = RemoveCondition(st.Conditions, ConditionReplicaFailure)
	}
	return st
}

// Changed reports whether writing next is needed: any count or condition
// differs, or the object's generation has not been observed yet.
func Changed(cur, next v1alpha1.MemberReplicaSetStatus, generation int64) bool {
	return cur.Replicas != next.Replicas ||
		cur.FullyLabeledReplicas != next.FullyLabeledReplicas ||
		cur.ReadyReplicas != next.ReadyReplicas ||
		cur.AvailableReplicas != next.AvailableReplicas ||
		cur.Restarts != next.Restarts || cur.CrashLoopingReplicas != next.CrashLoopingReplicas ||
		!ptr.Equal(cur.TerminatingReplicas, next.TerminatingReplicas) ||
		generation != cur.ObservedGeneration ||
		!equality.Semantic.DeepEqual(cur.Conditions, next.Conditions)
}

// Urgent reports whether a changed status must be written at once rather
// than paced: the generation is not observed yet, a condition changed, or the
// pods have settled (as many as the target, all fully labelled, ready and
// available, none terminating). What is left are counts in flux, which the
// next write carries anyway.
func Urgent(cur, next v1alpha1.MemberReplicaSetStatus, generation int64, target int32) bool {
	if generation != cur.ObservedGeneration || !equality.Semantic.DeepEqual(cur.Conditions, next.Conditions) {
		return true
	}
	return next.Replicas == target && next.FullyLabeledReplicas == target && next.ReadyReplicas == target &&
		next.AvailableReplicas == target && ptr.Deref(next.TerminatingReplicas, 0) == 0
}

// FindCondition returns the condition of type t, or nil.
func FindCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// SetCondition returns conds with c in place: unchanged when a condition of the
// same type, status and reason exists, otherwise the old one removed and c
// appended.
func SetCondition(conds []metav1.Condition, c metav1.Condition) []metav1.Condition {
	if cur := FindCondition(conds, c.Type); cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		return conds
	}
	return append(RemoveCondition(conds, c.Type), c)
}

// RemoveCondition returns conds without conditions of type t.
func RemoveCondition(conds []metav1.Condition, t string) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range conds {
		if c.Type != t {
			out = append(out, c)
		}
	}
	return out
}

// nextCheck is how long until p becomes available, if it is ready and not yet.
func nextCheck(p *corev1.Pod, minReadySeconds int32, now time.Time) (time.Duration, bool) {
	if minReadySeconds <= 0 || !podstate.IsReady(p) {
		return 0, false
	}
	since := podstate.ReadySince(p)
	if since.IsZero() {
		return 0, false
	}
	d := since.Add(time.Duration(minReadySeconds) * time.Second).Sub(now)
	return d, d > 0
}

// NextAvailabilityCheck returns when the earliest ready-but-unavailable pod
// becomes available. The pod is chosen at evaluated (the instant the status was
// computed, so no pod is skipped) and its remaining time recomputed with clk;
// if that is already past, it returns 0.
func NextAvailabilityCheck(pods []*corev1.Pod, minReadySeconds int32, evaluated time.Time, clk clock.PassiveClock) (time.Duration, bool) {
	var best *corev1.Pod
	var bestD time.Duration
	for _, p := range pods {
		if d, ok := nextCheck(p, minReadySeconds, evaluated); ok && (best == nil || d < bestD) {
			best, bestD = p, d
		}
	}
	if best == nil {
		return 0, false
	}
	if d, ok := nextCheck(best, minReadySeconds, clk.Now()); ok {
		return d, true
	}
	return 0, true
}

// RequeueAfter returns the delay before the next sync needed to see pods become
// available: none when minReadySeconds is 0 or ready == available; otherwise
// the next availability check, falling back to minReadySeconds.
func RequeueAfter(st v1alpha1.MemberReplicaSetStatus, minReadySeconds int32, active []*corev1.Pod, evaluated time.Time, clk clock.PassiveClock) (time.Duration, bool) {
	if minReadySeconds <= 0 || st.ReadyReplicas == st.AvailableReplicas {
		return 0, false
	}
	if d, ok := NextAvailabilityCheck(active, minReadySeconds, evaluated, clk); ok {
		return d, true
	}
	return time.Duration(minReadySeconds) * time.Second, true
}

// Unschedulable counts pods whose PodScheduled condition is False with reason
// Unschedulable and returns the oldest such transition time.
func Unschedulable(pods []*corev1.Pod) (int32, time.Time) {
	var n int32
	var oldest time.Time
	for _, p := range pods {
		if t, ok := podstate.UnschedulableSince(p); ok {
			n++
			if oldest.IsZero() || (!t.IsZero() && t.Before(oldest)) {
				oldest = t
			}
		}
	}
	return n, oldest
}
