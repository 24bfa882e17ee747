package hub

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// fixedCapacity answers every estimate of a member with one number.
type fixedCapacity map[string]int32

func (f fixedCapacity) Free(_ context.Context, cluster string, _ *corev1.PodTemplateSpec) (int32, bool) {
	free, ok := f[cluster]
	return free, ok
}

// With a CapacitySource the reconciler plans from it and never lists a
// member's nodes or pods.
func TestCapacityFromCountersNotLists(t *testing.T) {
	noLists := interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
		switch l.(type) {
		case *corev1.PodList, *corev1.NodeList:
			t.Errorf("listed %T although counters are configured", l)
		}
		return c.List(ctx, l, o...)
	}}
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, map[string]interceptor.Funcs{"a": noLists, "b": noLists})
	e.r.Capacity = fixedCapacity{"a": 1, "b": 100}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	tg, _, _ := e.targets.Targets(FRSRef{Namespace: "default", Name: "web"})
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
	tg, _, _ := e.targets.Targets(FRSRef{Namespace: "default", Name: "web"})
	if tg["a"] != 3 || tg["b"] != 3 {
		t.Fatalf("targets = %v, want a:3 b:3", tg)
	}
}
