package worker_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestIntegrationSmallWorkloadWrites counts the member writes of many small
// MemberReplicaSets (3 pods each, scheduled and made Ready by kwok): one
// owner create, one create per pod, one event per MemberReplicaSet (the
// sync's creates in one note, so no event series and no later PATCH), and
// few status writes (a new generation's status waits for its pods).
func TestIntegrationSmallWorkloadWrites(t *testing.T) {
	const n, size = 10, 3
	e := startEnv(t, envOpts{nodes: 2})
	for i := range n {
		e.set(fmt.Sprintf("small%d", i), size)
	}
	for i := range n {
		e.readyInStatus(fmt.Sprintf("small%d", i), size, 120*time.Second)
	}
	// Events are sent by the recorder in the background.
	e.eventually("one event per MemberReplicaSet sent", 60*time.Second, func() (bool, string) {
		got := e.kinds.get(http.MethodPost, "events")
		return got >= n, fmt.Sprintf("%d event creates", got)
	})
	owners := e.kinds.get(http.MethodPost, "memberreplicasets")
	pods := e.kinds.get(http.MethodPost, "pods")
	events := e.kinds.get(http.MethodPost, "events")
	eventPatches := e.kinds.get(http.MethodPatch, "events")
	status := e.kinds.get(http.MethodPut, "memberreplicasets/status")
	t.Logf("%d MemberReplicaSets of %d pods: owner creates %d, pod creates %d, event creates %d, event patches %d, status writes %d, all writes %d",
		n, size, owners, pods, events, eventPatches, status, e.writes.Load())
	if owners != n || pods != n*size {
		t.Fatalf("owner creates %d, pod creates %d; want %d and %d", owners, pods, n, n*size)
	}
	if events != n || eventPatches != 0 {
		t.Fatalf("event creates %d, event patches %d; want %d and 0 (one event per MemberReplicaSet, no series)", events, eventPatches, n)
	}
	// At most the held generation, a paced count and the settled pods.
	if status > 3*n {
		t.Fatalf("status writes %d for %d MemberReplicaSets, want at most %d", status, n, 3*n)
	}
}
