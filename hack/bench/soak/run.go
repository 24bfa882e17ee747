package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/loadavg"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

const (
	namespace = "soak"
	labelKey  = "soak-app"
)

// snapshotRule is the product's default raft.snapshotThreshold and
// raft.snapshotInterval (config/settings.go).
var snapshotRule = raftRule{threshold: 1024, interval: 60}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

// soak is one run's fleet, workloads and samples.
type soak struct {
	s       settings
	f       *fleet.Fleet
	rng     *rand.Rand
	mu      sync.Mutex
	changes int
	failed  int
	samples map[string][]sample
}

// run starts the fleet, creates the workloads, holds the steady state with
// its changes and samples, and reports; it returns whether every replica
// stayed flat.
func run(ctx context.Context, s settings) (bool, error) {
	say("machine: %d CPUs, load %s", runtime.NumCPU(), loadavg.Read())
	names := make([]string, s.Members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%c", 'a'+i)
	}
	cfg := map[string]any{
		"logging": map[string]any{"level": "info"},
		// Plain HTTP metrics, so the soak's scrapes cost the hub nothing.
		"metrics": map[string]any{"secure": false, "perFRS": "summary"},
		// The product's snapshot settings, stated so the verdict's rule
		// matches them; the trailing logs are SOAK_TRAILING_LOGS so the log
		// reaches its compacted size within the run (see main.go).
		"raft": map[string]any{"snapshotThreshold": int(snapshotRule.threshold),
			"snapshotInterval": fmt.Sprintf("%.0fs", snapshotRule.interval), "trailingLogs": s.TrailingLogs},
	}
	start := time.Now()
	f, err := fleet.New(ctx, fleet.Options{
		Members: names, Replicas: 3, Nodes: 2, NodeCPU: "4000", NodeMem: "64Ti",
		NodePods: s.FRS*s.MaxReplicas/2 + 110, Config: cfg, Log: say,
	})
	if err != nil {
		return false, fmt.Errorf("starting the fleet: %w", err)
	}
	defer f.Stop()
	say("fleet up in %s (directory %s)", time.Since(start).Round(time.Second), f.Dir)
	k := &soak{s: s, f: f, rng: rand.New(rand.NewPCG(uint64(s.Seed), 0)), samples: map[string][]sample{}}
	if err := k.createWorkloads(ctx); err != nil {
		return false, err
	}
	k.steady(ctx)
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	converged := time.Now()
	if err := k.waitConverged(ctx, 10*time.Minute); err != nil {
		return false, fmt.Errorf("after the changes stopped: %w", err)
	}
	say("converged %s after the last change", time.Since(converged).Round(100*time.Millisecond))
	return k.report(), nil
}

// createWorkloads creates every FRS at a random size and waits until each
// has all its replicas Ready.
func (k *soak) createWorkloads(ctx context.Context) error {
	hub := k.f.HubClient
	if err := hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", namespace, err)
	}
	sizes := make([]int, k.s.FRS)
	for i := range sizes {
		sizes[i] = k.rng.IntN(k.s.MaxReplicas + 1)
	}
	start := time.Now()
	work := make(chan int)
	errs := make(chan error, k.s.FRS)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := hub.Create(ctx, newFRS(name(i), sizes[i])); err != nil {
					errs <- fmt.Errorf("creating %s: %w", name(i), err)
				}
			}
		})
	}
	for i := range k.s.FRS {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	say("%d FederatedReplicaSets created in %s", k.s.FRS, time.Since(start).Round(time.Second))
	if err := k.waitConverged(ctx, 20*time.Minute); err != nil {
		return err
	}
	say("all Ready %s after the first create", time.Since(start).Round(time.Second))
	return nil
}

func name(i int) string { return fmt.Sprintf("soak-%04d", i) }

func newFRS(n string, replicas int) *v1alpha1.FederatedReplicaSet {
	tpl := corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{labelKey: n}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}}}},
			Tolerations: []corev1.Toleration{testcluster.KwokToleration},
		},
	}
	return builder.FRS(namespace, n).Replicas(int32(replicas)).Label(labelKey, n).Template(tpl).Obj()
}

// waitConverged polls the hub until every FRS's status shows its current
// generation with all the replicas it asks for Ready.
func (k *soak) waitConverged(ctx context.Context, timeout time.Duration) error {
	var short string
	err := wait.PollUntilContextTimeout(ctx, 5*time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		l := &v1alpha1.FederatedReplicaSetList{}
		if err := k.f.HubClient.List(ctx, l, client.InNamespace(namespace)); err != nil {
			short = err.Error()
			return false, nil
		}
		behind := 0
		for _, f := range l.Items {
			if f.Status.ObservedGeneration != f.Generation || f.Status.ReadyReplicas != *f.Spec.Replicas {
				behind++
			}
		}
		short = fmt.Sprintf("%d of %d FederatedReplicaSets not yet at their size", behind, len(l.Items))
		return behind == 0 && len(l.Items) == k.s.FRS, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for every FederatedReplicaSet Ready (%s): %w", short, err)
	}
	return nil
}

// steady scales a random FRS to a random size every ChangeEvery and samples
// every replica every SampleEvery, for Duration.
func (k *soak) steady(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, k.s.Duration)
	defer cancel()
	start := time.Now()
	k.sample(ctx, 0)
	change := time.NewTicker(k.s.ChangeEvery)
	defer change.Stop()
	probe := time.NewTicker(k.s.SampleEvery)
	defer probe.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-change.C:
			go k.change(ctx)
		case <-probe.C:
			k.sample(ctx, time.Since(start).Seconds())
			k.mu.Lock()
			say("%s: %d changes (%d failed), load %s", time.Since(start).Round(time.Second), k.changes, k.failed, loadavg.Read())
			k.mu.Unlock()
		}
	}
}

// change scales one FRS to a new random size.
func (k *soak) change(ctx context.Context) {
	k.mu.Lock()
	i, n := k.rng.IntN(k.s.FRS), k.rng.IntN(k.s.MaxReplicas+1)
	k.changes++
	k.mu.Unlock()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	f := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name(i)}}
	err := k.f.HubClient.Patch(ctx, f, client.RawPatch("application/merge-patch+json", patch))
	if err != nil && ctx.Err() == nil {
		k.mu.Lock()
		k.failed++
		k.mu.Unlock()
		say("scaling %s to %d: %v", name(i), n, err)
	}
}

func (k *soak) String() string {
	return fmt.Sprintf("%d FederatedReplicaSets of 0-%d replicas over %d members; one scaled every %s for %s; raft.trailingLogs %d",
		k.s.FRS, k.s.MaxReplicas, k.s.Members, k.s.ChangeEvery, k.s.Duration, k.s.TrailingLogs)
}
