package worker

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

// stuckReader lists like a cache that never syncs: until the context ends.
type stuckReader struct{ client.Reader }

func (stuckReader) List(ctx context.Context, _ client.ObjectList, _ ...client.ListOption) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestEnqueueAllDoesNotWaitForAStuckMember: one member whose cache never
// syncs (being replaced) must not hold up the others' resync, nor the
// caller beyond enqueueAllTimeout.
func TestEnqueueAllDoesNotWaitForAStuckMember(t *testing.T) {
	old := enqueueAllTimeout
	enqueueAllTimeout = 100 * time.Millisecond
	t.Cleanup(func() { enqueueAllTimeout = old })

	newQueue := func() workqueue.TypedRateLimitingInterface[types.NamespacedName] {
		q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
		t.Cleanup(q.ShutDown)
		return q
	}
	cl := fake.NewClientBuilder().WithScheme(kubescheme.Must()).WithObjects(mrs("web", "u1", map[string]string{"app": "web"}, 0)).Build()
	ok := &Worker{name: "ok", reader: cl, queue: newQueue()}
	stuck := &Worker{name: "stuck", reader: stuckReader{cl}, queue: newQueue()}
	m := &Manager{o: Options{Store: expectations.NewMemory(0, nil)}, members: map[string]*member{
		"ok": {w: ok}, "stuck": {w: stuck},
	}}
	// The caller's context outlives the test: only the per-worker bound
	// can end the stuck list.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	m.EnqueueAll(ctx)
	if ok.queue.Len() != 1 {
		t.Fatalf("healthy member queue has %d keys, want 1", ok.queue.Len())
	}
	if ctx.Err() != nil {
		t.Fatal("EnqueueAll returned only when the caller's context ended")
	}
}

// listingSource knows one workload per member and lists it.
type listingSource struct{ engine.WorkloadSource }

func (listingSource) WorkloadKeys(_ context.Context, cluster string) ([]fedref.MemberObject, error) {
	return []fedref.MemberObject{{Cluster: cluster, Namespace: "ns", Name: "new"}}, nil
}

// TestEnqueueAllIncludesWorkloadsWithoutOwner: the periodic resync also
// enqueues keys the hub wants in the member but whose MemberReplicaSet does
// not exist yet, so a lost first enqueue is made up for (an FRS once waited
// minutes with targets committed and no MemberReplicaSet anywhere).
func TestEnqueueAllIncludesWorkloadsWithoutOwner(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	t.Cleanup(q.ShutDown)
	cl := fake.NewClientBuilder().WithScheme(kubescheme.Must()).WithObjects(mrs("web", "u1", map[string]string{"app": "web"}, 0)).Build()
	w := &Worker{name: "m1", reader: cl, queue: q, o: Options{Source: listingSource{}}}
	if err := w.EnqueueAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for q.Len() > 0 {
		k, _ := q.Get()
		got[k.String()] = true
		q.Done(k)
	}
	if !got["ns/web"] || !got["ns/new"] || len(got) != 2 {
		t.Fatalf("queued %v, want ns/web and ns/new", got)
	}
}
