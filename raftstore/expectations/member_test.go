package expectations_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testworkload"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/node"
)

// The integration tests' shared fixture: one real member control plane, the
// FederatedReplicaSet they run in it, and the member engine of a raft
// replica working there.

// workload is a Source that wants target pods of app=name in member m1's
// namespace default, and what it wants.
func workload(name string, target int32) (*testworkload.Source, *engine.Workload) {
	w := testworkload.Workload(fedref.MemberObject{Cluster: "m1", Namespace: "default", Name: name}, target)
	src := testworkload.NewSource()
	src.Set(w.Key, w)
	return src, w
}

// member is a real member control plane (cluster m1) with the member CRDs.
type member struct {
	*testcluster.Cluster
	// direct reads and watches the member without a cache.
	direct client.WithWatch
}

// startMember starts the member, or skips the test under -short.
func startMember(t *testing.T) *member {
	t.Helper()
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	mc := testcluster.Start(t, testcluster.Options{Name: "m1", CRDs: memberCRDs})
	direct, err := client.NewWithWatch(mc.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	return &member{Cluster: mc, direct: direct}
}

// pods lists the pods of w.
func (m *member) pods(t *testing.T, ctx context.Context, w *engine.Workload) []corev1.Pod {
	t.Helper()
	var l corev1.PodList
	if err := m.direct.List(ctx, &l, client.InNamespace("default"), client.MatchingLabels(w.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// waitPods waits until w has exactly its target of pods.
func (m *member) waitPods(t *testing.T, ctx context.Context, w *engine.Workload, timeout time.Duration, why string) {
	t.Helper()
	tu.Eventually(t, timeout, func() error {
		if got := len(m.pods(t, ctx, w)); got != int(w.Target) {
			return fmt.Errorf("%d pods, want %d%s", got, w.Target, why)
		}
		return nil
	})
}

// engage runs the member engine of raft node n with the replicated
// expectations store, its member client's transport wrapped by wrap, until
// the returned stop is called or ctx ends. RAFTSTORE_TEST_LOG=1 logs it
// with logValues.
func (m *member) engage(t *testing.T, ctx context.Context, n *node.Node, src engine.WorkloadSource, wrap func(http.RoundTripper) http.RoundTripper, logValues ...any) (*worker.Manager, func()) {
	t.Helper()
	cfg := rest.CopyConfig(m.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = wrap
	cl, err := cluster.New(cfg, func(o *cluster.Options) { o.Scheme = kubescheme.Must() })
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	if os.Getenv("RAFTSTORE_TEST_LOG") != "" {
		rctx = logr.NewContext(rctx, testr.NewWithOptions(t, testr.Options{Verbosity: 2}).WithValues(logValues...))
	}
	go func() { _ = cl.Start(rctx) }()
	store := expectations.New(n, logr.Discard())
	go store.Run(rctx)
	mgr := worker.NewManager(worker.Options{Store: store, Source: src, Gate: n})
	if err := mgr.Engage(rctx, "m1", cl); err != nil {
		rcancel()
		t.Fatal(err)
	}
	return mgr, func() { rcancel(); mgr.Stop() }
}
