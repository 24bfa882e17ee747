package ranking

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

type podOpt func(*corev1.Pod)

func pod(name string, opts ...podOpt) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID(name)}}
	for _, o := range opts {
		o(p)
	}
	return p
}

func onNode(n string) podOpt { return func(p *corev1.Pod) { p.Spec.NodeName = n } }
func phase(ph corev1.PodPhase) podOpt {
	return func(p *corev1.Pod) { p.Status.Phase = ph }
}
func readyAt(t time.Time) podOpt {
	return func(p *corev1.Pod) {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{
			Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t)})
	}
}
func cost(v string) podOpt {
	return func(p *corev1.Pod) { p.Annotations = map[string]string{DeletionCostAnnotation: v} }
}
func restarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: "c", RestartCount: n})
	}
}
func sidecarRestarts(n int32) podOpt {
	return func(p *corev1.Pod) {
		p.Spec.InitContainers = append(p.Spec.InitContainers,
			corev1.Container{Name: "side", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
			corev1.Container{Name: "init"})
		p.Status.InitContainerStatuses = append(p.Status.InitContainerStatuses,
			corev1.ContainerStatus{Name: "side", RestartCount: n},
			corev1.ContainerStatus{Name: "init", RestartCount: 100})
	}
}
func created(t time.Time) podOpt {
	return func(p *corev1.Pod) { p.CreationTimestamp = metav1.NewTime(t) }
}

func TestDeletionCost(t *testing.T) {
	cases := map[string]int32{
		"":            0,
		"0":           0,
		"5":           5,
		"-5":          -5,
		"+5":          0,
		"007":         0,
		"-007":        -7,
		"1.5":         0,
		"abc":         0,
		"2147483647":  2147483647,
		"2147483648":  0,
		"-2147483648": -2147483648,
		"-2147483649": 0,
	}
	for in, want := range cases {
		if got := DeletionCost(map[string]string{DeletionCostAnnotation: in}); got != want {
			t.Errorf("DeletionCost(%q) = %d, want %d", in, got, want)
		}
	}
	if got := DeletionCost(nil); got != 0 {
		t.Errorf("missing annotation = %d, want 0", got)
	}
}

// TestLess checks pairs where first must be deleted before second, and never
// the other way round (upstream TestSortingActivePodsWithRanks and
// TestGetPodsToDelete ordering cases).
func TestLess(t *testing.T) {
	t0 := now.Add(-time.Hour)
	cases := []struct {
		name          string
		first, second *corev1.Pod
		r1, r2        int
		now           time.Time
	}{
		{name: "unassigned before assigned", first: pod("a", phase(corev1.PodRunning)), second: pod("b", onNode("n"), phase(corev1.PodPending))},
		{name: "pending before unknown", first: pod("a", onNode("n"), phase(corev1.PodPending)), second: pod("b", onNode("n"), phase(corev1.PodUnknown))},
		{name: "unknown before running", first: pod("a", onNode("n"), phase(corev1.PodUnknown)), second: pod("b", onNode("n"), phase(corev1.PodRunning))},
		{name: "empty phase counts as pending", first: pod("a", onNode("n")), second: pod("b", onNode("n"), phase(corev1.PodUnknown))},
		{name: "not ready before ready", first: pod("a", onNode("n"), phase(corev1.PodRunning)), second: pod("b", onNode("n"), phase(corev1.PodRunning), readyAt(t0))},
		{name: "lower cost first", first: pod("a", onNode("n"), phase(corev1.PodRunning), readyAt(t0), cost("-1")), second: pod("b", onNode("n"), phase(corev1.PodRunning), readyAt(t0))},
		{name: "cost beats ready state is not possible: ready rule first", first: pod("a", onNode("n"), phase(corev1.PodRunning), cost("100")), second: pod("b", onNode("n"), phase(corev1.PodRunning), readyAt(t0), cost("-100"))},
		{name: "cost beats rank", first: pod("a", onNode("n"), phase(corev1.PodRunning), cost("1")), second: pod("b", onNode("n"), phase(corev1.PodRunning), cost("2")), r1: 1, r2: 5},
		{name: "invalid cost counts as zero", first: pod("a", onNode("n"), phase(corev1.PodRunning), cost("-1")), second: pod("b", onNode("n"), phase(corev1.PodRunning), cost("+5"))},
		{name: "more colocated first", first: pod("a", onNode("n"), phase(corev1.PodRunning)), second: pod("b", onNode("m"), phase(corev1.PodRunning)), r1: 3, r2: 1},
		{name: "recently ready first", first: pod("a", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-time.Minute))), second: pod("b", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-time.Hour))), now: now},
		{name: "ready same bucket: smaller uid first, restarts ignored", first: pod("a", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-60*time.Second))), second: pod("b", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-61*time.Second)), restarts(10)), now: now},
		{name: "ready without anchor: newer first", first: pod("z", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-60*time.Second))), second: pod("a", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-61*time.Second)))},
		{name: "zero ready time first", first: pod("z", onNode("n"), phase(corev1.PodRunning), readyAt(time.Time{})), second: pod("a", onNode("n"), phase(corev1.PodRunning), readyAt(now.Add(-time.Second))), now: now},
		{name: "more restarts first", first: pod("z", onNode("n"), phase(corev1.PodRunning), restarts(3)), second: pod("a", onNode("n"), phase(corev1.PodRunning), restarts(1))},
		{name: "restart count beats creation", first: pod("z", onNode("n"), phase(corev1.PodRunning), restarts(3), created(t0)), second: pod("a", onNode("n"), phase(corev1.PodRunning), created(now))},
		{name: "sidecar restarts break restart tie", first: pod("z", onNode("n"), phase(corev1.PodRunning), restarts(1), sidecarRestarts(4)), second: pod("a", onNode("n"), phase(corev1.PodRunning), restarts(1), sidecarRestarts(2))},
		{name: "plain init restarts ignored", first: pod("a", onNode("n"), phase(corev1.PodRunning), created(now.Add(-time.Second))), second: pod("b", onNode("n"), phase(corev1.PodRunning), sidecarRestarts(0), created(now.Add(-time.Hour))), now: now},
		{name: "newer creation first", first: pod("z", onNode("n"), phase(corev1.PodRunning), created(now.Add(-time.Minute))), second: pod("a", onNode("n"), phase(corev1.PodRunning), created(now.Add(-time.Hour))), now: now},
		{name: "creation same bucket: smaller uid first", first: pod("a", onNode("n"), phase(corev1.PodRunning), created(now.Add(-100*time.Second))), second: pod("b", onNode("n"), phase(corev1.PodRunning), created(now.Add(-90*time.Second))), now: now},
		{name: "zero creation first", first: pod("z", onNode("n"), phase(corev1.PodRunning)), second: pod("a", onNode("n"), phase(corev1.PodRunning), created(now.Add(-time.Hour))), now: now},
		{name: "future creation (negative age) first", first: pod("z", onNode("n"), phase(corev1.PodRunning), created(now.Add(time.Second))), second: pod("a", onNode("n"), phase(corev1.PodRunning), created(now.Add(-time.Nanosecond*3))), now: now},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !less(c.first, c.second, c.r1, c.r2, nil, nil, c.now) {
				t.Errorf("less(first, second) = false, want true")
			}
			if less(c.second, c.first, c.r2, c.r1, nil, nil, c.now) {
				t.Errorf("less(second, first) = true, want false")
			}
		})
	}
	same := pod("a", onNode("n"), phase(corev1.PodRunning))
	if less(same, same.DeepCopy(), 0, 0, nil, nil, now) {
		t.Error("identical pods must not be less")
	}
}

func TestColocationRanks(t *testing.T) {
	pods := []*corev1.Pod{pod("a", onNode("n1")), pod("b", onNode("n2")), pod("c")}
	related := []*corev1.Pod{
		pods[0], pods[1], pods[2],
		pod("x", onNode("n1")),
		pod("dead", onNode("n2"), phase(corev1.PodFailed)),
	}
	got := ColocationRanks(pods, related)
	want := []int{2, 1, 1}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("ranks = %v, want %v", got, want)
		}
	}
}

func TestPodsToDelete(t *testing.T) {
	running := func(name, node string) *corev1.Pod {
		return pod(name, onNode(node), phase(corev1.PodRunning), readyAt(now.Add(-time.Hour)))
	}
	cases := []struct {
		name    string
		active  []*corev1.Pod
		related []*corev1.Pod
		n       int
		want    []string
	}{
		{name: "unscheduled first", active: []*corev1.Pod{running("s", "n1"), pod("u", phase(corev1.PodPending))}, n: 1, want: []string{"u"}},
		{name: "pending first", active: []*corev1.Pod{running("r", "n1"), pod("p", onNode("n1"), phase(corev1.PodPending))}, n: 1, want: []string{"p"}},
		{name: "not ready first", active: []*corev1.Pod{running("r", "n1"), pod("nr", onNode("n1"), phase(corev1.PodRunning))}, n: 1, want: []string{"nr"}},
		{
			name:   "colocated first",
			active: []*corev1.Pod{running("alone", "n1"), running("dup", "n2")},
			related: []*corev1.Pod{running("alone", "n1"), running("dup", "n2"),
				running("other", "n2")},
			n: 1, want: []string{"dup"},
		},
		{name: "n equal len: no sort", active: []*corev1.Pod{running("r", "n1"), pod("u")}, n: 2, want: []string{"r", "u"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			related := c.related
			if related == nil {
				related = c.active
			}
			got := PodsToDelete(c.active, related, c.n, now, nil)
			if len(got) != len(c.want) {
				t.Fatalf("got %d pods, want %v", len(got), c.want)
			}
			for i := range got {
				if got[i].Name != c.want[i] {
					t.Fatalf("got %s at %d, want %v", got[i].Name, i, c.want)
				}
			}
		})
	}
}

func BenchmarkRank10000Pods(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]*corev1.Pod, 10000)
	phases := []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodRunning, corev1.PodUnknown}
	for i := range base {
		opts := []podOpt{phase(phases[rng.IntN(len(phases))]), created(now.Add(-time.Duration(rng.Int64N(int64(48 * time.Hour)))))}
		if rng.IntN(10) > 0 {
			opts = append(opts, onNode(fmt.Sprintf("node-%d", rng.IntN(100))))
		}
		if rng.IntN(2) == 0 {
			opts = append(opts, readyAt(now.Add(-time.Duration(rng.Int64N(int64(24*time.Hour))))))
		}
		if rng.IntN(5) == 0 {
			opts = append(opts, cost(fmt.Sprint(rng.IntN(10)-5)))
		}
		opts = append(opts, restarts(int32(rng.IntN(3))))
		base[i] = pod(fmt.Sprintf("pod-%05d", i), opts...)
	}
	pods := make([]*corev1.Pod, len(base))
	b.ReportAllocs()
	for b.Loop() {
		copy(pods, base)
		PodsToDelete(pods, base, 5000, now, nil)
	}
}
