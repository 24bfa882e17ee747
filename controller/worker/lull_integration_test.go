package worker_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"
)

// TestIntegrationStatusWaitsForLull: on a member whose one shared rate
// limit is busy with a burst of pod creates, the MemberReplicaSets' status
// writes wait, and are written once the burst is over, long before their
// deferral's bound (engine.DefaultMaxStatusDeferral, 5 minutes): the
// worker wakes them when the limit falls idle.
func TestIntegrationStatusWaitsForLull(t *testing.T) {
	const n, size = 20, 3
	e := startEnv(t, envOpts{nodes: 2, qps: 5, burstQPS: 5, shared: true})
	start := time.Now()
	for i := range n {
		e.set(fmt.Sprintf("lull%d", i), size)
	}
	e.eventually("every pod created", 120*time.Second, func() (bool, string) {
		got := e.kinds.get(http.MethodPost, "pods")
		return got >= n*size, fmt.Sprintf("%d pod creates", got)
	})
	burst := time.Since(start)
	for i := range n {
		// Well inside the 5-minute bound: only a wake at the lull (or a
		// later event of its own) writes a status deferred in the burst.
		e.readyInStatus(fmt.Sprintf("lull%d", i), size, 90*time.Second)
	}
	status := e.kinds.get(http.MethodPut, "memberreplicasets/status")
	t.Logf("%d MemberReplicaSets of %d pods at 5 QPS: pods created in %v, every status Ready after %v, %d status writes",
		n, size, burst.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), status)
	if status > 2*n {
		t.Errorf("status writes %d for %d MemberReplicaSets, want at most %d: deferred writes were not held to one", status, n, 2*n)
	}
}
