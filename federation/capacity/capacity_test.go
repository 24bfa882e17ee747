package capacity

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name string, cpu, mem string, pods int64, mods ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"zone": "a"}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(mem),
				corev1.ResourcePods:   *resource.NewQuantity(pods, resource.DecimalSI),
			},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
	for _, m := range mods {
		m(&n)
	}
	return n
}

func pod(nodeName, cpu, mem string, phase corev1.PodPhase) corev1.Pod {
	return corev1.Pod{
		Spec: corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			}},
		}}},
		Status: corev1.PodStatus{Phase: phase},
	}
}

func template(cpu, mem string, mods ...func(*corev1.PodSpec)) *corev1.PodTemplateSpec {
	t := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{
		Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{}},
	}}}}
	if cpu != "" {
		t.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(cpu)
	}
	if mem != "" {
		t.Spec.Containers[0].Resources.Requests[corev1.ResourceMemory] = resource.MustParse(mem)
	}
	for _, m := range mods {
		m(&t.Spec)
	}
	return t
}

func TestEstimate(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	tests := []struct {
		name  string
		nodes []corev1.Node
		pods  []corev1.Pod
		tmpl  *corev1.PodTemplateSpec
		want  int32
	}{
		{"cpu bound", []corev1.Node{node("n1", "4", "64Gi", 110)}, nil, template("500m", "1Gi"), 8},
		{"memory bound", []corev1.Node{node("n1", "64", "4Gi", 110)}, nil, template("100m", "1Gi"), 4},
		{"pod count bound", []corev1.Node{node("n1", "64", "64Gi", 3)}, nil, template("100m", "10Mi"), 3},
		{"no requests: only pod count", []corev1.Node{node("n1", "1", "1Gi", 5), node("n2", "1", "1Gi", 7)}, nil, template("", ""), 12},
		{"bound pods use room", []corev1.Node{node("n1", "4", "64Gi", 110)},
			[]corev1.Pod{pod("n1", "1", "1Gi", corev1.PodRunning), pod("n1", "1500m", "1Gi", corev1.PodPending)},
			template("500m", "1Gi"), 3},
		{"terminal pods ignored", []corev1.Node{node("n1", "4", "64Gi", 110)},
			[]corev1.Pod{pod("n1", "2", "1Gi", corev1.PodSucceeded), pod("n1", "2", "1Gi", corev1.PodFailed), pod("", "2", "1Gi", corev1.PodFailed)},
			template("1", "1Gi"), 4},
		// An unbound pod will take room once scheduled: its 2 cpu are two
		// pods of 1 cpu; two of the same template are two.
		{"unbound pod takes its requests in template units", []corev1.Node{node("n1", "4", "64Gi", 110)},
			[]corev1.Pod{pod("", "2", "1Gi", corev1.PodPending)}, template("1", "1Gi"), 2},
		{"unbound pods of the template take one each", []corev1.Node{node("n1", "8", "64Gi", 110)},
			[]corev1.Pod{pod("n1", "2", "1Gi", corev1.PodRunning), pod("", "2", "1Gi", corev1.PodPending), pod("", "2", "1Gi", corev1.PodPending)},
			template("2", "1Gi"), 1},
		{"unbound pod without requests takes a pod slot", []corev1.Node{node("n1", "4", "64Gi", 110)},
			[]corev1.Pod{pod("", "0", "0", corev1.PodPending)}, template("1", "1Gi"), 3},
		{"unbound demand beyond the room gives nothing", []corev1.Node{node("n1", "2", "64Gi", 110)},
			[]corev1.Pod{pod("", "3", "1Gi", corev1.PodPending)}, template("1", "1Gi"), 0},
		{"overcommitted node gives nothing", []corev1.Node{node("n1", "1", "64Gi", 110)},
			[]corev1.Pod{pod("n1", "2", "1Gi", corev1.PodRunning)}, template("100m", "1Gi"), 0},
		{"sum over nodes", []corev1.Node{node("n1", "4", "64Gi", 110), node("n2", "2", "64Gi", 110)}, nil, template("1", "1Gi"), 6},
		{"not ready node skipped", []corev1.Node{node("n1", "4", "64Gi", 110, func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		})}, nil, template("1", ""), 0},
		{"cordoned node skipped", []corev1.Node{node("n1", "4", "64Gi", 110, func(n *corev1.Node) { n.Spec.Unschedulable = true })}, nil, template("1", ""), 0},
		{"untolerated taint skipped", []corev1.Node{node("n1", "4", "64Gi", 110, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})}, nil, template("1", ""), 0},
		{"tolerated taint counts", []corev1.Node{node("n1", "4", "64Gi", 110, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
		})}, nil, template("1", "", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
		}), 4},
		{"PreferNoSchedule taint ignored", []corev1.Node{node("n1", "4", "64Gi", 110, func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{{Key: "x", Effect: corev1.TaintEffectPreferNoSchedule}}
		})}, nil, template("1", ""), 4},
		{"node selector filters", []corev1.Node{node("n1", "4", "64Gi", 110), node("n2", "4", "64Gi", 110, func(n *corev1.Node) { n.Labels["zone"] = "b" })},
			nil, template("1", "", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} }), 4},
		{"required node affinity filters", []corev1.Node{node("n1", "4", "64Gi", 110), node("n2", "8", "64Gi", 110, func(n *corev1.Node) { n.Labels["zone"] = "b" })},
			nil, template("1", "", func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
					NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
				}}}
			}), 4},
		{"resource the node lacks", []corev1.Node{node("n1", "4", "64Gi", 110)}, nil, template("1", "", func(s *corev1.PodSpec) {
			s.Containers[0].Resources.Requests["nvidia.com/gpu"] = resource.MustParse("1")
		}), 0},
		{"init container larger than containers", []corev1.Node{node("n1", "4", "64Gi", 110)}, nil, template("500m", "", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
		}), 2},
		{"sidecar adds to containers", []corev1.Node{node("n1", "4", "64Gi", 110)}, nil, template("500m", "", func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}}}}
		}), 4},
		{"no nodes", nil, nil, template("1", ""), 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := Estimate(tc.nodes, tc.pods, tc.tmpl); got != tc.want {
				t.Fatalf("Estimate = %d, want %d", got, tc.want)
			}
			// The same objects seen as informer events give the same answer.
			c := NewCounters()
			for i := range tc.pods {
				c.PodHandler().OnAdd(&tc.pods[i], true)
			}
			for i := range tc.nodes {
				c.NodeHandler().OnAdd(&tc.nodes[i], true)
			}
			if got := c.Estimate(tc.tmpl); got != tc.want {
				t.Fatalf("Counters.Estimate = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestEstimateCapsAtMaxInt32(t *testing.T) {
	nodes := []corev1.Node{node("n1", "1000000", "1000Ti", math.MaxInt32), node("n2", "1000000", "1000Ti", math.MaxInt32)}
	if got := Estimate(nodes, nil, template("", "")); got != math.MaxInt32 {
		t.Fatalf("Estimate = %d, want MaxInt32", got)
	}
}
