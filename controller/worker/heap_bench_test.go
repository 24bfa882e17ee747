package worker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// BenchmarkCachedPodHeap fills a member pod informer from a real API server
// with running pods (scheduled onto kwok nodes, so they carry the status and
// managedFields of a scheduler and a node agent) and reports the heap each
// cached pod costs above the informer's floor (the same informer, index
// included, synced on an empty namespace): B/pod, from runtime.MemStats
// after GC. Variants: the cache as it was (everything), with managedFields
// stripped (what kube-controller-manager caches) and with worker.CacheOptions.
// REPLICAFED_BENCH_CACHED_PODS sets the pod count (default 5000);
// REPLICAFED_BENCH_HEAP_PROFILE=<dir> writes each variant's heap profile
// there (sampled at every 4 KiB allocated).
// Run with: go test ./controller/worker -run '^$' -bench CachedPodHeap -benchtime 1x -timeout 30m
func BenchmarkCachedPodHeap(b *testing.B) {
	n := 5000
	if v := os.Getenv("REPLICAFED_BENCH_CACHED_PODS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n <= 0 {
			b.Fatalf("REPLICAFED_BENCH_CACHED_PODS=%q: want a positive integer", v)
		}
	}
	// The caches log nothing worth reading here.
	ctrllog.SetLogger(logr.Discard())
	if os.Getenv("REPLICAFED_BENCH_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 4096
	}
	bin, err := testcluster.FindBinDir()
	if err != nil {
		b.Fatalf("finding the control plane binaries (run `make tools`): %v", err)
	}
	member, err := crds.Member()
	if err != nil {
		b.Fatal(err)
	}
	c := testcluster.Start(b, testcluster.Options{Name: "heap", CRDs: member, BinDir: bin, Scheduler: true,
		Nodes: max(2, n/1000+1), NodePods: 1100})
	fillRunningPods(b, c.Config, n)

	for _, v := range []struct {
		name string
		opt  func(*cluster.Options)
	}{
		{"everything", func(*cluster.Options) {}},
		{"noManagedFields", func(o *cluster.Options) { o.Cache.DefaultTransform = cache.TransformStripManagedFields() }},
		{"trimmed", worker.CacheOptions},
	} {
		b.Run(v.name, func(b *testing.B) {
			var perPod float64
			for range b.N {
				floor := cachedHeap(b, c.Config, v.opt, "kube-public", 0, "")
				full := cachedHeap(b, c.Config, v.opt, "heap", n, v.name)
				perPod = float64(full-floor) / float64(n)
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}

func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		b.Fatal(err)
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// cachedHeap starts a member cache for namespace ns configured by opt, with
// the worker's pod index, waits until its pod informer holds want pods and
// returns how much live heap it adds.
func cachedHeap(b *testing.B, cfg *rest.Config, opt func(*cluster.Options), ns string, want int, profile string) uint64 {
	b.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := liveHeap()
	mc, err := cluster.New(rest.CopyConfig(cfg), func(o *cluster.Options) {
		o.Scheme = scheme()
		o.Logger = logr.Discard()
		opt(o)
		o.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}}
	})
	if err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); _ = mc.Start(ctx) }()
	defer func() { cancel(); <-done }()
	if err := mc.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, engine.PodControllerIndex, engine.PodControllerIndexFunc); err != nil {
		b.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var l corev1.PodList
		if err := mc.GetCache().List(ctx, &l, client.UnsafeDisableDeepCopy); err != nil {
			return false, nil //nolint:nilerr // not synced yet
		}
		return len(l.Items) == want, nil
	})
	if err != nil {
		b.Fatalf("cache of %s never held %d pods: %v", ns, want, err)
	}
	used := liveHeap() - before
	if dir := os.Getenv("REPLICAFED_BENCH_HEAP_PROFILE"); dir != "" && profile != "" {
		writeHeapProfile(b, filepath.Join(dir, "heap-"+profile+".pprof"))
	}
	runtime.KeepAlive(mc)
	return used
}

// heapPodTemplate is a typical production pod: a few labels, one container
// with an image, requests and limits, env, a port and probes.
func heapPodTemplate() corev1.PodTemplateSpec {
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}, PeriodSeconds: 10}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"app": "heap", "tier": "web", "version": "v1"},
			Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "8080"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.k8s.io/e2e-test-images/agnhost:2.53", Args: []string{"netexec", "--http-port=8080"},
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
				Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LOG_LEVEL", Value: "info"}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
				},
				ReadinessProbe: probe, LivenessProbe: probe,
			}},
			Tolerations:                   []corev1.Toleration{testcluster.KwokToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// fillRunningPods creates n pods owned by a MemberReplicaSet (no controller
// acts on it) in namespace "heap" and waits until all of them run.
func fillRunningPods(b *testing.B, cfg *rest.Config, n int) {
	b.Helper()
	ctx := context.Background()
	cl, err := client.New(cfg, client.Options{Scheme: scheme()})
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "heap"}}); err != nil {
		b.Fatal(err)
	}
	mrs := &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "heap", Name: "heap"},
		Spec: v1alpha1.MemberReplicaSetSpec{Replicas: int32(n), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "heap"}},
			Hub: v1alpha1.HubReference{Namespace: "hub", Name: "heap", UID: "hub-heap"}},
	}
	if err := cl.Create(ctx, mrs); err != nil {
		b.Fatal(err)
	}
	tmpl := heapPodTemplate()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range next {
				p := engine.NewPod(mrs, &tmpl, fmt.Sprintf("heap-%05d", i))
				if err := cl.Create(ctx, p); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatalf("creating pods: %v", err)
	}
	err = wait.PollUntilContextTimeout(ctx, time.Second, 20*time.Minute, true, func(ctx context.Context) (bool, error) {
		var l corev1.PodList
		if err := cl.List(ctx, &l, client.InNamespace("heap")); err != nil {
			return false, nil //nolint:nilerr // retried
		}
		running := 0
		for i := range l.Items {
			if l.Items[i].Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n, nil
	})
	if err != nil {
		b.Fatalf("%d pods never all ran: %v", n, err)
	}
}
