package capacity

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSummarize(t *testing.T) {
	node := func(name string, isReady, cordoned bool) corev1.Node {
		st := corev1.ConditionFalse
		if isReady {
			st = corev1.ConditionTrue
		}
		return corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("10")},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: st}},
			},
		}
	}
	pod := func(nodeName, cpu string, phase corev1.PodPhase) corev1.Pod {
		return corev1.Pod{
			Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}},
			Status: corev1.PodStatus{Phase: phase},
		}
	}
	s := Summarize(
		[]corev1.Node{node("a", true, false), node("b", true, false), node("c", false, false), node("d", true, true)},
		[]corev1.Pod{
			pod("a", "3", corev1.PodRunning), pod("a", "3", corev1.PodRunning), // a overcommitted: 6 of 4, adds no free cpu
			pod("b", "1", corev1.PodRunning),
			pod("b", "2", corev1.PodSucceeded), // finished: not counted
			pod("c", "1", corev1.PodRunning),   // on a node not counted
			pod("", "1", corev1.PodPending),    // unbound
		})
	if s.Nodes != 4 || s.Ready != 2 {
		t.Fatalf("nodes %d ready %d, want 4 and 2", s.Nodes, s.Ready)
	}
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "8", corev1.ResourceMemory: "16Gi", corev1.ResourcePods: "20"} {
		if q := s.Allocatable[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, q.String(), want)
		}
	}
	for name, want := range map[corev1.ResourceName]string{corev1.ResourceCPU: "3", corev1.ResourceMemory: "16Gi", corev1.ResourcePods: "17"} {
		if q := s.Free[name]; q.Cmp(resource.MustParse(want)) != 0 {
			t.Errorf("free %s = %s, want %s", name, q.String(), want)
		}
	}
}
