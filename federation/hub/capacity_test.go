package hub

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
)

// fixedCapacity answers every estimate of a member with one number.
type fixedCapacity map[string]int32

func (f fixedCapacity) Free(_ context.Context, cluster string, _ *corev1.PodTemplateSpec) (int32, bool) {
	free, ok := f[cluster]
	return free, ok
}

// With a CapacitySource the reconciler plans from it and never lists a
// member's nodes or all its pods: only the FRS's own pods, by namespace and
// the engine's controller index (what they take is counted against the
// counters' room).
func TestCapacityFromCountersNotLists(t *testing.T) {
	noLists := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		lo := (&client.ListOptions{}).ApplyOptions(o)
		switch l.(type) {
		case *corev1.NodeList:
			t.Errorf("listed %T although counters are configured", l)
		case *corev1.PodList:
			byIndex := lo.FieldSelector != nil && !lo.FieldSelector.Empty()
			if byIndex {
				for _, r := range lo.FieldSelector.Requirements() {
					byIndex = byIndex && r.Field == engine.PodControllerIndex
				}
			}
			bySelector := lo.LabelSelector != nil && !lo.LabelSelector.Empty()
			if lo.Namespace == "" || (!byIndex && !bySelector) {
				t.Errorf("listed every pod of a member although counters are configured (%+v)", lo)
			}
		}
		return c.List(ctx, l, o...)
	}}
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, map[string]interceptor.Funcs{"a": noLists, "b": noLists})
	e.r.Capacity = fixedCapacity{"a": 1, "b": 100}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"})
	if tg["a"] != 1 || tg["b"] != 5 {
		t.Fatalf("targets = %v, want a:1 (its free capacity) b:5", tg)
	}
}

// A member whose capacity is unknown to the counters is planned as the
// list-based path plans a member it cannot read: without a capacity bound.
func TestUnknownCapacityIsUnbounded(t *testing.T) {
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, nil)
	e.r.Capacity = fixedCapacity{"b": 100}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"})
	if tg["a"] != 3 || tg["b"] != 3 {
		t.Fatalf("targets = %v, want a:3 b:3", tg)
	}
}

// A pass that commits nothing pokes the members that have not taken up
// their target (here b, with no MemberReplicaSet or report), so a poke lost
// after the commit is made good on the next pass; a member at its target is
// left alone.
func TestUnchangedPlanPokesLaggingMembers(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web", UID: "uid-1"}, 3, map[string]int32{"a": 2, "b": 2})
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: 2, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if len(e.pokes.keys) != 1 || e.pokes.keys[0].Cluster != "b" {
		t.Fatalf("poked %v, want only b (no report of its target)", e.pokes.keys)
	}
}

// The FRS's own pods in a member are its MemberReplicaSet's non-terminal
// pods and the orphans its selector matches; pods of other controllers and
// other orphans are not its own.
func TestPodsTakingRoom(t *testing.T) {
	obj := frs(4)
	mrs := &v1alpha1.MemberReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "mrs-uid"}}
	pod := func(name string, lbls map[string]string, owner types.UID, phase corev1.PodPhase) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: lbls}, Status: corev1.PodStatus{Phase: phase}}
		if owner != "" {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "x/v1", Kind: "K", Name: "o", UID: owner, Controller: ptr.To(true)}}
		}
		return p
	}
	own := obj.Spec.Selector.MatchLabels
	other := map[string]string{"app": "other"}
	for _, tc := range []struct {
		name string
		objs []client.Object
		want int32
	}{
		{"no MemberReplicaSet, no pods", nil, 0},
		{"owned pods, terminal ones left out", []client.Object{mrs,
			pod("a", own, "mrs-uid", corev1.PodRunning), pod("b", own, "mrs-uid", corev1.PodPending), pod("c", own, "mrs-uid", corev1.PodSucceeded)}, 2},
		{"orphans the selector matches count", []client.Object{mrs,
			pod("a", own, "mrs-uid", corev1.PodRunning), pod("o1", own, "", corev1.PodRunning), pod("o2", other, "", corev1.PodRunning)}, 2},
		{"another controller's pods do not", []client.Object{mrs,
			pod("a", own, "mrs-uid", corev1.PodRunning), pod("x", own, "someone-else", corev1.PodRunning)}, 1},
		{"orphans count without a MemberReplicaSet", []client.Object{pod("o1", own, "", corev1.PodFailed), pod("o2", own, "", corev1.PodRunning)}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true, obj, healthy("a"), map[string][]client.Object{"a": tc.objs}, nil)
			m, _ := e.r.Registry.Get("a")
			if got := e.r.podsTakingRoom(context.Background(), m, obj); got != tc.want {
				t.Fatalf("podsTakingRoom = %d, want %d", got, tc.want)
			}
		})
	}
}

// podReadsFail fails the test on any read of pods in a member (in a real
// member cache, the first read of a kind starts its informer).
func podReadsFail(t *testing.T, member string) interceptor.Funcs {
	return interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
			if _, ok := l.(*corev1.PodList); ok {
				t.Errorf("listed the pods of %s, whose pods are not cached", member)
			}
			return c.List(ctx, l, o...)
		},
		Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, o ...client.GetOption) error {
			if _, ok := obj.(*corev1.Pod); ok {
				t.Errorf("read a pod of %s, whose pods are not cached", member)
			}
			return c.Get(ctx, k, obj, o...)
		},
	}
}

// A member whose pods are not cached here is planned from the counters
// (its owner's published usage) with its own pods unknown, so the room is
// taken as the room beyond its report; without counters its room is
// unknown. Its pods are never read, not even with pods there to read.
func TestCapacityOfMemberWithoutPodCache(t *testing.T) {
	for _, tc := range []struct {
		name     string
		capacity CapacitySource
		want     map[string]int32
	}{
		{"counters: their room", fixedCapacity{"a": 1, "b": 100}, map[string]int32{"a": 1, "b": 5}},
		{"counters without the member: unbounded", fixedCapacity{"b": 100}, map[string]int32{"a": 3, "b": 3}},
		{"no counters: unbounded, not listed", nil, map[string]int32{"a": 3, "b": 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hubObj, pods := costOrderedOnePodsOfTwoCPU(t)
			hubObj.Spec.Placement = v1alpha1.Placement{}
			e := newEnv(t, true, hubObj, healthy("a", "b"), map[string][]client.Object{"a": pods}, map[string]interceptor.Funcs{"a": podReadsFail(t, "a")})
			if tc.capacity != nil {
				e.r.Capacity = tc.capacity
			}
			e.r.PodsCached = func(member string) bool { return member != "a" }
			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"})
			if diff := cmp.Diff(tc.want, tg); diff != "" {
				t.Fatalf("targets (-want +got):\n%s", diff)
			}
		})
	}
}

// podsTakingRoom cannot tell for a member whose pods are not cached, and
// does not look.
func TestPodsTakingRoomWithoutPodCache(t *testing.T) {
	obj := frs(4)
	pods := []client.Object{&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "o1", Labels: obj.Spec.Selector.MatchLabels}}}
	for _, tc := range []struct {
		name       string
		podsCached func(string) bool
		want       int32
	}{
		{"hook unset: counted", nil, 1},
		{"cached: counted", func(string) bool { return true }, 1},
		{"not cached: cannot tell", func(string) bool { return false }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := 0
			count := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
				listed++
				return c.List(ctx, l, o...)
			}}
			e := newEnv(t, true, obj, healthy("a"), map[string][]client.Object{"a": pods}, map[string]interceptor.Funcs{"a": count})
			e.r.PodsCached = tc.podsCached
			m, _ := e.r.Registry.Get("a")
			got := e.r.podsTakingRoom(context.Background(), m, obj)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("podsTakingRoom (-want +got):\n%s", diff)
			}
			if tc.want < 0 && listed != 0 {
				t.Fatalf("listed %d times in a member whose pods are not cached", listed)
			}
		})
	}
}
