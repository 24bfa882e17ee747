package capacity

import (
	"fmt"
	"math/rand/v2"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

// world is the objects an informer would hold, changed by random events
// that are also fed to Counters.
type world struct {
	rnd   *rand.Rand
	nodes map[string]*corev1.Node
	pods  map[types.UID]*corev1.Pod
	c     *Counters
	seq   int
}

func newWorld(seed uint64) *world {
	return &world{rnd: rand.New(rand.NewPCG(seed, 1)), nodes: map[string]*corev1.Node{}, pods: map[types.UID]*corev1.Pod{}, c: NewCounters()}
}

var (
	cpus     = []string{"0", "100m", "250m", "1", "1500m", "0.0005"}
	mems     = []string{"0", "64Mi", "1Gi", "100M", "3Gi"}
	phases   = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, ""}
	nodeName = []string{"n0", "n1", "n2", "n3", "n4", "gone"}
)

func (w *world) pick(xs []string) string { return xs[w.rnd.IntN(len(xs))] }

func (w *world) randomNode(name string) *corev1.Node {
	n := node(name, w.pick([]string{"2", "4", "7500m", "16"}), w.pick([]string{"4Gi", "16Gi", "10G"}), int64(1+w.rnd.IntN(40)))
	n.ResourceVersion = fmt.Sprint(w.seq)
	if w.rnd.IntN(5) == 0 {
		n.Status.Conditions[0].Status = corev1.ConditionFalse
	}
	if w.rnd.IntN(6) == 0 {
		n.Spec.Unschedulable = true
	}
	if w.rnd.IntN(4) == 0 {
		n.Spec.Taints = []corev1.Taint{{Key: "gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	if w.rnd.IntN(3) == 0 {
		n.Labels["zone"] = "b"
	}
	if w.rnd.IntN(5) == 0 {
		delete(n.Status.Allocatable, corev1.ResourceMemory)
	}
	return &n
}

func (w *world) randomPod(uid types.UID) *corev1.Pod {
	p := pod("", w.pick(cpus), w.pick(mems), phases[w.rnd.IntN(len(phases))])
	p.UID, p.Name = uid, string(uid)
	if w.rnd.IntN(4) != 0 {
		p.Spec.NodeName = w.pick(nodeName)
	}
	if w.rnd.IntN(6) == 0 {
		p.Spec.InitContainers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(w.pick(cpus))}}}}
	}
	if w.rnd.IntN(8) == 0 {
		p.Spec.Overhead = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("10Mi")}
	}
	return &p
}

// step applies one random event to the world and the counters.
func (w *world) step() {
	w.seq++
	nodes, pods := w.c.NodeHandler(), w.c.PodHandler()
	switch op := w.rnd.IntN(10); {
	case op < 2: // node added or updated
		name := w.pick(nodeName[:5])
		n := w.randomNode(name)
		if old, ok := w.nodes[name]; ok {
			nodes.OnUpdate(old, n)
		} else {
			nodes.OnAdd(n, false)
		}
		w.nodes[name] = n
	case op == 2: // node deleted, sometimes seen only as a tombstone
		for name, n := range w.nodes {
			if w.rnd.IntN(2) == 0 {
				nodes.OnDelete(n)
			} else {
				nodes.OnDelete(toolscache.DeletedFinalStateUnknown{Key: name, Obj: n})
			}
			delete(w.nodes, name)
			break
		}
	case op < 6: // pod added
		uid := types.UID(fmt.Sprintf("p%d", w.seq))
		p := w.randomPod(uid)
		pods.OnAdd(p, false)
		w.pods[uid] = p
	case op < 9: // pod updated: bound, finished, resized or unchanged
		for uid, old := range w.pods {
			cur := old.DeepCopy()
			switch w.rnd.IntN(4) {
			case 0:
				cur.Spec.NodeName = w.pick(nodeName)
			case 1:
				cur.Status.Phase = phases[w.rnd.IntN(len(phases))]
			case 2:
				cur.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse(w.pick(cpus))
			}
			pods.OnUpdate(old, cur)
			w.pods[uid] = cur
			break
		}
	default: // pod deleted
		for uid, p := range w.pods {
			if w.rnd.IntN(2) == 0 {
				pods.OnDelete(p)
			} else {
				pods.OnDelete(toolscache.DeletedFinalStateUnknown{Key: string(uid), Obj: p})
			}
			delete(w.pods, uid)
			break
		}
	}
}

func (w *world) lists() ([]corev1.Node, []corev1.Pod) {
	var nodes []corev1.Node
	for _, n := range w.nodes {
		nodes = append(nodes, *n)
	}
	var pods []corev1.Pod
	for _, p := range w.pods {
		pods = append(pods, *p)
	}
	return nodes, pods
}

var shapes = []*corev1.PodTemplateSpec{
	template("100m", "64Mi"),
	template("", ""),
	template("1", "1Gi"),
	template("250m", "", func(s *corev1.PodSpec) {
		s.Tolerations = []corev1.Toleration{{Key: "gpu", Operator: corev1.TolerationOpExists}}
	}),
	template("100m", "100M", func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{"zone": "b"} }),
	template("100m", "", func(s *corev1.PodSpec) {
		s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{Key: "zone", Operator: corev1.NodeSelectorOpIn, Values: []string{"a"}}}}},
		}}}
	}),
	template("0.0005", "1"),
}

// TestCountersMatchLists is the property the counters exist for: after any
// sequence of informer events, their estimate and summary equal what the
// list-based functions give for the objects the informer holds.
func TestCountersMatchLists(t *testing.T) {
	for seed := uint64(1); seed <= 60; seed++ {
		w := newWorld(seed)
		for step := range 400 {
			w.step()
			if step%20 != 19 {
				continue
			}
			nodes, pods := w.lists()
			for i, tmpl := range shapes {
				want := Estimate(nodes, pods, tmpl)
				if got := w.c.Estimate(tmpl); got != want {
					t.Fatalf("seed %d step %d template %d: Counters.Estimate = %d, list Estimate = %d", seed, step, i, got, want)
				}
				// Asked again with nothing changed: the remembered answer.
				if got := w.c.Estimate(tmpl); got != want {
					t.Fatalf("seed %d step %d template %d: remembered estimate = %d, want %d", seed, step, i, got, want)
				}
			}
			if got, want := w.c.Summary(), Summarize(nodes, pods); !sameSummary(got, want) {
				t.Fatalf("seed %d step %d: Counters.Summary = %+v, Summarize = %+v", seed, step, got, want)
			}
		}
	}
}

func sameSummary(a, b Summary) bool {
	return a.Nodes == b.Nodes && a.Ready == b.Ready && sameList(a.Allocatable, b.Allocatable) && sameList(a.Free, b.Free)
}

func TestCountersIgnoreStatusChurn(t *testing.T) {
	c := NewCounters()
	n := node("n1", "4", "8Gi", 10)
	c.NodeHandler().OnAdd(&n, true)
	p := pod("n1", "1", "1Gi", corev1.PodPending)
	c.PodHandler().OnAdd(&p, true)
	tmpl := template("1", "")
	if got := c.Estimate(tmpl); got != 3 {
		t.Fatalf("Estimate = %d, want 3", got)
	}
	v := c.version
	running := p.DeepCopy()
	running.Status.Phase = corev1.PodRunning
	running.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	c.PodHandler().OnUpdate(&p, running)
	beat := n.DeepCopy()
	beat.Status.Conditions[0].LastHeartbeatTime = metav1.Now()
	c.NodeHandler().OnUpdate(&n, beat)
	if c.version != v {
		t.Fatalf("a status-only pod update or node heartbeat changed the version (%d -> %d)", v, c.version)
	}
	done := running.DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	c.PodHandler().OnUpdate(running, done)
	if got := c.Estimate(tmpl); got != 4 {
		t.Fatalf("Estimate after the pod finished = %d, want 4", got)
	}
}
