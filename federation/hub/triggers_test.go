package hub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// More triggers than the 1,024-slot channel they replace, some repeated,
// some arriving before the controller starts and some after: every distinct
// FederatedReplicaSet reaches the controller's queue.
func TestTriggersDropNothing(t *testing.T) {
	const n = 3000
	tr := NewTriggers()
	for i := range n / 2 {
		tr.Trigger("ns", fmt.Sprintf("frs-%d", i))
		tr.Trigger("ns", fmt.Sprintf("frs-%d", i)) // a repeat folds into the first
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	if err := tr.Start(ctx, q); err != nil {
		t.Fatal(err)
	}
	for i := n / 2; i < n; i++ {
		tr.Trigger("ns", fmt.Sprintf("frs-%d", i))
	}
	seen := map[string]bool{}
	err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		for q.Len() > 0 {
			req, _ := q.Get()
			seen[req.Name] = true
			q.Done(req)
		}
		return len(seen) == n, nil
	})
	if err != nil {
		t.Fatalf("%d of %d FederatedReplicaSets reached the controller", len(seen), n)
	}
}
