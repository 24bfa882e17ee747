package hub

import (
	"context"
	"errors"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// refuseReplanPatches makes the hub refuse every patch that sets or clears
// AnnotationReplan while refuse is true.
func refuseReplanPatches(t *testing.T, e *env, refuse *atomic.Bool) {
	t.Helper()
	e.hub = interceptor.NewClient(e.hub.(client.WithWatch), interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			stored := &v1alpha1.FederatedReplicaSet{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), stored); err != nil {
				return err
			}
			_, had := stored.Annotations[AnnotationReplan]
			_, has := obj.GetAnnotations()[AnnotationReplan]
			if refuse.Load() && had != has {
				return errors.New("refused by the test")
			}
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	e.r.Hub = e.hub
}

// A plan made without some members' facts that cannot be marked for repair
// is not committed: the members keep their targets, the status says why and
// the error retries the pass.
func TestPlanNotCommittedWhenItCannotBeMarked(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(10, 10)}, "b": {memberMRS(10, 10)}, "c": {memberMRS(10, 10)}}
	e := newEnv(t, true, neverFRS(300), healthy("a", "b", "c"), members, nil)
	var refuse atomic.Bool
	refuse.Store(true)
	refuseReplanPatches(t, e, &refuse)
	e.r.Registered = registered("a", "b", "c")
	clk := clocktesting.NewFakeClock(now)
	e.r.Clock = clk
	held := map[string]int32{"a": 10, "b": 10, "c": 10}
	_ = e.targets.SetTargets(context.Background(), ref, 2, held)
	h := e.r.Health.(fakeHealth)
	h["b"], h["c"] = v1alpha1.ClusterHealthUnknown, v1alpha1.ClusterHealthUnknown
	var err error
	for i := 0; err == nil; i++ {
		if i > 20 {
			t.Fatal("no failed mark after the wait for facts ran out")
		}
		clk.Step(time.Second)
		_, err = e.r.Reconcile(context.Background(), req())
	}
	if !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("Reconcile error = %v, want the refused mark", err)
	}
	if tg, gen, _ := e.targets.Targets(ref); gen != 2 || !maps.Equal(tg, held) {
		t.Fatalf("committed %v (generation %d) without its repair mark, want %v kept", tg, gen, held)
	}
	got := get(t, e.hub)
	if _, ok := got.Annotations[AnnotationReplan]; ok {
		t.Fatal("repair mark set although the hub refused it")
	}
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPlanned)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "MarkFailed" {
		t.Fatalf("Planned = %+v, want False/MarkFailed", c)
	}
}

// A repair that is done but whose mark cannot be cleared ends the pass with
// the error and without a status write; the next pass clears it and writes.
func TestRepairMarkClearedBeforeStatus(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(10, 10)}, "b": {memberMRS(10, 10)}, "c": {memberMRS(10, 10)}}
	marked := frs(30, func(f *v1alpha1.FederatedReplicaSet) {
		f.Finalizers = []string{v1alpha1.FinalizerCascade}
		f.Annotations = map[string]string{AnnotationReplan: "planned without facts of: b,c"}
	})
	e := newEnv(t, true, marked, healthy("a", "b", "c"), members, nil)
	var refuse atomic.Bool
	refuse.Store(true)
	refuseReplanPatches(t, e, &refuse)
	e.r.Registered = registered("a", "b", "c")
	_ = e.targets.SetTargets(context.Background(), ref, get(t, e.hub).Generation, map[string]int32{"a": 10, "b": 10, "c": 10})

	if _, err := e.r.Reconcile(context.Background(), req()); err == nil || !strings.Contains(err.Error(), "refused by the test") {
		t.Fatalf("Reconcile error = %v, want the refused clear", err)
	}
	got := get(t, e.hub)
	if _, ok := got.Annotations[AnnotationReplan]; !ok {
		t.Fatal("repair mark gone although the hub refused the clear")
	}
	if len(got.Status.Conditions) != 0 || got.Status.ObservedGeneration != 0 {
		t.Fatalf("status written by a pass that failed to clear its mark: %+v", got.Status)
	}

	refuse.Store(false)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	got = get(t, e.hub)
	if v, ok := got.Annotations[AnnotationReplan]; ok {
		t.Fatalf("repair mark %q left after the spread was repaired", v)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPlanned); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Planned = %+v, want True once the mark is cleared", c)
	}
}
