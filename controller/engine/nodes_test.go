package engine

import (
	"context"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestPodSecurityLabels(t *testing.T) {
	cases := []struct {
		name string
		in   map[string]string
		want map[string]string
	}{
		{"nil", nil, map[string]string{}},
		{"only pod security kept", map[string]string{
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit-version": "v1.36",
			"kubernetes.io/metadata.name": "x", "team": "a", "pod-security.kubernetes.io": "no-slash-suffix",
		}, map[string]string{"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/audit-version": "v1.36"}},
		{"look-alike prefix dropped", map[string]string{"example.com/pod-security.kubernetes.io/enforce": "privileged"}, map[string]string{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := PodSecurityLabels(c.in)
			if got == nil || !maps.Equal(got, c.want) {
				t.Errorf("PodSecurityLabels = %v, want %v", got, c.want)
			}
		})
	}
}

func node(name string, labels map[string]string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

// TestSyncNodeCost checks that the engine ranks by the MemberReplicaSet's
// nodeCost with nodes from its node reader, and records a changed nodeCost
// in the owner's spec.
func TestSyncNodeCost(t *testing.T) {
	nc := &v1alpha1.NodeCost{Key: "capacity", Values: []string{"spot", "reserved"}}
	cases := []struct {
		name     string
		nodeCost *v1alpha1.NodeCost
		// nodes: pod a on "res" (colocated with b), b on "res", c on "spot".
		nodes    []client.Object
		wantGone string
	}{
		{"spot pod first", nc, []client.Object{node("res", map[string]string{"capacity": "reserved"}), node("spot", map[string]string{"capacity": "spot"})}, "c"},
		{"off: colocated pod first", nil, []client.Object{node("res", map[string]string{"capacity": "reserved"}), node("spot", map[string]string{"capacity": "spot"})}, "a|b"},
		{"nodes not cached: upstream order", nc, nil, "a|b"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := workload(2)
			w.NodeCost = c.nodeCost
			m := mrsFor(w)
			a, b, cc := ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")
			a.Spec.NodeName, b.Spec.NodeName, cc.Spec.NodeName = "res", "res", "spot"
			var nodeGets int
			h := newHarness(t, w, hopts{objs: append([]client.Object{a, b, cc}, c.nodes...), funcs: interceptor.Funcs{
				Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
					if _, ok := obj.(*corev1.Node); ok {
						nodeGets++
					}
					return cl.Get(ctx, key, obj, opts...)
				}}})
			if _, err := h.sync(); err != nil {
				t.Fatal(err)
			}
			left := map[string]bool{}
			for _, p := range h.pods() {
				left[p.Name] = true
			}
			if len(left) != 2 {
				t.Fatalf("pods left = %v, want 2", left)
			}
			gone := ""
			for _, n := range []string{"a", "b", "c"} {
				if !left[n] {
					gone = n
				}
			}
			if c.wantGone == "a|b" && gone != "a" && gone != "b" || c.wantGone != "a|b" && gone != c.wantGone {
				t.Fatalf("deleted %q, want %s", gone, c.wantGone)
			}
			if c.nodeCost == nil && nodeGets != 0 {
				t.Fatalf("node reads with node cost off: %d", nodeGets)
			}
			if c.nodeCost != nil && nodeGets > 2 {
				t.Fatalf("node reads = %d, want at most one per node", nodeGets)
			}
		})
	}

	t.Run("changed nodeCost updates the owner", func(t *testing.T) {
		w := workload(0)
		h := newHarness(t, w, hopts{})
		w.NodeCost = &v1alpha1.NodeCost{Key: "cost", Integer: true}
		if _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
		if got := h.owner().Spec.NodeCost; got == nil || got.Key != "cost" || !got.Integer {
			t.Fatalf("owner spec.nodeCost = %+v, want the workload's", got)
		}
	})
}

func TestNodeCostFor(t *testing.T) {
	own := &v1alpha1.NodeCost{Key: "own", Integer: true}
	def := &v1alpha1.NodeCost{Key: "default", Values: []string{"spot"}}
	with := &v1alpha1.FederatedReplicaSet{Spec: v1alpha1.FederatedReplicaSetSpec{ScaleDown: &v1alpha1.ScaleDown{NodeCost: own}}}
	without := &v1alpha1.FederatedReplicaSet{}
	emptyScaleDown := &v1alpha1.FederatedReplicaSet{Spec: v1alpha1.FederatedReplicaSetSpec{ScaleDown: &v1alpha1.ScaleDown{}}}
	cases := []struct {
		name string
		frs  *v1alpha1.FederatedReplicaSet
		def  *v1alpha1.NodeCost
		want *v1alpha1.NodeCost
	}{
		{"own wins over default", with, def, own},
		{"default when unset", without, def, def},
		{"default when scaleDown has no nodeCost", emptyScaleDown, def, def},
		{"none", without, nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NodeCostFor(c.frs, c.def)
			if !equality.Semantic.DeepEqual(got, c.want) {
				t.Fatalf("NodeCostFor = %+v, want %+v", got, c.want)
			}
			if got != nil && (got == own || got == def) {
				t.Fatal("NodeCostFor must return a copy")
			}
		})
	}
}
