package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

// listedSource is the test's workload source that also lists the one
// workload of the test (engine.WorkloadLister), as the hub's lists its own.
type listedSource struct {
	*testworkload.Source
}

func (s *listedSource) WorkloadKeys(context.Context, string) ([]fedref.MemberObject, error) {
	return []fedref.MemberObject{{Cluster: member, Namespace: "default", Name: "late"}}, nil
}

// A member engaged before it serves the MemberReplicaSet CRD: the worker
// fails to start ("no matches for kind MemberReplicaSet"), is started again
// after a backoff, and once the CRD is installed it runs and converges a
// workload. Before the restart existed, the worker stayed stopped and this
// replica never synced the member while it led.
func TestIntegrationWorkerStartsOnceTheCRDIsServed(t *testing.T) {
	defer worker.SetRestartBackoff(wait.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Steps: 4, Cap: 2 * time.Second})()
	c := testcluster.Start(t, testcluster.Options{Name: member0()})
	restarts := func() float64 { return testutil.ToFloat64(metrics.MemberWorkerRestarts.WithLabelValues(member)) }
	before := restarts()
	src := &listedSource{Source: testworkload.NewSource()}
	e := startEnv(t, envOpts{reuseClust: c, source: src})
	e.src = src.Source
	e.eventually("a failed start retried", time.Minute, func() (bool, string) {
		return restarts() > before, "no restart counted"
	})
	if err := e.mgr.Failing(member); err == nil || !strings.Contains(err.Error(), "MemberReplicaSet") {
		t.Fatalf("Failing = %v, want the start failure naming MemberReplicaSet", err)
	}
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := testcluster.InstallCRDs(ctx, c.Config, memberCRDs); err != nil {
		t.Fatalf("installing the member CRDs: %v", err)
	}
	// Set (and enqueued) while the worker may still be between starts: the
	// worker that starts lists it (Worker.Start enqueues every workload).
	e.set("late", 3)
	e.convergedWithin("late", 3, 2*time.Minute)
	if err := e.mgr.Failing(member); err != nil {
		t.Fatalf("Failing = %v once the worker runs, want nil", err)
	}
	t.Logf("converged after %.0f restarts", restarts()-before)
}
