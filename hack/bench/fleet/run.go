package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/hack/bench/fleet/promtext"
	"github.com/replicafed/replicafed/hack/bench/fleet/report"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/loadavg"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// Scenarios and systems.
const (
	scenarioSingle   = "single"
	scenarioMany     = "many"
	systemReplicafed = "replicafed"
	systemKCM        = "kcm"
)

// settle is how long counters keep running after the last pod is Ready, so
// the trailing status writes and raft flushes of the run are counted.
const settle = 5 * time.Second

// createWorkers is how many objects the benchmark creates in parallel.
const createWorkers = 16

type bench struct {
	s           settings
	f           *fleet.Fleet
	bin         string
	members     map[string]*rest.Config
	kubeconfigs map[string]string
	memberHosts map[string]bool
	hubHost     string
	probe       *prober
	// used is set once replicafed has run a scenario: the replicas then
	// carry state of that run (see restartReplicas).
	used bool
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s ==> %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func run(ctx context.Context, s settings) error {
	bin, err := testcluster.FindBinDir()
	if err != nil {
		return err
	}
	names := make([]string, s.Members)
	for i := range names {
		names[i] = fmt.Sprintf("member-%c", 'a'+i)
	}
	// Two nodes per member with room for every pod of the larger scenario,
	// whatever the split: capacity never limits the run.
	most := max(s.Replicas, s.FRS*s.FRSReplicas)
	// Product defaults where the e2e fleet deviates (verbose logs, per-member
	// FRS gauges), plain HTTP metrics so the benchmark's scrapes cost the
	// hub no TokenReviews, and the member QPS under test.
	cfg := map[string]any{
		"logging":    map[string]any{"level": "info"},
		"metrics":    map[string]any{"secure": false, "perFRS": "summary"},
		"controller": map[string]any{"memberQPS": s.MemberQPS, "memberBurst": s.MemberBurst},
	}
	if s.Profile != "" {
		if err := os.MkdirAll(s.Profile, 0o755); err != nil {
			return fmt.Errorf("BENCH_PROFILE: %w", err)
		}
		cfg["metrics"].(map[string]any)["profiling"] = true
	}
	fleet.MergeConfig(cfg, s.Config)
	say("machine: %d CPUs, load %s", runtime.NumCPU(), loadavg.Read())
	say("settings: %d replicafed replicas, %d members, memberQPS %g burst %d, single 0->%d, many %d x %d, %d runs, scenarios %v, systems %v, strategy %q, finalizer policy %v",
		s.Servers, s.Members, s.MemberQPS, s.MemberBurst, s.Replicas, s.FRS, s.FRSReplicas, s.Runs, s.Scenarios, s.Systems, s.Strategy, !s.NoFinalizerPolicy)
	start := time.Now()
	f, err := fleet.New(ctx, fleet.Options{
		Members: names, Replicas: s.Servers, Nodes: 2, NodeCPU: "4000", NodeMem: "64Ti", NodePods: most/2 + 110,
		Config: cfg, Log: say, Binary: s.Binary, NoFinalizerPolicy: s.NoFinalizerPolicy,
	})
	if err != nil {
		return fmt.Errorf("starting fleet: %w", err)
	}
	defer f.Stop()
	say("fleet up in %s (directory %s)", time.Since(start).Round(time.Second), f.Dir)
	b := &bench{s: s, f: f, bin: bin, members: map[string]*rest.Config{}, kubeconfigs: map[string]string{}, memberHosts: map[string]bool{}}
	for _, m := range f.Members {
		b.members[m.Name()] = m.Config()
		b.kubeconfigs[m.Name()] = m.Kubeconfig()
		b.memberHosts[hostOf(m.Config())] = true
	}
	b.hubHost = hostOf(f.Hub.Config())
	b.probe = &prober{members: b.members, hub: f.Hub.Config(), replicas: map[string]string{}, http: &http.Client{}}
	for _, r := range f.Replicas {
		b.probe.replicas[r.ID] = r.MetricsAddress
	}

	var results []report.Run
	var raw *os.File
	if s.Raw != "" {
		if raw, err = os.Create(s.Raw); err != nil {
			return fmt.Errorf("BENCH_RAW: %w", err)
		}
		defer func() { _ = raw.Close() }()
	}
	// Scenarios run one after the other (and replicafed's replicas restart
	// before each of its runs, see restartReplicas).
	for _, sc := range s.Scenarios {
		for i := 1; i <= s.Runs; i++ {
			systems := slices.Clone(s.Systems)
			if i%2 == 0 {
				// ABA order: neither system always runs on the warmer machine.
				slices.Reverse(systems)
			}
			for _, sys := range systems {
				t := time.Now()
				r, err := b.measure(ctx, i, sc, sys)
				if err != nil {
					return fmt.Errorf("run %d, %s, %s: %w", i, sc, sys, err)
				}
				results = append(results, r)
				fig := report.Derive(r)
				say("run %d %s %s: created %.1fs ready %.1fs ideal %.1fs, raft %.1f/1k pods, writes/pod %.3f (pods %.3f, hub %.3f), leader CPU %.2fs/1k, status %.2f/FRS/min (took %s, load %s)",
					i, sc, sys, fig.Created, fig.Ready, fig.Ideal, fig.RaftPer1k, fig.WritesPerPod, fig.PodWritesPerPod,
					fig.HubWritesPerPod, fig.LeaderCPUPer1k, fig.StatusPerFRSMin, time.Since(t).Round(time.Second), loadavg.Read())
				say("  writes: %s", topWrites(r.Writes, 14))
				if len(r.RaftEntryKinds) > 0 {
					say("  raft entries proposed: %s; commands: %s", topWrites(r.RaftEntryKinds, 12), topWrites(r.RaftCommands, 12))
				}
				if r.EventSeries > 0 {
					say("  event series left: %.0f (each is written once more 6-12 min later: %.3f writes/pod outside the window)",
						r.EventSeries, fig.LaterWritesPerPod)
				}
				if raw != nil {
					line, _ := json.Marshal(r)
					_, _ = raw.Write(append(line, '\n'))
				}
			}
		}
	}
	table := legend(s) + "\n" + report.Table(results)
	if idle := report.IdleTable(results); idle != "" {
		table += fmt.Sprintf("\nSteady state: a %s window after each replicafed run, every pod Ready, nothing changing.\n\n", s.Idle) + idle
	}
	fmt.Println(table)
	if s.Out != "" {
		if err := os.WriteFile(s.Out, []byte(table), 0o644); err != nil {
			return fmt.Errorf("BENCH_OUT: %w", err)
		}
	}
	say("done in %s, load %s", time.Since(start).Round(time.Second), loadavg.Read())
	return nil
}

func legend(s settings) string {
	host, _ := os.Hostname()
	return fmt.Sprintf("Fleet benchmark on %s (%d CPUs, load %s at the end): %d members x 2 kwok nodes, 3 replicafed replicas, "+
		"member client QPS %g burst %d for both systems; single = one FederatedReplicaSet 0 -> %d, many = %d FederatedReplicaSets x %d created at once; "+
		"kcm = one ReplicaSet per member (per FRS) under each member's kube-controller-manager --controllers=replicaset. "+
		"Medians of %d runs. Ideal = most pods one member creates / QPS. For kcm, 'leader CPU' is the four controller-managers' sum "+
		"and 'leader heap' their resident set growth; all writes = pod + ReplicaSet status + core event writes.\n",
		host, runtime.NumCPU(), loadavg.Read(), s.Members, s.MemberQPS, s.MemberBurst, s.Replicas, s.FRS, s.FRSReplicas, s.Runs)
}

// measure runs one scenario with one system and cleans up after it.
func (b *bench) measure(ctx context.Context, i int, scenario, system string) (report.Run, error) {
	ns := fmt.Sprintf("bench-%d-%s-%s", i, scenario, system)
	say("run %d: %s with %s in namespace %s", i, scenario, system, ns)
	if system == systemReplicafed {
		return b.measureReplicafed(ctx, ns, scenario)
	}
	return b.measureKCM(ctx, ns, scenario)
}

func (b *bench) label(scenario string) string {
	if scenario == scenarioSingle {
		return fmt.Sprintf("1 FRS 0 -> %d", b.s.Replicas)
	}
	return fmt.Sprintf("%d FRS x %d", b.s.FRS, b.s.FRSReplicas)
}

func (b *bench) goal(scenario string) (objects, pods int) {
	if scenario == scenarioSingle {
		return 1, b.s.Replicas
	}
	return b.s.FRS, b.s.FRS * b.s.FRSReplicas
}

// timeout bounds one run: generous against the QPS ideal.
func (b *bench) timeout(pods int) time.Duration {
	return 4*b.evenIdeal(pods) + 3*time.Minute
}

// evenIdeal is the QPS ideal of pods spread evenly over the members.
func (b *bench) evenIdeal(pods int) time.Duration {
	return time.Duration(float64(pods) / float64(b.s.Members) / b.s.MemberQPS * float64(time.Second))
}

// labelKey labels every benchmark pod with its workload's name.
const labelKey = "bench-app"

func template(app string) corev1.PodTemplateSpec {
	lbl := map[string]string{labelKey: app}
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: lbl},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{testcluster.KwokToleration},
		},
	}
}

func newFRS(ns, name string, replicas int, strategy v1alpha1.PlacementStrategy) *v1alpha1.FederatedReplicaSet {
	return builder.FRS(ns, name).Replicas(int32(replicas)).Label(labelKey, name).Template(template(name)).Strategy(strategy).Obj()
}

func newRS(ns, name string, replicas int) *appsv1.ReplicaSet {
	return &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.ReplicaSetSpec{
			Replicas: ptr.To(int32(replicas)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{labelKey: name}},
			Template: template(name),
		},
	}
}

func objectName(i int) string { return fmt.Sprintf("web-%04d", i) }

// parallel runs fn(0..n-1) on createWorkers goroutines; the first error wins.
func parallel(n int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var first error
	next := make(chan int)
	for range min(createWorkers, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func createNamespace(ctx context.Context, c client.Client, ns string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	return nil
}

// waitFor polls cond every second until it holds or timeout passes.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	var last error
	for {
		ok, err := cond()
		if ok {
			return nil
		}
		last = err
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: timed out after %s (last error: %v)", what, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// await waits for every pod of the run, logging progress.
func await(ctx context.Context, w *podWatch, timeout time.Duration) error {
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	done := make(chan error, 1)
	go func() { done <- w.wait(ctx, timeout) }()
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			say("  %s (load %s)", w.progress(), loadavg.Read())
		}
	}
}

// watchRun starts watching the run's pods and, once the informers have had
// a moment to sync, takes the snapshot the run is measured against. The
// caller stops the watch.
func (b *bench) watchRun(ctx context.Context, ns string, pods int, kcm map[string]int) (*podWatch, snapshot, error) {
	w, err := watchPods(ctx, b.members, ns, pods)
	if err != nil {
		return nil, snapshot{}, err
	}
	time.Sleep(2 * time.Second)
	before, err := b.probe.snapshot(ctx, kcm)
	if err != nil {
		w.stop()
		return nil, snapshot{}, err
	}
	return w, before, nil
}

// statusComplete reports whether all of ns's want FederatedReplicaSets have
// a status for their generation that shows every replica Ready.
// restartReplicas stops every replica (SIGTERM) and starts them again, then
// waits for a leader: each replicafed run starts as the first one does. A
// replica that ran an earlier scenario still holds its event series, and
// client-go writes their final counts 6 to 12 minutes later and refreshes
// live ones every 30 minutes: writes of that run which landed in the next
// one's window (3,324 event PATCHes in one single-FRS run after a many-FRS
// run). Those writes are reported with their own run instead (EventSeries).
func (b *bench) restartReplicas(ctx context.Context) error {
	t := time.Now()
	for _, r := range b.f.Replicas {
		r.Stop()
	}
	for _, r := range b.f.Replicas {
		if err := r.Start(); err != nil {
			return fmt.Errorf("restarting replica %s: %w", r.ID, err)
		}
	}
	if _, err := b.f.WaitLeader(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("after restarting the replicas: %w", err)
	}
	say("  replicas restarted in %s", time.Since(t).Round(time.Second))
	return nil
}

// eventSeries counts the events replicafed wrote in ns, on the members and
// the hub, that are series (seen more than once).
func (b *bench) eventSeries(ctx context.Context, ns string) (int, error) {
	clients := map[string]client.Client{"hub": b.f.HubClient}
	maps.Copy(clients, b.f.MemberClients)
	n := 0
	for name, c := range clients {
		var l eventsv1.EventList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return 0, fmt.Errorf("listing events of %s in %s: %w", name, ns, err)
		}
		for _, ev := range l.Items {
			if ev.Series != nil && strings.HasPrefix(ev.ReportingController, worker.Component) {
				n++
			}
		}
	}
	return n, nil
}

func statusComplete(ctx context.Context, hub client.Client, ns string, want int) (bool, error) {
	l := &v1alpha1.FederatedReplicaSetList{}
	if err := hub.List(ctx, l, client.InNamespace(ns)); err != nil {
		return false, err
	}
	done := 0
	for _, f := range l.Items {
		if f.Status.ObservedGeneration == f.Generation && f.Status.ReadyReplicas == ptrOr(f.Spec.Replicas) {
			done++
		}
	}
	if done < want {
		return false, fmt.Errorf("%d of %d FederatedReplicaSets show all replicas Ready", done, want)
	}
	return true, nil
}

// awaitMemberStatus waits, up to memberStatusBound, until every member's
// MemberReplicaSets show their pods Ready in their own status, so the
// run's writes include the status writes the engine defers while a member
// is busy (until a lull, engine.DefaultMaxStatusDeferral at most) instead of leaving them after the
// window.
func (b *bench) awaitMemberStatus(ctx context.Context, ns string, t0 time.Time) {
	err := waitFor(ctx, memberStatusBound, "every MemberReplicaSet's status to show its pods Ready", func() (bool, error) {
		for name, c := range b.f.MemberClients {
			l := &v1alpha1.MemberReplicaSetList{}
			if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
				return false, fmt.Errorf("listing MemberReplicaSets in %s: %w", name, err)
			}
			for _, m := range l.Items {
				st := m.Status
				if st.ObservedGeneration != m.Generation || st.Replicas != m.Spec.Replicas || st.ReadyReplicas != m.Spec.Replicas {
					return false, fmt.Errorf("MemberReplicaSet %s in %s shows %d/%d Ready of generation %d (at %d)",
						m.Name, name, st.ReadyReplicas, m.Spec.Replicas, st.ObservedGeneration, m.Generation)
				}
			}
		}
		return true, nil
	})
	if err != nil {
		say("  member status incomplete: %v", err)
		return
	}
	say("  member status complete after %.1fs", time.Since(t0).Seconds())
}

// memberStatusBound is how long a run waits for the members' own status.
const memberStatusBound = 3 * time.Minute

// awaitRun waits for every pod of the run; a timeout is reported as a stall
// (true) rather than an error, unless the context itself ended.
func (b *bench) awaitRun(ctx context.Context, w *podWatch, pods int) (bool, error) {
	if err := await(ctx, w, b.timeout(pods)); err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		say("  STALLED: %v", err)
		return true, nil
	}
	return false, nil
}

func (b *bench) measureReplicafed(ctx context.Context, ns, scenario string) (report.Run, error) {
	hub := b.f.HubClient
	objects, pods := b.goal(scenario)
	if b.used {
		if err := b.restartReplicas(ctx); err != nil {
			return report.Run{}, err
		}
	}
	b.used = true
	if err := b.awaitBalancedOwners(ctx); err != nil {
		return report.Run{}, err
	}
	if err := createNamespace(ctx, hub, ns); err != nil {
		return report.Run{}, err
	}
	defer b.cleanupReplicafed(ctx, ns)
	if scenario == scenarioSingle {
		frs := newFRS(ns, objectName(0), 0, b.s.Strategy)
		if err := hub.Create(ctx, frs); err != nil {
			return report.Run{}, fmt.Errorf("creating FederatedReplicaSet: %w", err)
		}
		// Planned at 0 first, so the run measures the scale-up alone.
		err := waitFor(ctx, 2*time.Minute, "the FederatedReplicaSet to be planned at 0", func() (bool, error) {
			got := &v1alpha1.FederatedReplicaSet{}
			if err := hub.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
				return false, err
			}
			return got.Status.ObservedGeneration == got.Generation && len(got.Status.Clusters) == len(b.members), nil
		})
		if err != nil {
			return report.Run{}, err
		}
	}
	w, before, err := b.watchRun(ctx, ns, pods, nil)
	if err != nil {
		return report.Run{}, err
	}
	defer w.stop()
	cpuDone := func() error { return nil }
	if b.s.Profile != "" {
		// The QPS ideal and half again: about the creation, not the idle after it.
		cpuDone = b.probe.cpuProfiles(ctx, b.s.Profile, ns, before, b.evenIdeal(pods)*3/2)
	}
	t0 := time.Now()
	w.begin(t0)
	if scenario == scenarioSingle {
		frs := newFRS(ns, objectName(0), 0, b.s.Strategy)
		patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, pods))
		if err := hub.Patch(ctx, frs, patch); err != nil {
			return report.Run{}, fmt.Errorf("scaling FederatedReplicaSet: %w", err)
		}
	} else {
		err := parallel(objects, func(i int) error {
			if err := hub.Create(ctx, newFRS(ns, objectName(i), b.s.FRSReplicas, b.s.Strategy)); err != nil {
				return fmt.Errorf("creating FederatedReplicaSet %d: %w", i, err)
			}
			return nil
		})
		if err != nil {
			return report.Run{}, err
		}
	}
	stalled, err := b.awaitRun(ctx, w, pods)
	if err != nil {
		return report.Run{}, err
	}
	if stalled {
		b.diagnoseReplicafed(ctx, ns)
	}
	// The hub status is part of the job: the run's writes and the idle
	// window below start only once every FRS says its pods are Ready.
	var statusDone time.Duration
	if !stalled {
		err := waitFor(ctx, 10*time.Minute, "every FederatedReplicaSet's status to show its replicas Ready", func() (bool, error) {
			return statusComplete(ctx, hub, ns, objects)
		})
		switch {
		case err == nil:
			statusDone = time.Since(t0)
		case ctx.Err() != nil:
			return report.Run{}, err
		default:
			say("  hub status incomplete: %v", err)
		}
		b.awaitMemberStatus(ctx, ns, t0)
	}
	time.Sleep(settle)
	after, err := b.probe.snapshot(ctx, nil)
	if err != nil {
		return report.Run{}, err
	}
	if err := cpuDone(); err != nil {
		return report.Run{}, err
	}
	var heaps map[string]map[string]int64
	if b.s.Profile != "" {
		if heaps, err = b.probe.heapProfiles(ctx, b.s.Profile, ns, after); err != nil {
			return report.Run{}, err
		}
	}
	created, ready, perMember := w.result()
	r := report.Run{Scenario: b.label(scenario), System: systemReplicafed, Pods: pods, FRS: objects,
		Created: created, Ready: ready, Ideal: b.ideal(perMember), Stalled: stalled, StatusComplete: statusDone}
	b.replicafedFigures(&r, before, after)
	for _, h := range heaps {
		r.PodCache = max(r.PodCache, float64(h["pod cache"]))
		r.RaftCaches = max(r.RaftCaches, float64(h["raft caches"]))
	}
	series, err := b.eventSeries(ctx, ns)
	if err != nil {
		return report.Run{}, err
	}
	r.EventSeries = float64(series)
	if b.s.Idle > 0 && !stalled {
		// Steady state: everything Ready, nothing asked. What replicafed
		// spends here it spends all the time, per FRS and member.
		time.Sleep(b.s.Idle)
		idle, err := b.probe.snapshot(ctx, nil)
		if err != nil {
			return report.Run{}, err
		}
		var w report.Run
		b.replicafedFigures(&w, after, idle)
		r.Idle = &report.Idle{Seconds: b.s.Idle.Seconds(), LeaderCPU: w.LeaderCPU, RaftEntries: w.RaftEntries,
			HubWrites: w.HubWrites, MemberWrites: w.MemberWrites, StatusWrites: w.StatusWrites, Writes: w.Writes}
	}
	return r, nil
}

// diagnoseReplicafed prints the FederatedReplicaSets short of their
// replicas and, for each, the members whose MemberReplicaSet is missing or
// short, so a stalled run says where it stalled.
func (b *bench) diagnoseReplicafed(ctx context.Context, ns string) {
	list := &v1alpha1.FederatedReplicaSetList{}
	if err := b.f.HubClient.List(ctx, list, client.InNamespace(ns)); err != nil {
		say("  diagnosis: listing FederatedReplicaSets: %v", err)
		return
	}
	shown := 0
	for i := range list.Items {
		frs := &list.Items[i]
		if frs.Status.ReadyReplicas == ptrOr(frs.Spec.Replicas) || shown >= 10 {
			continue
		}
		shown++
		var parts []string
		for _, row := range frs.Status.Clusters {
			mrs := &v1alpha1.MemberReplicaSet{}
			state := "no MemberReplicaSet"
			if err := b.f.MemberClients[row.Name].Get(ctx, client.ObjectKeyFromObject(frs), mrs); err == nil {
				state = fmt.Sprintf("mrs spec %d status %d/%d ready", mrs.Spec.Replicas, mrs.Status.Replicas, mrs.Status.ReadyReplicas)
			}
			if row.Target != row.ReadyReplicas || state == "no MemberReplicaSet" {
				parts = append(parts, fmt.Sprintf("%s target %d (%s)", row.Name, row.Target, state))
			}
		}
		say("  diagnosis: %s ready %d of %d: %s", frs.Name, frs.Status.ReadyReplicas, ptrOr(frs.Spec.Replicas), strings.Join(parts, "; "))
	}
}

func ptrOr(p *int32) int32 {
	if p == nil {
		return 0
	}
	return *p
}

// ideal is the member QPS bound: the busiest member's pods over its QPS.
func (b *bench) ideal(perMember map[string]int) time.Duration {
	most := 0
	for _, n := range perMember {
		most = max(most, n)
	}
	return time.Duration(float64(most) / b.s.MemberQPS * float64(time.Second))
}

func delta(before, after promtext.Samples, name string, m promtext.Match) float64 {
	return after.Sum(name, m) - before.Sum(name, m)
}

// writeBreakdown counts the write requests each API server served in the
// run by resource, subresource, verb and code.
func (b *bench) writeBreakdown(before, after snapshot) map[string]float64 {
	return b.requestBreakdown(before, after, writeVerbs)
}

// requestBreakdown counts the requests of the verbs verbs matches that
// each API server served between two snapshots, by resource, subresource,
// verb and code.
func (b *bench) requestBreakdown(before, after snapshot, verbs promtext.Match) map[string]float64 {
	out := map[string]float64{}
	add := func(where string, prev, cur promtext.Samples) {
		seen := map[string]float64{}
		for _, x := range prev {
			if x.Name == mRequests && verbs(x.Labels) {
				seen[writeKey(where, x.Labels)] -= x.Value
			}
		}
		for _, x := range cur {
			if x.Name == mRequests && verbs(x.Labels) {
				seen[writeKey(where, x.Labels)] += x.Value
			}
		}
		for k, v := range seen {
			if v != 0 {
				out[k] += v
			}
		}
	}
	for name := range b.members {
		add("member", before.members[name], after.members[name])
	}
	add("hub", before.hub, after.hub)
	return out
}

func writeKey(where string, l map[string]string) string {
	res := l["resource"]
	if l["group"] != "" {
		res += "." + l["group"]
	}
	if l["subresource"] != "" {
		res += "/" + l["subresource"]
	}
	return fmt.Sprintf("%s %s %s %s", where, res, l["verb"], l["code"])
}

// topWrites formats the largest entries of a breakdown.
func topWrites(w map[string]float64, n int) string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if w[a] != w[b] {
			if w[a] > w[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, k := range keys[:min(n, len(keys))] {
		parts = append(parts, fmt.Sprintf("%s=%.0f", k, w[k]))
	}
	return strings.Join(parts, ", ")
}

func (b *bench) replicafedFigures(r *report.Run, before, after snapshot) {
	r.Writes = b.writeBreakdown(before, after)
	if r.Writes == nil {
		r.Writes = map[string]float64{}
	}
	r.RaftEntryKinds, r.RaftCommands = map[string]float64{}, map[string]float64{}
	for name := range b.members {
		r.PodWrites += delta(before.members[name], after.members[name], mRequests, podWrites)
	}
	r.StatusWrites = delta(before.hub, after.hub, mRequests, frsStatusWrites)
	toMembers := promtext.All(clientWrites, b.toMember)
	toHub := promtext.All(clientWrites, promtext.In("host", b.hubHost))
	leader := ""
	for id, s := range after.replicas {
		if s.Sum(mRaftLeader, nil) == 1 {
			leader = id
		}
	}
	if leader == "" || before.replicas[leader].Sum(mRaftLeader, nil) != 1 {
		say("  warning: leadership changed during the run (leader now %q)", leader)
	}
	var followers int
	for id, s := range after.replicas {
		prev := before.replicas[id]
		for _, x := range s {
			if x.Name != mClient || !clientWrites(x.Labels) {
				continue
			}
			where := "hub"
			if b.toMember(x.Labels) {
				where = "member"
			}
			k := fmt.Sprintf("replicafed->%s %s %s", where, x.Labels["method"], x.Labels["code"])
			r.Writes[k] += x.Value - prev.Sum(mClient, promtext.All(promtext.In("host", x.Labels["host"]),
				promtext.In("method", x.Labels["method"]), promtext.In("code", x.Labels["code"])))
		}
		r.MemberWrites += delta(prev, s, mClient, toMembers)
		r.HubWrites += delta(prev, s, mClient, toHub)
		r.RaftEntries = max(r.RaftEntries, delta(prev, s, mRaftIndex, nil))
		// Each replica counts only what it proposed as leader: the sum
		// over replicas holds across a leader change.
		addByLabel(r.RaftEntryKinds, prev, s, mRaftEntryKinds, "types")
		addByLabel(r.RaftCommands, prev, s, mRaftCommands, "type")
		cpu, heap := delta(prev, s, mCPU, nil), delta(prev, s, mLiveHeap, nil)
		r.MaxHeap = max(r.MaxHeap, heap)
		if id == leader {
			r.LeaderCPU, r.LeaderHeap = cpu, heap
			continue
		}
		followers++
		r.FollowerCPU += cpu
		r.FollowerHeap += heap
	}
	if followers > 0 {
		r.FollowerCPU /= float64(followers)
		r.FollowerHeap /= float64(followers)
	}
}

// addByLabel adds to out, by the value of label, how much the counters
// called name grew from prev to cur; unchanged ones are left out.
func addByLabel(out map[string]float64, prev, cur promtext.Samples, name, label string) {
	for _, x := range cur {
		if x.Name != name {
			continue
		}
		v := x.Labels[label]
		if d := x.Value - prev.Sum(name, promtext.In(label, v)); d != 0 {
			out[v] += d
		}
	}
}

// cleanupReplicafed deletes the run's FederatedReplicaSets and, so the next
// run does not wait out member garbage collection at member QPS, their pods
// directly.
func (b *bench) cleanupReplicafed(ctx context.Context, ns string) {
	if b.s.DeleteTimeout > 0 {
		b.measureDeletion(ctx, ns, systemReplicafed)
	}
	t := time.Now()
	hub := b.f.HubClient
	// The hub releases each FRS's finalizer once its members confirm (about
	// two FRS a second on this machine class), so allow a second per FRS.
	objects, _ := b.goal(scenarioMany)
	wait := max(10*time.Minute, time.Duration(objects)*time.Second)
	err := waitFor(ctx, wait, "the run's objects to be gone", func() (bool, error) {
		// Every FederatedReplicaSet is being deleted before anything is
		// deleted in the members: a pod deleted there while its FRS still
		// stands is created again by replicafed (earlier cleanups fought
		// it for minutes after 1,000 FRS, when the hub's deletecollection
		// timed out before it had marked them all).
		standing, err := deleteStanding(ctx, hub, ns)
		if err != nil || standing > 0 {
			return false, fmt.Errorf("%d FederatedReplicaSets not yet being deleted (%v)", standing, err)
		}
		left := 0
		for name := range b.members {
			c := b.f.MemberClients[name]
			_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
			// The hub's deletion reads each MemberReplicaSet at member QPS,
			// one FRS after another: gone ones answer fastest.
			_ = c.DeleteAllOf(ctx, &v1alpha1.MemberReplicaSet{}, client.InNamespace(ns))
			pods := &metav1.PartialObjectMetadataList{}
			pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, err
			}
			left += len(pods.Items)
		}
		frs := &v1alpha1.FederatedReplicaSetList{}
		if err := hub.List(ctx, frs, client.InNamespace(ns)); err != nil {
			return false, err
		}
		return left == 0 && len(frs.Items) == 0, fmt.Errorf("%d pods and %d FederatedReplicaSets left", left, len(frs.Items))
	})
	if err != nil {
		say("  cleanup: %v", err)
	}
	say("  cleaned up in %s", time.Since(t).Round(time.Second))
}

// deleteStanding deletes, one by one and in parallel, the FederatedReplicaSets
// of ns not yet being deleted (a deletecollection of a thousand timed out
// under load), and returns how many of them still stood when it listed.
func deleteStanding(ctx context.Context, hub client.Client, ns string) (int, error) {
	l := &v1alpha1.FederatedReplicaSetList{}
	if err := hub.List(ctx, l, client.InNamespace(ns)); err != nil {
		return 0, fmt.Errorf("listing FederatedReplicaSets: %w", err)
	}
	var standing []*v1alpha1.FederatedReplicaSet
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp.IsZero() {
			standing = append(standing, &l.Items[i])
		}
	}
	err := parallel(len(standing), func(i int) error {
		if err := hub.Delete(ctx, standing[i]); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting FederatedReplicaSet %s: %w", standing[i].Name, err)
		}
		return nil
	})
	return len(standing), err
}

// share is how many of replicas RS i gets in member j of n: an even split,
// the remainder rotated so every member gets the same total.
func share(replicas, i, j, n int) int {
	s := replicas / n
	if (i+j)%n < replicas%n {
		s++
	}
	return s
}

func (b *bench) measureKCM(ctx context.Context, ns, scenario string) (report.Run, error) {
	objects, pods := b.goal(scenario)
	names := make([]string, 0, len(b.members))
	for name := range b.members {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if err := createNamespace(ctx, b.f.MemberClients[name], ns); err != nil {
			return report.Run{}, err
		}
	}
	bl, err := startBaseline(b.bin, b.f.Dir, b.kubeconfigs, b.s.MemberQPS, b.s.MemberBurst)
	if err != nil {
		return report.Run{}, err
	}
	stopped := false
	stop := func() {
		if !stopped {
			bl.stop()
			stopped = true
		}
	}
	defer func() { stop(); b.cleanupKCM(ctx, ns) }()
	// A ReplicaSet at 0 per member (the one scaled, or a probe) shows the
	// controller-manager has synced before the clock starts.
	first := "warmup"
	if scenario == scenarioSingle {
		first = objectName(0)
	}
	for _, name := range names {
		if err := b.f.MemberClients[name].Create(ctx, newRS(ns, first, 0)); err != nil {
			return report.Run{}, fmt.Errorf("creating ReplicaSet in %s: %w", name, err)
		}
	}
	err = waitFor(ctx, 2*time.Minute, "the controller-managers to sync", func() (bool, error) {
		for _, name := range names {
			rs := &appsv1.ReplicaSet{}
			if err := b.f.MemberClients[name].Get(ctx, client.ObjectKey{Namespace: ns, Name: first}, rs); err != nil {
				return false, err
			}
			if rs.Status.ObservedGeneration < rs.Generation {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return report.Run{}, err
	}
	w, before, err := b.watchRun(ctx, ns, pods, bl.pids())
	if err != nil {
		return report.Run{}, err
	}
	defer w.stop()
	perMember := map[string]int{}
	var mu sync.Mutex
	t0 := time.Now()
	w.begin(t0)
	if scenario == scenarioSingle {
		err = parallel(len(names), func(j int) error {
			n := share(pods, 0, j, len(names))
			mu.Lock()
			perMember[names[j]] = n
			mu.Unlock()
			rs := newRS(ns, objectName(0), 0)
			patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n))
			return b.f.MemberClients[names[j]].Patch(ctx, rs, patch)
		})
	} else {
		err = parallel(objects*len(names), func(k int) error {
			i, j := k/len(names), k%len(names)
			n := share(b.s.FRSReplicas, i, j, len(names))
			mu.Lock()
			perMember[names[j]] += n
			mu.Unlock()
			return b.f.MemberClients[names[j]].Create(ctx, newRS(ns, objectName(i), n))
		})
	}
	if err != nil {
		return report.Run{}, fmt.Errorf("writing ReplicaSets: %w", err)
	}
	stalled, err := b.awaitRun(ctx, w, pods)
	if err != nil {
		return report.Run{}, err
	}
	time.Sleep(settle)
	after, err := b.probe.snapshot(ctx, bl.pids())
	if err != nil {
		return report.Run{}, err
	}
	created, ready, _ := w.result()
	r := report.Run{Scenario: b.label(scenario), System: "kube-controller-manager", Pods: pods, FRS: objects,
		Created: created, Ready: ready, Ideal: b.ideal(perMember), Stalled: stalled,
		RaftEntries: math.NaN(), HubWrites: math.NaN(), StatusWrites: math.NaN(), FollowerCPU: math.NaN(), FollowerHeap: math.NaN(),
		EventSeries: math.NaN()}
	for name := range b.members {
		r.PodWrites += delta(before.members[name], after.members[name], mRequests, podWrites)
		r.MemberWrites += delta(before.members[name], after.members[name], mRequests,
			func(l map[string]string) bool { return podWrites(l) || rsStatusWrites(l) || coreEventWrites(l) })
		r.LeaderCPU += after.kcm[name].cpu - before.kcm[name].cpu
		r.LeaderHeap += after.kcm[name].rss - before.kcm[name].rss
		r.MaxHeap = max(r.MaxHeap, after.kcm[name].rss-before.kcm[name].rss)
	}
	r.Writes = b.writeBreakdown(before, after)
	if b.s.DeleteTimeout > 0 {
		// With the controller-managers still running, as replicafed's
		// deletion runs with replicafed.
		b.measureDeletion(ctx, ns, systemKCM)
	}
	return r, nil
}

// cleanupKCM removes the run's pods and ReplicaSets once the baseline
// controller-managers are stopped (so nothing recreates the pods).
func (b *bench) cleanupKCM(ctx context.Context, ns string) {
	t := time.Now()
	err := waitFor(ctx, 10*time.Minute, "the run's objects to be gone", func() (bool, error) {
		left := 0
		for name, c := range b.f.MemberClients {
			_ = c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.GracePeriodSeconds(0))
			_ = c.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationOrphan))
			pods := &metav1.PartialObjectMetadataList{}
			pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
			if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
				return false, fmt.Errorf("listing pods of %s: %w", name, err)
			}
			left += len(pods.Items)
		}
		return left == 0, fmt.Errorf("%d pods left", left)
	})
	if err != nil {
		say("  cleanup: %v", err)
	}
	say("  cleaned up in %s", time.Since(t).Round(time.Second))
}
