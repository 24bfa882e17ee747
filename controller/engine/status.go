package engine

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/internal/fedref"
)

// calculateStatus is the status this sync observed, with the dependency
// condition as the gate decided.
func calculateStatus(s *syncScope, now time.Time) v1alpha1.MemberReplicaSetStatus {
	st := replicastatus.Calculate(replicastatus.Input{
		Current: s.mrs.Status, Target: s.mrs.Spec.Replicas, TemplateLabels: s.w.Template.Labels,
		MinReadySeconds: s.mrs.Spec.MinReadySeconds, Active: s.claimed, Terminating: s.terminating,
		ManageErr: s.manageErr, Now: now,
	})
	st.Conditions = withDependencyCondition(st.Conditions, s.gate, s.waiting)
	return st
}

// updateReplicaSetStatus writes st when it differs from the status written:
// at once when the change is urgent, else no sooner than StatusInterval
// after the last write. A write sets st's observed generation and replaces
// s.mrs with what the API server returned. It returns how long a paced
// write waits, 0 when written or unchanged.
func (e *Engine) updateReplicaSetStatus(ctx context.Context, s *syncScope, st *v1alpha1.MemberReplicaSetStatus, now time.Time) (time.Duration, error) {
	mrs := s.mrs
	if !replicastatus.Changed(mrs.Status, *st, mrs.Generation) {
		e.paced.settled(s.key)
		return 0, nil
	}
	var due time.Duration
	switch {
	case !replicastatus.Urgent(mrs.Status, *st, mrs.Generation, mrs.Spec.Replicas):
		due = e.paced.wait(s.key, now)
	case generationOnly(mrs, *st) && (s.acted || e.paced.holding(s.key, mrs.Generation)):
		// A new generation whose pods this sync just created or deleted:
		// its status changes again as the informer shows them, so wait a
		// little for them to settle and write once.
		due = e.paced.holdGeneration(s.key, mrs.Generation, now)
	}
	if due == 0 {
		due = e.deferWhileBusy(s.key, now)
		s.awaitLull = due > 0
	}
	// This sync has seen the generation: a write records it, and a held,
	// deferred or paced one is reported with it already (a paced,
	// count-only change has it observed anyway).
	st.ObservedGeneration = mrs.Generation
	if due > 0 {
		ctrl.LoggerFrom(ctx).V(4).Info("Pacing a status write", "in", due)
		return due, nil
	}
	// Marked like the rest of the sync: unmarked, it would wait in the one
	// lane that events use, a Patience at a time, and hold up a worker
	// that has pods to create.
	updated, err := e.writeStatus(ctx, s.key, mrs, *st)
	if err != nil {
		return 0, err
	}
	s.mrs = updated
	e.paced.wrote(s.key, now)
	return 0, nil
}

// deferWhileBusy returns how long a status write that is due now waits
// because the member's rate limit is busy with pod and MemberReplicaSet
// writes (Options.Busy): until the rate limit falls idle (the sync asks
// for that with Result.AwaitLull), MaxStatusDeferral at most. Written in a
// burst, the status of each MemberReplicaSet of a few pods takes a token a
// pod needs; the hub reads the engine's reports, so only the member's own
// status waits.
func (e *Engine) deferWhileBusy(k fedref.MemberObject, now time.Time) time.Duration {
	if e.o.Busy == nil || !e.o.Busy() {
		return 0
	}
	return e.paced.deferBusy(k, now, e.o.MaxStatusDeferral)
}

// generationOnly reports whether st is urgent for mrs only because mrs's
// generation is not observed yet: no condition changed and the pods have
// not settled.
func generationOnly(mrs *v1alpha1.MemberReplicaSet, st v1alpha1.MemberReplicaSetStatus) bool {
	if mrs.Status.ObservedGeneration == mrs.Generation {
		return false
	}
	observed := *mrs.Status.DeepCopy()
	observed.ObservedGeneration = mrs.Generation
	return !replicastatus.Urgent(observed, st, mrs.Generation, mrs.Spec.Replicas)
}

// reportIfIncomplete reports whether the pod cache misses pods of the
// member (Options.ViewIncomplete). If it does, the sync writes nothing and
// the hub is told why, for an existing MemberReplicaSet or one the
// workload still needs.
func (e *Engine) reportIfIncomplete(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, wanted bool) bool {
	if e.o.ViewIncomplete == nil {
		return false
	}
	why := e.o.ViewIncomplete()
	if why == nil {
		return false
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Pod cache incomplete, writing nothing to the member", "reason", why.Error())
	switch {
	case mrs != nil:
		e.reportIncomplete(ctx, key, mrs, why)
	case wanted && !w.Deleting:
		// Not created yet: the report says why it is not.
		e.reportIncomplete(ctx, key, &v1alpha1.MemberReplicaSet{Spec: v1alpha1.MemberReplicaSetSpec{Hub: w.Hub}}, why)
	}
	return true
}

// writeStatus PUTs the status subresource, retrying once on a live copy with
// the same new status, as upstream. What the API server returns is
// remembered, so the next sync does not start from a cache that has not
// shown this write yet.
func (e *Engine) writeStatus(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, st v1alpha1.MemberReplicaSetStatus) (*v1alpha1.MemberReplicaSet, error) {
	upd := mrs.DeepCopy()
	upd.Status = st
	err := e.o.Client.Status().Update(ctx, upd)
	if err == nil {
		e.written.record(key, mrs, upd)
		return upd, nil
	}
	fresh := &v1alpha1.MemberReplicaSet{}
	if gerr := e.o.APIReader.Get(ctx, client.ObjectKeyFromObject(mrs), fresh); gerr != nil {
		return nil, fmt.Errorf("re-reading MemberReplicaSet %s after failed status update: %w", klog.KObj(mrs), gerr)
	}
	liveRV := fresh.ResourceVersion
	fresh.Status = st
	if err := e.o.Client.Status().Update(ctx, fresh); err != nil {
		return nil, fmt.Errorf("updating MemberReplicaSet %s status: %w", klog.KObj(mrs), err)
	}
	e.written.record(key, mrs, fresh, liveRV)
	return fresh, nil
}

// report sends the hub this sync's view of the member: mrs's spec and the
// status computed now (cur), whether or not it was written yet.
func (e *Engine) report(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, cur v1alpha1.MemberReplicaSetStatus, active []*corev1.Pod, now time.Time) {
	if e.o.Sink == nil {
		return
	}
	uns, since := replicastatus.Unschedulable(active)
	st := MemberStatus{
		Target: mrs.Spec.Replicas, Hub: mrs.Spec.Hub,
		Replicas: cur.Replicas, FullyLabeledReplicas: cur.FullyLabeledReplicas,
		ReadyReplicas: cur.ReadyReplicas, AvailableReplicas: cur.AvailableReplicas,
		Restarts: cur.Restarts, CrashLoopingReplicas: cur.CrashLoopingReplicas,
		Unschedulable: uns, UnschedulableSince: since,
		ObservedGeneration: cur.ObservedGeneration, ReportedAt: now,
	}
	st.Term, st.Fence = reportedPermit(ctx)
	if cur.TerminatingReplicas != nil {
		st.TerminatingReplicas = *cur.TerminatingReplicas
	}
	if c := replicastatus.FindCondition(cur.Conditions, replicastatus.ConditionReplicaFailure); c != nil {
		cc := *c
		st.ReplicaFailure = &cc
	}
	e.o.Sink.Report(ctx, key, st)
}

// reportIncomplete reports the MemberReplicaSet's last written counts with
// a ReplicaFailure saying why nothing is done in the member.
func (e *Engine) reportIncomplete(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, why error) {
	now := e.o.Clock.Now()
	cur := *mrs.Status.DeepCopy()
	cur.Conditions = replicastatus.SetCondition(cur.Conditions, metav1.Condition{
		Type: replicastatus.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: ReasonPodCacheIncomplete,
		Message: why.Error(), LastTransitionTime: metav1.NewTime(now),
	})
	e.report(ctx, key, mrs, cur, nil, now)
}
