package main

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	now := metav1.Now()
	pod := func(name, node string, phase corev1.PodPhase, ready bool, deleting bool) corev1.Pod {
		p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: phase}}
		st := corev1.ConditionFalse
		if ready {
			st = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
		if deleting {
			p.DeletionTimestamp = &now
		}
		return p
	}
	cases := []struct {
		name string
		pods []corev1.Pod
		want string
	}{
		{"none", nil, "0 pods: 0 ready, 0 running not ready, 0 pending, 0 terminating []"},
		{"states", []corev1.Pod{
			pod("web-e", "n1", corev1.PodRunning, true, false),
			pod("web-d", "n1", corev1.PodRunning, false, false),
			pod("web-c", "", corev1.PodPending, false, false),
			pod("web-b", "n2", corev1.PodRunning, true, true),
			pod("web-a", "n2", corev1.PodRunning, true, false),
		}, "5 pods: 2 ready, 1 running not ready, 1 pending, 1 terminating [web-a web-b web-c +2 more]"},
	}
	for _, c := range cases {
		if got := summarize(c.pods, 3); got != c.want {
			t.Errorf("%s: summarize = %q, want %q", c.name, got, c.want)
		}
	}
}
