package engine

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestSoonest(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []time.Duration
		want time.Duration
	}{
		{"none", nil, 0},
		{"all zero", []time.Duration{0, 0, 0}, 0},
		{"one", []time.Duration{0, 3 * time.Second, 0}, 3 * time.Second},
		{"smallest positive", []time.Duration{5 * time.Second, 0, time.Second, 2 * time.Second}, time.Second},
		{"negative ignored", []time.Duration{-time.Second, 4 * time.Second}, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := soonest(tc.in...); got != tc.want {
				t.Errorf("soonest(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestStopped(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		err     error
		want    Result
		wantErr error
	}{
		{"cache lags: retry shortly, no error", errCacheLags, Result{RequeueAfter: cacheLagRequeue}, nil},
		{"wrapped cache lag", fmt.Errorf("verifying: %w", errCacheLags), Result{RequeueAfter: cacheLagRequeue}, nil},
		{"other error: backoff", boom, Result{}, boom},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := stopped(tc.err)
			if got != tc.want || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Errorf("stopped(%v) = %v, %v; want %v, %v", tc.err, got, err, tc.want, tc.wantErr)
			}
		})
	}
}

func TestFilterPods(t *testing.T) {
	mrs := mrsFor(workload(3))
	selector := labels.SelectorFromSet(lbls)
	gone := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	terminating := func(p *corev1.Pod) { p.DeletionTimestamp = &gone }
	orphan := func(p *corev1.Pod) { p.OwnerReferences = nil }
	for _, tc := range []struct {
		name                        string
		mutate                      func(*corev1.Pod)
		wantActive, wantTerminating bool
	}{
		{"running", func(*corev1.Pod) {}, true, false},
		{"pending", func(p *corev1.Pod) { p.Status.Phase = corev1.PodPending }, true, false},
		{"orphan: a claim candidate", orphan, true, false},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, false, false},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, false, false},
		{"terminating", terminating, false, true},
		{"terminating and failed", func(p *corev1.Pod) { terminating(p); p.Status.Phase = corev1.PodFailed }, false, false},
		{"terminating orphan", func(p *corev1.Pod) { terminating(p); orphan(p) }, false, false},
		{"terminating, selector no longer matches", func(p *corev1.Pod) { terminating(p); p.Labels = map[string]string{"other": "x"} }, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := ownedPod(mrs, "p")
			tc.mutate(p)
			active, term := filterPods([]*corev1.Pod{ownedPod(mrs, "running"), p}, mrs, selector)
			wantActive, wantTerm := []string{"running"}, []string(nil)
			if tc.wantActive {
				wantActive = append(wantActive, "p")
			}
			if tc.wantTerminating {
				wantTerm = append(wantTerm, "p")
			}
			if got := podNames(active); !slices.Equal(got, wantActive) {
				t.Errorf("active = %v, want %v", got, wantActive)
			}
			if got := podNames(term); !slices.Equal(got, wantTerm) {
				t.Errorf("terminating = %v, want %v", got, wantTerm)
			}
		})
	}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestCalculateStatusDependencyCondition(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := workload(2)
	waiting := dependencyCondition(nil, errors.New("unreachable"), now)
	withWaiting := mrsFor(w)
	withWaiting.Status.Conditions = []metav1.Condition{*waiting}
	for _, tc := range []struct {
		name    string
		mrs     func() *v1alpha1.MemberReplicaSet
		gate    gateState
		waiting *metav1.Condition
		want    bool
	}{
		{"closed adds it", func() *v1alpha1.MemberReplicaSet { return mrsFor(w) }, gateClosed, waiting, true},
		{"open removes it", func() *v1alpha1.MemberReplicaSet { return withWaiting.DeepCopy() }, gateOpen, nil, false},
		{"not checked keeps it", func() *v1alpha1.MemberReplicaSet { return withWaiting.DeepCopy() }, gateNotChecked, nil, true},
		{"not checked adds none", func() *v1alpha1.MemberReplicaSet { return mrsFor(w) }, gateNotChecked, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &syncScope{w: w, mrs: tc.mrs(), gate: tc.gate, waiting: tc.waiting}
			st := calculateStatus(s, now)
			got := false
			for _, c := range st.Conditions {
				got = got || c.Type == ConditionWaitingForDependencies
			}
			if got != tc.want {
				t.Errorf("%s condition present = %v, want %v (conditions %v)", ConditionWaitingForDependencies, got, tc.want, st.Conditions)
			}
		})
	}
}
