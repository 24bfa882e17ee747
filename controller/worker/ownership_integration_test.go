package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestIntegrationOwnedMembersOnly: with Options.Owned a member this replica
// does not own gets no worker and no pod informer, only an observer whose
// MemberReplicaSet status changes reach MemberStatusChanged; Refresh
// starts the worker once the member is owned and, once it is not, stops
// it and closes the pod watch (its pods leave the cache).
func TestIntegrationOwnedMembersOnly(t *testing.T) {
	var owned atomic.Bool
	status := &statusCalls{}
	e := startEnv(t, envOpts{statusChanged: status.changed, owned: func(string) bool { return owned.Load() }})
	ctx := context.Background()

	e.set("web", 2)
	if n := e.podWatches.Load(); n != 0 {
		t.Fatalf("%d pod watches open for a member not owned here", n)
	}
	owned.Store(true)
	e.gained(ctx)
	e.converged("web", 2)
	if n := e.podWatches.Load(); n != 1 {
		t.Fatalf("%d pod watches open for an owned member, want 1", n)
	}

	owned.Store(false)
	e.mgr.Refresh(ctx)
	e.eventually("the pod watch of a member no longer owned closes", 30*time.Second, func() (bool, string) {
		n := e.podWatches.Load()
		return n == 0, fmt.Sprintf("%d open", n)
	})
	// Another owner writes the status now; the observer passes it on.
	_, mrs := e.owned("web")
	want := fmt.Sprintf("%s/%s/web hub=%s/web", member, e.ns, e.ns)
	e.eventually("the observer reports another owner's status write", 60*time.Second, func() (bool, string) {
		if err := e.cl.Get(ctx, client.ObjectKeyFromObject(mrs), mrs); err != nil {
			return false, err.Error()
		}
		mrs.Status.ObservedGeneration++
		if err := e.cl.Status().Update(ctx, mrs); err != nil {
			return false, err.Error()
		}
		return status.has(want), status.String()
	})

	e.set("web", 4) // no worker here takes it
	owned.Store(true)
	e.gained(ctx)
	e.converged("web", 4)
}

// gained does what the server does when this replica gains the member:
// Refresh, then a sync of every key of the member (this test's workload
// source cannot list its keys for the worker's start).
func (e *env) gained(ctx context.Context) {
	e.t.Helper()
	e.mgr.Refresh(ctx)
	if err := e.mgr.EnqueueMember(ctx, member); err != nil {
		e.t.Fatal(err)
	}
	e.mgr.Enqueue(e.key("web"))
}
