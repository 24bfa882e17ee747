package hub

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/test/fakecluster"
)

// splitCluster is a member whose cache (a client of its own) can lag the
// API server it reads and writes through.
type splitCluster struct {
	cluster.Cluster
	cache cache.Cache
}

func (s splitCluster) GetCache() cache.Cache { return s.cache }

// terminating marks obj as being deleted (held by a finalizer, so the fake
// client keeps it).
func terminating[T client.Object](obj T) T {
	ts := metav1.NewTime(now.Add(-time.Minute))
	obj.SetDeletionTimestamp(&ts)
	obj.SetFinalizers([]string{"example.com/hold"})
	return obj
}

// A deletion pass waits on a member without calling it while the member's
// cache shows the deletion under way there; it calls when the cache shows
// nothing left, something not yet being deleted or another object, and
// every deletionRecheck whatever the cache shows.
func TestDeletionWaitsOnTheMemberCache(t *testing.T) {
	web := map[string]string{"app": "web"}
	owned := func(name string) *corev1.Pod { return memberPod(name, "web", "mrs-uid-1", web) }
	recreated := mrs("uid-1")
	recreated.UID = "mrs-uid-2"
	tests := []struct {
		name    string
		cached  []client.Object
		after   time.Duration // since the pass that last called every member
		calls   bool
		release bool
	}{
		{name: "MemberReplicaSet terminating", cached: []client.Object{terminating(mrs("uid-1"))}},
		{name: "only terminating pods left", cached: []client.Object{terminating(owned("p1")), terminating(owned("p2"))}},
		{name: "a pod not yet being deleted", cached: []client.Object{terminating(owned("p1")), owned("p2")}, calls: true, release: true},
		{name: "nothing left in the cache", calls: true, release: true},
		{name: "another MemberReplicaSet of that name", cached: []client.Object{terminating(recreated)}, calls: true, release: true},
		{name: "recheck due", cached: []client.Object{terminating(mrs("uid-1"))}, after: deletionRecheck, calls: true, release: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			obj := frs(2, deleting())
			obj.Annotations = map[string]string{
				AnnotationMemberOwners: `{"a":"mrs-uid-1"}`, AnnotationPropagation: string(metav1.DeletePropagationForeground),
			}
			var live atomic.Int32
			count := interceptor.Funcs{
				Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, o client.Object, opts ...client.GetOption) error {
					live.Add(1)
					return c.Get(ctx, key, o, opts...)
				},
				List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
					live.Add(1)
					return c.List(ctx, l, opts...)
				},
			}
			// The member's API server has nothing left: a call finds the deletion done.
			e := newEnv(t, true, obj, healthy("a"), nil, map[string]interceptor.Funcs{"a": count})
			cached := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(tc.cached...).
				WithIndex(&corev1.Pod{}, engine.PodControllerIndex, engine.PodControllerIndexFunc).Build()
			e.r.Registry.(fakeMembers)["a"] = &registry.Member{Name: "a",
				Cluster: splitCluster{Cluster: fakecluster.New(e.members["a"]), cache: fakecluster.New(cached).GetCache()}}
			e.r.liveChecks.Store("default/web", liveCheck{uid: obj.UID, at: now.Add(-tc.after)})

			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			if called := live.Load() > 0; called != tc.calls {
				t.Errorf("member called = %v (%d reads), want %v", called, live.Load(), tc.calls)
			}
			got := &v1alpha1.FederatedReplicaSet{}
			err := e.hub.Get(context.Background(), req().NamespacedName, got)
			released := err != nil || !contains(got.Finalizers, v1alpha1.FinalizerCascade)
			if released != tc.release {
				t.Errorf("finalizer released = %v, want %v", released, tc.release)
			}
		})
	}
}

// The first pass of a deletion calls every member whatever its cache
// shows, and records the time; forgetting the object forgets it.
func TestDeletionFirstPassCallsEveryMember(t *testing.T) {
	e := newEnv(t, true, frs(2, deleting()), healthy("a"), map[string][]client.Object{"a": {mrs("uid-1")}}, nil)
	clk := clocktesting.NewFakePassiveClock(now)
	e.r.Clock = clk
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if got, ok := e.r.liveChecks.Load("default/web"); !ok || !got.at.Equal(now) || got.uid != "uid-1" {
		t.Fatalf("live check = %+v, %v; want uid-1 at %v", got, ok, now)
	}
	if owners := recordedOwners(get(t, e.hub)); owners["a"] != "mrs-uid-1" {
		t.Fatalf("recorded owners = %v, want a: mrs-uid-1", owners)
	}
	e.r.forget("default", "web")
	if _, ok := e.r.liveChecks.Load("default/web"); ok {
		t.Fatal("live check kept after the object was forgotten")
	}
}
