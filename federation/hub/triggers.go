package hub

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// Triggers asks the hub reconciler to look at FederatedReplicaSets from
// outside the hub's own watch: member reports, member health changes, a new
// leader's re-plan of everything. Every trigger is kept: they wait in a
// client-go workqueue (unbounded, one entry per FederatedReplicaSet however
// often it is triggered) until the controller started, and are then handed
// to the controller's own queue. A trigger never blocks its caller.
type Triggers struct {
	queue *workqueue.Typed[reconcile.Request]
	once  sync.Once
}

var _ source.TypedSource[reconcile.Request] = &Triggers{}

// NewTriggers returns an empty Triggers; pass it to the controller builder's
// WatchesRawSource.
func NewTriggers() *Triggers {
	return &Triggers{queue: workqueue.NewTypedWithConfig(workqueue.TypedQueueConfig[reconcile.Request]{Name: "hub-triggers"})}
}

// Trigger queues a reconcile of namespace/name.
func (t *Triggers) Trigger(namespace, name string) {
	t.queue.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}})
}

// Len is how many triggers wait to be handed to the controller.
func (t *Triggers) Len() int { return t.queue.Len() }

// Start implements source.TypedSource: it moves triggers to the controller's
// queue until ctx ends. It returns at once.
func (t *Triggers) Start(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	t.once.Do(func() {
		go func() {
			<-ctx.Done()
			t.queue.ShutDown()
		}()
		go func() {
			for {
				req, shutdown := t.queue.Get()
				if shutdown {
					return
				}
				q.Add(req)
				t.queue.Done(req)
			}
		}()
	})
	return nil
}
