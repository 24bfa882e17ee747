package replicastatus

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func mkPod(lbls map[string]string, readySince *time.Time) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: lbls}}
	if readySince != nil {
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(*readySince)}}
	}
	return p
}

func at(d time.Duration) *time.Time { t := now.Add(d); return &t }

func TestCalculate(t *testing.T) {
	full := map[string]string{"app": "x", "tier": "web"}
	part := map[string]string{"app": "x"}
	cases := []struct {
		name                                  string
		minReady                              int32
		active, terminating                   []*corev1.Pod
		replicas, fully, ready, avail, termin int32
	}{
		{name: "fully labeled", active: []*corev1.Pod{mkPod(full, nil), mkPod(full, nil)}, replicas: 2, fully: 2},
		{name: "not fully labeled", active: []*corev1.Pod{mkPod(full, nil), mkPod(part, nil)}, replicas: 2, fully: 1},
		{name: "ready and available without minReady", active: []*corev1.Pod{mkPod(full, at(0)), mkPod(full, nil)}, replicas: 2, fully: 2, ready: 1, avail: 1},
		{name: "minReady not yet", minReady: 10, active: []*corev1.Pod{mkPod(full, at(-5*time.Second)), mkPod(full, at(-10*time.Second))}, replicas: 2, fully: 2, ready: 2, avail: 1},
		{name: "zero ready time never available with minReady", minReady: 1, active: []*corev1.Pod{mkPod(full, &time.Time{})}, replicas: 1, fully: 1, ready: 1},
		{name: "terminating counted", active: []*corev1.Pod{mkPod(full, nil)}, terminating: []*corev1.Pod{mkPod(full, nil), mkPod(full, nil)}, replicas: 1, fully: 1, termin: 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Calculate(Input{Target: 2, TemplateLabels: full, MinReadySeconds: c.minReady, Active: c.active, Terminating: c.terminating, Now: now})
			if st.Replicas != c.replicas || st.FullyLabeledReplicas != c.fully || st.ReadyReplicas != c.ready || st.AvailableReplicas != c.avail {
				t.Fatalf("got replicas=%d fully=%d ready=%d avail=%d", st.Replicas, st.FullyLabeledReplicas, st.ReadyReplicas, st.AvailableReplicas)
			}
			if st.TerminatingReplicas == nil || *st.TerminatingReplicas != c.termin {
				t.Fatalf("terminating = %v, want %d", st.TerminatingReplicas, c.termin)
			}
		})
	}
}

func TestCalculateConditions(t *testing.T) {
	boom := errors.New("boom")
	old := metav1.Condition{Type: ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: "FailedCreate", Message: "old", LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}
	two := []*corev1.Pod{mkPod(nil, nil), mkPod(nil, nil)}
	cases := []struct {
		name     string
		existing []metav1.Condition
		active   []*corev1.Pod
		err      error
		want     *metav1.Condition
	}{
		{name: "FailedCreate when short", active: two[:1], err: boom, want: &metav1.Condition{Type: ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: ReasonFailedCreate, Message: "boom", LastTransitionTime: metav1.NewTime(now)}},
		{name: "FailedDelete when over", active: append(two, mkPod(nil, nil)), err: boom, want: &metav1.Condition{Type: ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: ReasonFailedDelete, Message: "boom", LastTransitionTime: metav1.NewTime(now)}},
		{name: "removed without error", existing: []metav1.Condition{old}, active: two},
		{name: "kept unchanged on error", existing: []metav1.Condition{old}, active: two[:1], err: errors.New("new"), want: &old},
		{name: "none without error", active: two},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := Calculate(Input{Current: v1alpha1.MemberReplicaSetStatus{Conditions: c.existing}, Target: 2, Active: c.active, ManageErr: c.err, Now: now})
			got := FindCondition(st.Conditions, ConditionReplicaFailure)
			switch {
			case c.want == nil && got != nil:
				t.Fatalf("unexpected condition %+v", got)
			case c.want != nil && (got == nil || *got != *c.want):
				t.Fatalf("condition = %+v, want %+v", got, c.want)
			}
		})
	}
}

func TestConditionHelpers(t *testing.T) {
	a := metav1.Condition{Type: "A", Status: metav1.ConditionTrue, Reason: "R"}
	b := metav1.Condition{Type: "B", Status: metav1.ConditionTrue, Reason: "R"}
	conds := SetCondition(nil, a)
	conds = SetCondition(conds, b)
	if len(conds) != 2 || FindCondition(conds, "A") == nil || FindCondition(conds, "C") != nil {
		t.Fatalf("conds = %+v", conds)
	}
	// Same status and reason: untouched even with a new message.
	a2 := a
	a2.Message = "new"
	conds = SetCondition(conds, a2)
	if FindCondition(conds, "A").Message != "" {
		t.Fatal("same status+reason must not replace")
	}
	// Different reason: replaced and moved to the end.
	a3 := a
	a3.Reason = "Other"
	conds = SetCondition(conds, a3)
	if conds[1].Type != "A" || conds[1].Reason != "Other" || len(conds) != 2 {
		t.Fatalf("replace: %+v", conds)
	}
	conds = RemoveCondition(conds, "A")
	if len(conds) != 1 || conds[0].Type != "B" {
		t.Fatalf("remove: %+v", conds)
	}
}

func TestChanged(t *testing.T) {
	base := v1alpha1.MemberReplicaSetStatus{Replicas: 1, ObservedGeneration: 3, TerminatingReplicas: ptr.To[int32](0)}
	if Changed(base, *base.DeepCopy(), 3) {
		t.Fatal("identical status with observed generation must not change")
	}
	if !Changed(base, *base.DeepCopy(), 4) {
		t.Fatal("new generation must be written")
	}
	n := *base.DeepCopy()
	n.TerminatingReplicas = nil
	if !Changed(base, n, 3) {
		t.Fatal("terminating nil vs 0 differs")
	}
	n = *base.DeepCopy()
	n.Conditions = []metav1.Condition{{Type: "X"}}
	if !Changed(base, n, 3) {
		t.Fatal("conditions differ")
	}
}

func TestUrgent(t *testing.T) {
	settled := v1alpha1.MemberReplicaSetStatus{Replicas: 3, FullyLabeledReplicas: 3, ReadyReplicas: 3, AvailableReplicas: 3,
		TerminatingReplicas: ptr.To[int32](0), ObservedGeneration: 2}
	with := func(f func(*v1alpha1.MemberReplicaSetStatus)) v1alpha1.MemberReplicaSetStatus {
		s := *settled.DeepCopy()
		f(&s)
		return s
	}
	inFlux := with(func(s *v1alpha1.MemberReplicaSetStatus) { s.ReadyReplicas, s.AvailableReplicas = 1, 1 })
	failure := []metav1.Condition{{Type: ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: ReasonFailedCreate}}
	for _, tc := range []struct {
		name       string
		cur, next  v1alpha1.MemberReplicaSetStatus
		generation int64
		target     int32
		want       bool
	}{
		{"counts in flux", inFlux, with(func(s *v1alpha1.MemberReplicaSetStatus) { s.ReadyReplicas, s.AvailableReplicas = 2, 2 }), 2, 3, false},
		{"settled at the target", inFlux, settled, 2, 3, true},
		{"all ready but below the target", inFlux, settled, 2, 4, false},
		{"new generation", settled, inFlux, 3, 3, true},
		{"condition appears", inFlux, with(func(s *v1alpha1.MemberReplicaSetStatus) { s.ReadyReplicas = 2; s.Conditions = failure }), 2, 3, true},
		{"condition clears", with(func(s *v1alpha1.MemberReplicaSetStatus) { s.Conditions = failure }), inFlux, 2, 3, true},
		{"ready, not yet available", inFlux, with(func(s *v1alpha1.MemberReplicaSetStatus) { s.AvailableReplicas = 2 }), 2, 3, false},
		{"pods still terminating", inFlux, with(func(s *v1alpha1.MemberReplicaSetStatus) { s.TerminatingReplicas = ptr.To[int32](1) }), 2, 3, false},
		{"not fully labelled", inFlux, with(func(s *v1alpha1.MemberReplicaSetStatus) { s.FullyLabeledReplicas = 2 }), 2, 3, false},
		{"scaled to zero", inFlux, v1alpha1.MemberReplicaSetStatus{ObservedGeneration: 2, TerminatingReplicas: ptr.To[int32](0)}, 2, 0, true},
	} {
		if got := Urgent(tc.cur, tc.next, tc.generation, tc.target); got != tc.want {
			t.Errorf("%s: Urgent = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAvailabilityCheck mirrors upstream TestReplicaSetAvailabilityCheck: pods
// ready at 0, -2s and -4.3s plus one pending with minReadySeconds 5.
func TestAvailabilityCheck(t *testing.T) {
	active := []*corev1.Pod{mkPod(nil, at(0)), mkPod(nil, at(-2*time.Second)), mkPod(nil, at(-4300*time.Millisecond)), mkPod(nil, nil)}
	st := Calculate(Input{Target: 4, MinReadySeconds: 5, Active: active, Now: now})
	if st.ReadyReplicas != 3 || st.AvailableReplicas != 0 {
		t.Fatalf("ready=%d available=%d", st.ReadyReplicas, st.AvailableReplicas)
	}
	clk := clocktesting.NewFakePassiveClock(now)
	d, ok := RequeueAfter(st, 5, active, now, clk)
	if !ok || d != 700*time.Millisecond {
		t.Fatalf("requeue = %v,%v; want 700ms", d, ok)
	}
	// Time moved on between evaluation and planning: use the fresh remaining time.
	clk.SetTime(now.Add(500 * time.Millisecond))
	if d, _ := RequeueAfter(st, 5, active, now, clk); d != 200*time.Millisecond {
		t.Fatalf("requeue after 500ms = %v, want 200ms", d)
	}
	// Already past: check immediately.
	clk.SetTime(now.Add(time.Second))
	if d, ok := RequeueAfter(st, 5, active, now, clk); !ok || d != 0 {
		t.Fatalf("requeue when past = %v,%v; want 0", d, ok)
	}
	// ready == available: no requeue.
	if _, ok := RequeueAfter(v1alpha1.MemberReplicaSetStatus{ReadyReplicas: 1, AvailableReplicas: 1}, 5, active, now, clk); ok {
		t.Fatal("no requeue when all ready pods are available")
	}
	// Ready pods with zero time only: fall back to minReadySeconds.
	zero := []*corev1.Pod{mkPod(nil, &time.Time{})}
	if d, ok := RequeueAfter(v1alpha1.MemberReplicaSetStatus{ReadyReplicas: 1}, 5, zero, now, clk); !ok || d != 5*time.Second {
		t.Fatalf("fallback = %v,%v; want 5s", d, ok)
	}
}

func TestUnschedulable(t *testing.T) {
	uns := func(t time.Time) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(t)}}}}
	}
	other := &corev1.Pod{Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "SchedulingGated"}}}}
	n, oldest := Unschedulable([]*corev1.Pod{uns(now), other, uns(now.Add(-time.Minute)), mkPod(nil, nil)})
	if n != 2 || !oldest.Equal(now.Add(-time.Minute)) {
		t.Fatalf("unschedulable = %d since %v", n, oldest)
	}
}

func withContainers(p *corev1.Pod, sidecar bool, statuses ...corev1.ContainerStatus) *corev1.Pod {
	if sidecar {
		always := corev1.ContainerRestartPolicyAlways
		p.Spec.InitContainers = []corev1.Container{{Name: "side", RestartPolicy: &always}, {Name: "setup"}}
		p.Status.InitContainerStatuses = []corev1.ContainerStatus{{Name: "side", RestartCount: 2}, {Name: "setup", RestartCount: 5}}
	}
	p.Status.ContainerStatuses = statuses
	return p
}

func crashing(name string, restarts int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, RestartCount: restarts,
		State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: podstate.ReasonCrashLoopBackOff}}}
}

// Restarts sum app containers and sidecars (not plain init containers) of
// active pods only; a pod counts as crash-looping once, whichever of its
// containers waits in CrashLoopBackOff.
func TestCalculateRestarts(t *testing.T) {
	lbls := map[string]string{"app": "web"}
	cases := []struct {
		name              string
		active, term      []*corev1.Pod
		restarts, looping int32
	}{
		{name: "no restarts", active: []*corev1.Pod{mkPod(lbls, nil)}},
		{name: "app containers summed", active: []*corev1.Pod{
			withContainers(mkPod(lbls, nil), false, corev1.ContainerStatus{Name: "a", RestartCount: 3}, corev1.ContainerStatus{Name: "b", RestartCount: 1}),
			withContainers(mkPod(lbls, nil), false, corev1.ContainerStatus{Name: "a", RestartCount: 2})}, restarts: 6},
		{name: "sidecars count, plain init containers do not", active: []*corev1.Pod{
			withContainers(mkPod(lbls, nil), true, corev1.ContainerStatus{Name: "a", RestartCount: 1})}, restarts: 3},
		{name: "crash loops counted per pod", active: []*corev1.Pod{
			withContainers(mkPod(lbls, nil), false, crashing("a", 4), crashing("b", 4)),
			withContainers(mkPod(lbls, nil), false, corev1.ContainerStatus{Name: "a"})}, restarts: 8, looping: 1},
		{name: "terminating pods left out", term: []*corev1.Pod{withContainers(mkPod(lbls, nil), false, crashing("a", 9))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := Calculate(Input{Target: 2, TemplateLabels: lbls, Active: tc.active, Terminating: tc.term, Now: now})
			if st.Restarts != tc.restarts || st.CrashLoopingReplicas != tc.looping {
				t.Errorf("restarts %d crash-looping %d, want %d and %d", st.Restarts, st.CrashLoopingReplicas, tc.restarts, tc.looping)
			}
		})
	}
	if !Changed(v1alpha1.MemberReplicaSetStatus{}, v1alpha1.MemberReplicaSetStatus{Restarts: 1}, 0) {
		t.Error("Changed ignores a new restart count")
	}
}
