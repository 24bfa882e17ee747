package hub

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/builder"
)

// TestConcurrentPasses: the leader plans several FederatedReplicaSets at
// once (replica/server runs the controller with more than one worker; the
// work queue never hands one object to two workers). Passes over different
// objects, with member reports arriving and some objects being deleted
// meanwhile, share the Reconciler's state (reports, status pacing, waits,
// warnings, taints, stalls, the term mark) safely under -race, and each
// object ends as a pass alone would leave it.
func TestConcurrentPasses(t *testing.T) {
	const objects, workers = 24, 8
	e := newEnv(t, true, nil, healthy("a", "b"), nil, nil)
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("web-%02d", i) }
	for i := range objects {
		f := builder.FRS("default", name(i)).Replicas(4).UID(types.UID(fmt.Sprintf("uid-%d", i))).Obj()
		if err := e.hub.Create(ctx, f); err != nil {
			t.Fatal(err)
		}
	}
	pass := func(i int) error {
		_, err := e.r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: name(i)}})
		return err
	}
	report := func(i int) {
		for _, m := range []string{"a", "b"} {
			e.r.Reports.Report(ctx, fedref.MemberObject{Cluster: m, Namespace: "default", Name: name(i)},
				engine.MemberStatus{Target: 2, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
		}
	}
	deleted := func(i int) bool { return i%6 == 5 }
	round := func(during func(i int)) {
		t.Helper()
		work := make(chan int)
		errs := make(chan error, objects)
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for i := range work {
					if during != nil {
						during(i)
					}
					if err := pass(i); err != nil {
						errs <- fmt.Errorf("%s: %w", name(i), err)
					}
				}
			})
		}
		for i := range objects {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	// Plan every object; then reports arrive and some objects are deleted
	// while the others are passed over again.
	round(nil)
	round(func(i int) {
		report(i)
		if deleted(i) {
			f := &v1alpha1.FederatedReplicaSet{}
			if err := e.hub.Get(ctx, types.NamespacedName{Namespace: "default", Name: name(i)}, f); err != nil {
				t.Error(err)
				return
			}
			if err := e.hub.Delete(ctx, f); err != nil {
				t.Error(err)
			}
		}
	})
	round(nil)

	for i := range objects {
		ref := fedref.FRS{Namespace: "default", Name: name(i)}
		tg, _, ok := e.targets.Targets(ref)
		f := &v1alpha1.FederatedReplicaSet{}
		err := e.hub.Get(ctx, types.NamespacedName{Namespace: "default", Name: name(i)}, f)
		if deleted(i) {
			if ok || err == nil {
				t.Errorf("%s: deleted, but targets %v (kept %v) and the object (read error %v) remain", name(i), tg, ok, err)
			}
			continue
		}
		if diff := cmp.Diff(map[string]int32{"a": 2, "b": 2}, tg); diff != "" {
			t.Errorf("%s: targets (-want +got):\n%s", name(i), diff)
		}
		if err != nil {
			t.Fatal(err)
		}
		if f.Status.ReadyReplicas != 4 || f.Status.ObservedGeneration != f.Generation {
			t.Errorf("%s: status ready %d at generation %d of %d, want 4 at the object's", name(i), f.Status.ReadyReplicas, f.Status.ObservedGeneration, f.Generation)
		}
	}
}
