package worker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/ranking"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

// Node label keys of the node cost test: a capacity type, as Karpenter sets,
// and an integer cost for the integer form.
const (
	capacityKey = "example.com/capacity-type"
	costKey     = "example.com/free-cost"
)

var (
	byCapacity = &v1alpha1.NodeCost{Key: capacityKey, Values: []string{"spot", "on-demand", "reserved"}}
	byInteger  = &v1alpha1.NodeCost{Key: costKey, Integer: true}
)

// placed is one pod a case creates before the scale-down, and what must
// happen to it.
type placed struct {
	// node is a key of the test's node table; "" leaves the pod unassigned.
	node string
	// notReady marks the pod Running but not Ready.
	notReady bool
	// cost is the pod-deletion-cost annotation, "" for none.
	cost string
	// fate: 'd' must be deleted, 'k' must be kept, '?' either (a tie the
	// rules leave open); the number deleted is always 6.
	fate byte
}

func pods(n int, p placed) []placed { return slices.Repeat([]placed{p}, n) }

// TestIntegrationNodeCostScaleDown scales 10 adopted pods to 4 on a real
// member whose kwok nodes are labelled by cost tier: with node cost on, pods
// on pay-as-you-go nodes leave first while readiness, the deletion-cost
// annotation and the later upstream rules keep their place; with it off the
// choice is upstream's.
func TestIntegrationNodeCostScaleDown(t *testing.T) {
	e := startEnv(t, envOpts{kwokNodes: 4, createNamespaces: true})
	ctx := context.Background()
	// Four kwok nodes labelled by tier, and one node no kubelet (nor kwok)
	// serves, whose pods the test marks Running but not Ready.
	nodes := map[string]string{"spot": e.c.NodeName(0), "od": e.c.NodeName(1), "res0": e.c.NodeName(2), "res1": e.c.NodeName(3), "plain": "plain-reserved"}
	labels := map[string]map[string]string{
		"spot":  {capacityKey: "spot", costKey: "5"},
		"od":    {capacityKey: "on-demand", costKey: "7"},
		"res0":  {capacityKey: "reserved", costKey: "50"},
		"res1":  {capacityKey: "reserved"},
		"plain": {capacityKey: "reserved", costKey: "50"},
	}
	for k, name := range nodes {
		if k == "plain" {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels[k]}}
			if err := e.cl.Create(ctx, n); err != nil {
				t.Fatalf("creating node %s: %v", name, err)
			}
			continue
		}
		n := &corev1.Node{}
		if err := e.cl.Get(ctx, types.NamespacedName{Name: name}, n); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(n.DeepCopy())
		for lk, lv := range labels[k] {
			n.Labels[lk] = lv
		}
		if err := e.cl.Patch(ctx, n, patch); err != nil {
			t.Fatalf("labelling node %s: %v", name, err)
		}
	}

	cases := []struct {
		name     string
		nodeCost *v1alpha1.NodeCost
		pods     []placed
	}{
		{
			name: "pay-as-you-go first", nodeCost: byCapacity,
			pods: slices.Concat(pods(2, placed{node: "spot", fate: 'd'}), pods(3, placed{node: "od", fate: 'd'}),
				pods(3, placed{node: "res0", fate: '?'}), pods(2, placed{node: "res1", fate: 'k'})),
		},
		{
			name: "off: upstream colocation", nodeCost: nil,
			pods: slices.Concat(pods(3, placed{node: "spot", fate: 'd'}), pods(2, placed{node: "od", fate: 'k'}),
				pods(3, placed{node: "res0", fate: 'd'}), pods(2, placed{node: "res1", fate: 'k'})),
		},
		{
			name: "unassigned and not ready before cheap nodes", nodeCost: byCapacity,
			pods: slices.Concat(pods(1, placed{fate: 'd'}), pods(2, placed{node: "plain", notReady: true, fate: 'd'}),
				pods(3, placed{node: "spot", fate: 'd'}), pods(4, placed{node: "res0", fate: 'k'})),
		},
		{
			name: "off: unassigned, not ready, then colocation", nodeCost: nil,
			pods: slices.Concat(pods(1, placed{fate: 'd'}), pods(2, placed{node: "plain", notReady: true, fate: 'd'}),
				pods(3, placed{node: "spot", fate: 'k'}), pods(4, placed{node: "res0", fate: '?'})),
		},
		{
			name: "deletion cost annotation wins over the tier", nodeCost: byCapacity,
			pods: slices.Concat(pods(3, placed{node: "spot", cost: "100", fate: 'k'}), pods(2, placed{node: "od", fate: 'd'}),
				pods(3, placed{node: "res0", fate: 'd'}), pods(1, placed{node: "res1", cost: "-10", fate: 'd'}),
				pods(1, placed{node: "res1", fate: 'k'})),
		},
		{
			name: "integer label, unlabelled node last", nodeCost: byInteger,
			pods: slices.Concat(pods(2, placed{node: "spot", fate: 'd'}), pods(2, placed{node: "od", fate: 'd'}),
				pods(3, placed{node: "res0", fate: '?'}), pods(3, placed{node: "res1", fate: 'k'})),
		},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			app := fmt.Sprintf("nodecost-%d", i)
			created := make([]string, len(c.pods))
			for j, pl := range c.pods {
				created[j] = e.placePod(app, j, pl, nodes)
			}
			e.waitPlaced(app, c.pods, created)
			getsBefore := e.nodeGets.Load()
			e.set(app, 4, func(w *engine.Workload) { w.NodeCost = c.nodeCost })
			mrs := e.converged(app, 4)
			if got := mrs.Spec.NodeCost; !equalNodeCost(got, c.nodeCost) {
				t.Fatalf("MemberReplicaSet spec.nodeCost = %+v, want %+v", got, c.nodeCost)
			}
			active, _ := e.owned(app)
			kept := map[string]bool{}
			for _, p := range active {
				kept[p.Name] = true
			}
			var wrong []string
			for j, pl := range c.pods {
				switch {
				case pl.fate == 'd' && kept[created[j]]:
					wrong = append(wrong, fmt.Sprintf("%s (node %q cost %q notReady %v) kept, want deleted", created[j], pl.node, pl.cost, pl.notReady))
				case pl.fate == 'k' && !kept[created[j]]:
					wrong = append(wrong, fmt.Sprintf("%s (node %q cost %q notReady %v) deleted, want kept", created[j], pl.node, pl.cost, pl.notReady))
				}
			}
			if len(wrong) > 0 {
				t.Fatalf("scale-down 10 -> 4 chose wrongly:\n%s", strings.Join(wrong, "\n"))
			}
			if n := e.nodeGets.Load() - getsBefore; n != 0 {
				t.Fatalf("scale-down made %d node GETs, want 0 (nodes come from the informer)", n)
			}
		})
	}
}

func equalNodeCost(a, b *v1alpha1.NodeCost) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Key == b.Key && a.Integer == b.Integer && slices.Equal(a.Values, b.Values)
}

// placePod creates an orphan pod the engine will adopt, bound to the node
// pl names (kwok runs it), or unassigned.
func (e *env) placePod(app string, j int, pl placed, nodes map[string]string) string {
	e.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("%s-%02d", app, j), Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			NodeName:   nodes[pl.node],
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			// The plain node never reports, so the node lifecycle controller
			// taints it unreachable: its pods must stay however slow the test.
			Tolerations: []corev1.Toleration{testcluster.KwokToleration,
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
	if pl.cost != "" {
		p.Annotations = map[string]string{ranking.DeletionCostAnnotation: pl.cost}
	}
	if err := e.cl.Create(context.Background(), p); err != nil {
		e.t.Fatalf("creating pod %s: %v", p.Name, err)
	}
	return p.Name
}

// waitPlaced waits until every pod is in the state its case needs: Running
// and Ready on kwok nodes, Running and not Ready on the plain node (set by
// the test), Pending when unassigned.
func (e *env) waitPlaced(app string, pls []placed, names []string) {
	e.t.Helper()
	for j, pl := range pls {
		if pl.notReady {
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: names[j]}}
			e.setPodStatus(p, func(p *corev1.Pod) {
				p.Status.Phase = corev1.PodRunning
				p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()}}
			})
		}
	}
	e.eventually(app+" pods placed", 60*time.Second, func() (bool, string) {
		for j, pl := range pls {
			p := &corev1.Pod{}
			if err := e.cl.Get(context.Background(), types.NamespacedName{Namespace: e.ns, Name: names[j]}, p); err != nil {
				return false, err.Error()
			}
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = c.Status == corev1.ConditionTrue
				}
			}
			switch {
			case pl.node == "" && p.Status.Phase != corev1.PodPending:
				return false, fmt.Sprintf("%s phase %s, want Pending", p.Name, p.Status.Phase)
			case pl.node != "" && p.Status.Phase != corev1.PodRunning:
				return false, fmt.Sprintf("%s phase %s, want Running", p.Name, p.Status.Phase)
			case pl.node != "" && ready == pl.notReady:
				return false, fmt.Sprintf("%s ready=%v, want %v", p.Name, ready, !pl.notReady)
			}
		}
		return true, ""
	})
}

// TestIntegrationNamespacePodSecurityLabels checks that a namespace the
// engine creates in a member carries the hub namespace's Pod Security labels
// and no other hub label.
func TestIntegrationNamespacePodSecurityLabels(t *testing.T) {
	e := startEnv(t, envOpts{createNamespaces: true})
	ctx := context.Background()
	const ns, name = "psa-team", "psa"
	k := fedref.MemberObject{Cluster: member, Namespace: ns, Name: name}
	w := testworkload.Workload(k, 1)
	w.NamespaceLabels = map[string]string{
		"pod-security.kubernetes.io/enforce":         "baseline",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		"kubernetes.io/metadata.name":                ns,
		"team":                                       "payments",
	}
	e.src.Set(k, w)
	e.mgr.Enqueue(k)

	got := &corev1.Namespace{}
	e.eventually("namespace created", 60*time.Second, func() (bool, string) {
		err := e.cl.Get(ctx, types.NamespacedName{Name: ns}, got)
		if apierrors.IsNotFound(err) {
			return false, "not found"
		}
		return err == nil, fmt.Sprint(err)
	})
	want := map[string]string{
		"pod-security.kubernetes.io/enforce":         "baseline",
		"pod-security.kubernetes.io/enforce-version": "latest",
		"pod-security.kubernetes.io/warn":            "restricted",
		v1alpha1.LabelManagedBy:                      v1alpha1.ManagedByValue,
		"kubernetes.io/metadata.name":                ns, // set by the API server
	}
	for k, v := range want {
		if got.Labels[k] != v {
			t.Errorf("namespace label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	if _, ok := got.Labels["team"]; ok {
		t.Errorf("hub label team copied into the member: %v", got.Labels)
	}
	// The MemberReplicaSet and its pod follow in the new namespace: the
	// template meets baseline.
	e.eventually("pod created under baseline", 60*time.Second, func() (bool, string) {
		var l corev1.PodList
		if err := e.cl.List(ctx, &l, client.InNamespace(ns), client.MatchingLabels(w.Selector.MatchLabels)); err != nil {
			return false, err.Error()
		}
		return len(l.Items) == 1, fmt.Sprintf("%d pods", len(l.Items))
	})
}
