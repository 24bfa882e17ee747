package expectations_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/testcluster"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	tu "github.com/replicafed/replicafed/raftstore/internal/testutil"
)

// lateTransport lets allow pod creates through; once they are used up it
// answers the next stall pod creates at once with a client-side timeout, as a
// member write deadline does, and sends them to the API server only when
// release is closed: the create took effect after its caller gave up.
type lateTransport struct {
	next    http.RoundTripper
	armed   atomic.Bool
	allow   atomic.Int64
	stall   atomic.Int64
	early   atomic.Int64
	release chan struct{}
	wg      sync.WaitGroup

	mu   sync.Mutex
	late []int
}

func (l *lateTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	podCreate := req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/pods")
	if !podCreate || !l.armed.Load() || l.allow.Add(-1) >= 0 || l.stall.Add(-1) < 0 {
		return l.next.RoundTrip(req)
	}
	out := req.Clone(context.Background())
	if req.GetBody != nil {
		b, err := req.GetBody()
		if err != nil {
			return nil, err
		}
		out.Body = b
	}
	if l.early.Add(-1) >= 0 {
		// Lands at once; only the answer is lost.
		resp, err := l.next.RoundTrip(out)
		if err == nil {
			resp.Body.Close()
		}
		return nil, fmt.Errorf("member write deadline: %w", context.DeadlineExceeded)
	}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		<-l.release
		resp, err := l.next.RoundTrip(out)
		l.mu.Lock()
		defer l.mu.Unlock()
		if err == nil {
			l.late = append(l.late, resp.StatusCode)
			resp.Body.Close()
		}
	}()
	return nil, fmt.Errorf("member write deadline: %w", context.DeadlineExceeded)
}

// TestLateCreateOfTimedOutNameCollides: a create the client gave up on
// (timeout) lands after the engine's next sync. The name is held and handed
// out again, so the late create collides with the retry and the member never
// runs more pods than its target.
func TestLateCreateOfTimedOutNameCollides(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane")
	}
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatalf("finding the control plane binaries: %v", err)
	}
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	mc := testcluster.Start(t, testcluster.Options{Name: "m1", CRDs: memberCRDs, BinDir: bin})
	const target = 20
	name := "late"
	scheme := kubescheme.Must()
	direct, err := client.NewWithWatch(mc.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	lbls := map[string]string{"app": name}
	key := fedref.MemberObject{Cluster: "m1", Namespace: "default", Name: name}
	src := staticSource{w: &engine.Workload{
		Key: key, Target: target, Selector: &metav1.LabelSelector{MatchLabels: lbls},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: lbls},
			Spec: corev1.PodSpec{
				Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				TerminationGracePeriodSeconds: ptr.To[int64](0),
			},
		},
		Hub: v1alpha1.HubReference{Namespace: "hub", Name: name, UID: types.UID("hub-" + name)},
	}}
	c := tu.NewCluster(t, 1, tu.StableTimers)
	c.StartAll()
	n := c.WaitLeader(30 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if err := n.SetTargets(ctx, fsm.FRSRef{Namespace: "default", Name: name}, 1, map[string]int32{"m1": target}); err != nil {
		t.Fatal(err)
	}
	lt := &lateTransport{release: make(chan struct{})}
	lt.allow.Store(7) // slow start: 1, 2, 4 land; the batch of 8 times out
	lt.stall.Store(8)
	lt.early.Store(2)
	lt.armed.Store(true)
	cfg := rest.CopyConfig(mc.Config)
	cfg.QPS, cfg.Burst = -1, 0
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { lt.next = rt; return lt }
	cl, err := cluster.New(cfg, func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(ctx)
	if os.Getenv("RAFTSTORE_TEST_LOG") != "" {
		rctx = logr.NewContext(rctx, testr.NewWithOptions(t, testr.Options{Verbosity: 2}))
	}
	go func() { _ = cl.Start(rctx) }()
	store := expectations.New(n, logr.Discard())
	go store.Run(rctx)
	mgr := worker.NewManager(worker.Options{Store: store, Source: src, Gate: n})
	if err := mgr.Engage(rctx, "m1", cl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		select {
		case <-lt.release:
		default:
			close(lt.release)
		}
		lt.wg.Wait()
		rcancel()
		mgr.Stop()
	})
	mgr.Enqueue(key)

	pods := func() []corev1.Pod {
		var l corev1.PodList
		if err := direct.List(ctx, &l, client.InNamespace("default"), client.MatchingLabels(lbls)); err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	tu.Eventually(t, 90*time.Second, func() error {
		if got := len(pods()); got != target {
			return fmt.Errorf("%d pods, want %d", got, target)
		}
		return nil
	})
	close(lt.release)
	lt.wg.Wait()
	lt.mu.Lock()
	late := append([]int(nil), lt.late...)
	lt.mu.Unlock()
	t.Logf("late creates answered %v", late)
	if got := len(pods()); got != target {
		t.Fatalf("%d pods after the late creates, want %d (late status codes %v)", got, target, late)
	}
}
