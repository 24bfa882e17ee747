package capacity

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// quantities compares quantities by value: the format a sum keeps depends
// on the order it was added in, the value does not.
var quantities = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmpopts.EquateEmpty(),
}

// podFed returns counters fed nodes and pods through their handlers, as a
// member's owner keeps them.
func podFed(nodes []corev1.Node, pods []corev1.Pod) *Counters {
	c := NewCounters()
	for i := range nodes {
		c.NodeHandler().OnAdd(&nodes[i], true)
	}
	for i := range pods {
		c.PodHandler().OnAdd(&pods[i], true)
	}
	return c
}

// usageFed returns counters fed the nodes and, instead of pods, u sent
// through its encoding, as the leader keeps a member it does not own.
func usageFed(t *testing.T, nodes []corev1.Node, u Usage) *Counters {
	t.Helper()
	raw, err := EncodeUsage(u)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := DecodeUsage(raw)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounters()
	for i := range nodes {
		c.NodeHandler().OnAdd(&nodes[i], true)
	}
	if err := c.SetUsage(decoded); err != nil {
		t.Fatal(err)
	}
	return c
}

// sameAnswers fails unless both counters estimate every shape alike and
// summarise alike.
func sameAnswers(t *testing.T, what string, fed, published *Counters, templates []*corev1.PodTemplateSpec) {
	t.Helper()
	for i, tmpl := range templates {
		if got, want := published.Estimate(tmpl), fed.Estimate(tmpl); got != want {
			t.Errorf("%s, template %d: usage-fed Estimate = %d, pod-fed %d", what, i, got, want)
		}
	}
	if diff := cmp.Diff(fed.Summary(), published.Summary(), quantities); diff != "" {
		t.Errorf("%s: Summary, pod-fed (-) vs usage-fed (+):\n%s", what, diff)
	}
}

// TestUsageFedMatchesPodFed: counters fed a member's nodes and the Usage of
// counters fed its nodes and pods answer exactly as those do.
func TestUsageFedMatchesPodFed(t *testing.T) {
	tainted := func(n *corev1.Node) {
		n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	zoneB := func(n *corev1.Node) { n.Labels["zone"] = "b" }
	sidecar := pod("n1", "100m", "64Mi", corev1.PodRunning)
	always := corev1.ContainerRestartPolicyAlways
	sidecar.Spec.InitContainers = []corev1.Container{{RestartPolicy: &always, Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}}}}
	sidecar.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Mi")}
	templates := append([]*corev1.PodTemplateSpec{}, shapes...)
	templates = append(templates, template("2", "4Gi"), template("", "", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} }))
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		pods  []corev1.Pod
	}{
		{"empty member", nil, nil},
		{"nodes, no pods", []corev1.Node{node("n1", "4", "8Gi", 10), node("n2", "2", "4Gi", 3)}, nil},
		{"requests bound and pending", []corev1.Node{node("n1", "4", "8Gi", 10), node("n2", "2", "4Gi", 3)}, []corev1.Pod{
			pod("n1", "1", "1Gi", corev1.PodRunning), pod("n1", "1500m", "100M", corev1.PodPending),
			pod("n2", "0.0005", "1", corev1.PodRunning), pod("", "1", "2Gi", corev1.PodPending), pod("", "100m", "0", ""),
		}},
		{"terminal pods take nothing", []corev1.Node{node("n1", "4", "8Gi", 10)}, []corev1.Pod{
			pod("n1", "3", "1Gi", corev1.PodSucceeded), pod("n1", "3", "1Gi", corev1.PodFailed), pod("", "3", "1Gi", corev1.PodFailed),
		}},
		{"pod-count limit reached", []corev1.Node{node("n1", "64", "256Gi", 2), node("n2", "64", "256Gi", 3)}, []corev1.Pod{
			pod("n1", "100m", "1Mi", corev1.PodRunning), pod("n1", "100m", "1Mi", corev1.PodRunning), pod("n2", "100m", "1Mi", corev1.PodRunning),
		}},
		{"taints and selectors", []corev1.Node{node("n1", "4", "8Gi", 10, tainted), node("n2", "4", "8Gi", 10, zoneB), node("n3", "8", "8Gi", 10, zoneB, tainted)}, []corev1.Pod{
			pod("n1", "1", "1Gi", corev1.PodRunning), pod("n2", "3", "1Gi", corev1.PodRunning), pod("n3", "500m", "7Gi", corev1.PodRunning),
		}},
		{"overcommitted node and a node not seen yet", []corev1.Node{node("n1", "1", "1Gi", 10)}, []corev1.Pod{
			pod("n1", "2", "2Gi", corev1.PodRunning), pod("n9", "1", "1Gi", corev1.PodRunning),
		}},
		{"sidecars and overhead", []corev1.Node{node("n1", "4", "8Gi", 10)}, []corev1.Pod{sidecar}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fed := podFed(tc.nodes, tc.pods)
			published := usageFed(t, tc.nodes, fed.Usage())
			sameAnswers(t, tc.name, fed, published, templates)
			// And both as the list-based functions give.
			if diff := cmp.Diff(Summarize(tc.nodes, tc.pods), published.Summary(), quantities); diff != "" {
				t.Errorf("Summary, Summarize (-) vs usage-fed (+):\n%s", diff)
			}
		})
	}
}

// TestUsageFedMatchesPodFedRandomly is the same property after random
// sequences of informer events (the world of TestCountersMatchLists:
// pods on nodes that do not exist, tombstones, resizes, finished pods).
func TestUsageFedMatchesPodFedRandomly(t *testing.T) {
	for seed := uint64(1); seed <= 30; seed++ {
		w := newWorld(seed)
		for step := range 300 {
			w.step()
			if step%25 != 24 {
				continue
			}
			nodes, _ := w.lists()
			published := usageFed(t, nodes, w.c.Usage())
			sameAnswers(t, fmt.Sprintf("seed %d step %d", seed, step), w.c, published, shapes)
			if t.Failed() {
				return
			}
		}
	}
}

// TestUsageSnapshot: Usage is a copy (later events leave it as it was),
// and SetUsage replaces the whole pod-derived part.
func TestUsageSnapshot(t *testing.T) {
	c := podFed([]corev1.Node{node("n1", "4", "8Gi", 10)}, []corev1.Pod{pod("n1", "1", "1Gi", corev1.PodRunning), pod("", "1", "1Gi", corev1.PodPending)})
	snap := c.Usage()
	want := Usage{
		Nodes:   map[string]NodeUsage{"n1": {Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}},
		Pending: NodeUsage{Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
	}
	if diff := cmp.Diff(want, snap, quantities); diff != "" {
		t.Fatalf("Usage (-want +got):\n%s", diff)
	}
	more := pod("n1", "2", "1Gi", corev1.PodRunning)
	c.PodHandler().OnAdd(&more, false)
	if diff := cmp.Diff(want, snap, quantities); diff != "" {
		t.Fatalf("a later pod changed the snapshot (-want +got):\n%s", diff)
	}
	tmpl := template("1", "")
	if got := c.Estimate(tmpl); got != 0 {
		t.Fatalf("Estimate = %d, want 0 (4 cpu: 3 bound, 1 pending)", got)
	}
	if err := c.SetUsage(Usage{}); err != nil {
		t.Fatal(err)
	}
	if got := c.Estimate(tmpl); got != 4 {
		t.Fatalf("Estimate after SetUsage(empty) = %d, want 4 (the remembered estimate must not survive)", got)
	}
	if err := c.SetUsage(Usage{Nodes: map[string]NodeUsage{"n1": {Pods: -1}}}); err == nil {
		t.Fatal("SetUsage took a negative pod count")
	}
	if got := c.Estimate(tmpl); got != 4 {
		t.Fatalf("Estimate after a refused SetUsage = %d, want 4 (unchanged)", got)
	}
}

func TestUsageValidate(t *testing.T) {
	cpu := func(s string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(s)}
	}
	for _, tc := range []struct {
		name string
		u    Usage
		want string // "" for valid
	}{
		{"zero", Usage{}, ""},
		{"counted", Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 2, Requests: cpu("1")}}, Pending: NodeUsage{Pods: 1}}, ""},
		{"empty node name", Usage{Nodes: map[string]NodeUsage{"": {Pods: 1}}}, "a node with an empty name"},
		{"negative pods", Usage{Nodes: map[string]NodeUsage{"n1": {Pods: -1}}}, `node "n1": negative pod count -1`},
		{"negative pending", Usage{Pending: NodeUsage{Pods: -3}}, "pending pods: negative pod count -3"},
		{"negative request", Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 1, Requests: cpu("-1")}}}, `node "n1": negative cpu request -1`},
		{"requests without pods", Usage{Pending: NodeUsage{Requests: cpu("1")}}, "pending pods: cpu requested by no pod"},
		{"empty resource name", Usage{Pending: NodeUsage{Pods: 1, Requests: corev1.ResourceList{"": resource.MustParse("1")}}}, "pending pods: a request with an empty resource name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ""
			if err := tc.u.Validate(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTrackerRecordsUsage: the tracker keeps a valid usage per member, as
// a copy, until forgotten; an invalid one is refused and not kept.
func TestTrackerRecordsUsage(t *testing.T) {
	tr := NewTracker()
	u := Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	if err := tr.SetUsage("m", Usage{Nodes: map[string]NodeUsage{"n1": {Pods: -2}}}); err == nil ||
		err.Error() != `setting the usage of m: node "n1": negative pod count -2` {
		t.Fatalf("SetUsage of a negative count: %v", err)
	}
	if _, ok := tr.usages["m"]; ok {
		t.Fatal("a refused usage was recorded")
	}
	if err := tr.SetUsage("m", u); err != nil {
		t.Fatal(err)
	}
	u.Nodes["n1"].Requests[corev1.ResourceCPU] = resource.MustParse("7")
	want := Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	if diff := cmp.Diff(want, tr.usages["m"], quantities); diff != "" {
		t.Fatalf("recorded usage (-want +got), changed through the caller's map:\n%s", diff)
	}
	if _, ok := tr.Free(t.Context(), "m", template("1", "")); ok {
		t.Fatal("Free answered for a member not engaged here")
	}
	if _, ok := tr.Usage("m"); ok {
		t.Fatal("Usage answered for a member not engaged here")
	}
	tr.ForgetUsage("m")
	if _, ok := tr.usages["m"]; ok {
		t.Fatal("ForgetUsage kept the usage")
	}
}
