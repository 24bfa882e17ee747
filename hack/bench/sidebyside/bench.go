package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/hack/bench/enginerig"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/loadavg"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/replica/writefence"
)

// benchNamespace holds every run's owner and pods.
const benchNamespace = "bench"

// Controllers compared.
const (
	kcm        = "kcm"
	replicafed = "replicafed"
)

// setting is one client rate-limit setting; QPS <= 0 means no limit.
type setting struct {
	Name  string
	QPS   float32
	Burst int
}

var knownSettings = map[string]setting{
	"qps20":     {Name: "qps20", QPS: 20, Burst: 30},
	"unlimited": {Name: "unlimited"},
}

func (s setting) String() string {
	if s.QPS <= 0 {
		return "client limits off"
	}
	return fmt.Sprintf("qps %g / burst %d", s.QPS, s.Burst)
}

type benchOptions struct {
	pods, pairs   int
	settings      []setting
	burstReplicas int
	out, binDir   string
	runTimeout    time.Duration
	profile       bool
	writeTimeout  time.Duration
	maxInFlight   int
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v, err := time.ParseDuration(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func parseOptions(args []string) (benchOptions, error) {
	var o benchOptions
	fs := flag.NewFlagSet("sidebyside", flag.ContinueOnError)
	fs.IntVar(&o.pods, "pods", envInt("SIDEBYSIDE_PODS", 1000), "pods per run (env SIDEBYSIDE_PODS)")
	fs.IntVar(&o.pairs, "pairs", envInt("SIDEBYSIDE_PAIRS", 3), "kcm/replicafed run pairs per setting (env SIDEBYSIDE_PAIRS)")
	settings := fs.String("settings", envString("SIDEBYSIDE_SETTINGS", "qps20,unlimited"), "client settings to run: qps20, unlimited (env SIDEBYSIDE_SETTINGS)")
	fs.IntVar(&o.burstReplicas, "burst-replicas", 500, "replicafed controller.burstReplicas; kube-controller-manager's BurstReplicas is a constant 500")
	fs.StringVar(&o.out, "out", envString("SIDEBYSIDE_OUT", "hack/bench/out"), "directory for the table, raw results and child logs (env SIDEBYSIDE_OUT)")
	fs.StringVar(&o.binDir, "bin-dir", os.Getenv("REPLICAFED_BIN_DIR"), "control-plane binaries (default: testcluster.FindBinDir)")
	fs.DurationVar(&o.runTimeout, "run-timeout", 15*time.Minute, "longest a single run may take")
	fs.DurationVar(&o.writeTimeout, "write-timeout", envDuration("SIDEBYSIDE_WRITE_TIMEOUT", -1), "replicafed controller.memberWriteTimeout; negative keeps the default, 0 turns the deadline off (env SIDEBYSIDE_WRITE_TIMEOUT)")
	fs.IntVar(&o.maxInFlight, "max-inflight", envInt("SIDEBYSIDE_MAX_INFLIGHT", writefence.DefaultMaxInFlight), "replicafed member writes in flight at once (writefence.Bounded) (env SIDEBYSIDE_MAX_INFLIGHT)")
	fs.BoolVar(&o.profile, "profile", os.Getenv("SIDEBYSIDE_PROFILE") != "", "write each replicafed run's CPU profile (scale-up to exit) next to its log (env SIDEBYSIDE_PROFILE)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.pods <= 0 || o.pairs <= 0 {
		return o, errors.New("-pods and -pairs must be positive")
	}
	for _, s := range strings.Split(*settings, ",") {
		st, ok := knownSettings[strings.TrimSpace(s)]
		if !ok {
			return o, fmt.Errorf("unknown setting %q (want qps20 or unlimited)", s)
		}
		o.settings = append(o.settings, st)
	}
	return o, nil
}

func runBench(args []string) error {
	o, err := parseOptions(args)
	if err != nil {
		return err
	}
	if o.binDir == "" {
		if o.binDir, err = testcluster.FindBinDir(); err != nil {
			return err
		}
	}
	if o.out, err = filepath.Abs(o.out); err != nil {
		return err
	}
	logDir := filepath.Join(o.out, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("creating %s: %w", logDir, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this program for the engine child: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	started := time.Now()
	loadBefore := loadavg.Read()
	member, err := crds.Member()
	if err != nil {
		return err
	}
	nodes := max(2, (o.pods*11/10+249)/250)
	fmt.Printf("Starting a control plane with %d kwok nodes (load %s)\n", nodes, loadBefore)
	c, err := testcluster.New(ctx, testcluster.Options{Name: "sidebyside", BinDir: o.binDir, Scheduler: true,
		Nodes: nodes, NodePods: 250, CRDs: member})
	if err != nil {
		return err
	}
	defer c.Stop()
	proxy, err := startProxy(c.Config)
	if err != nil {
		return err
	}
	defer proxy.close()
	kubeconfig, err := writeProxyKubeconfig(o.out, proxy, c.Config.BearerToken)
	if err != nil {
		return err
	}
	cl, err := client.New(c.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: benchNamespace}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", benchNamespace, err)
	}
	b := &bench{o: o, cl: cl, cs: cs, proxy: proxy, kubeconfig: kubeconfig, self: self, logDir: logDir}

	var results []result
	for _, st := range o.settings {
		for pair := 1; pair <= o.pairs; pair++ {
			for _, ctrlName := range []string{kcm, replicafed} {
				r, err := b.run(ctx, st, ctrlName, pair)
				if err != nil {
					return fmt.Errorf("%s run %d (%s): %w", ctrlName, pair, st.Name, err)
				}
				fmt.Println(r.line())
				results = append(results, r)
			}
		}
	}
	def, err := enginerig.ProductConfig(os.TempDir())
	if err != nil {
		return err
	}
	wt := def.Controller.MemberWriteTimeout.String() + " (default)"
	if o.writeTimeout >= 0 {
		wt = o.writeTimeout.String()
	}
	inFlight := strconv.Itoa(o.maxInFlight)
	if o.maxInFlight <= 0 {
		inFlight = "unbounded"
	}
	rep := report{MaxInFlight: inFlight, Pods: o.pods, Pairs: o.pairs, Nodes: nodes, BurstReplicas: o.burstReplicas, WriteTimeout: wt, Settings: o.settings, Results: results,
		Machine: machine(), LoadBefore: loadBefore, LoadAfter: loadavg.Read(), Started: started, Took: time.Since(started)}
	md := rep.markdown()
	fmt.Println()
	fmt.Print(md)
	path := filepath.Join(o.out, "sidebyside.md")
	if err := os.WriteFile(path, []byte(md), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	stamped := filepath.Join(o.out, "sidebyside-"+started.UTC().Format("20060102T150405Z")+".md")
	if err := os.WriteFile(stamped, []byte(md), 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", stamped, err)
	}
	fmt.Printf("\nWritten to %s (and %s)\n", path, filepath.Base(stamped))
	return nil
}

// writeProxyKubeconfig writes the kubeconfig the controllers use: the
// counting proxy with the admin token.
func writeProxyKubeconfig(dir string, p *countingProxy, token string) (string, error) {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["bench"] = &clientcmdapi.Cluster{Server: "https://" + p.addr, CertificateAuthorityData: p.ca}
	kc.AuthInfos["bench"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["bench"] = &clientcmdapi.Context{Cluster: "bench", AuthInfo: "bench"}
	kc.CurrentContext = "bench"
	path := filepath.Join(dir, "proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return path, nil
}

type bench struct {
	o                benchOptions
	cl               client.Client
	cs               kubernetes.Interface
	proxy            *countingProxy
	kubeconfig, self string
	logDir           string
}

// podLabels are the labels of one run's pods; run keeps runs apart.
func podLabels(run string) map[string]string { return enginerig.PodLabels(run) }

// podTemplate is the template both controllers create pods from.
func podTemplate(run string) corev1.PodTemplateSpec {
	return enginerig.PodTemplate(run, testcluster.KwokToleration)
}

// child is a controller process of one run.
type child struct {
	cmd   *exec.Cmd
	done  chan struct{}
	stdin interface{ Close() error }
	ready chan struct{}
	send  func(string) error
	// stats receives the engine's answers to statsCommand.
	stats chan string
}

// raftEntries asks the engine child how many raft entries it wrote since
// the scale-up.
func (ch *child) raftEntries(ctx context.Context) (int, error) {
	if err := ch.send(statsCommand); err != nil {
		return 0, err
	}
	select {
	case v := <-ch.stats:
		return strconv.Atoi(v)
	case <-ch.done:
		return 0, errors.New("engine exited")
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(30 * time.Second):
		return 0, errors.New("no answer to " + statsCommand)
	}
}

func (ch *child) pid() int { return ch.cmd.Process.Pid }

func (ch *child) exited() bool {
	select {
	case <-ch.done:
		return true
	default:
		return false
	}
}

// stop ends the process: SIGTERM, then SIGKILL after grace.
func (ch *child) stop(grace time.Duration) {
	if ch.exited() {
		return
	}
	_ = ch.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-ch.done:
	case <-time.After(grace):
		_ = ch.cmd.Process.Kill()
		<-ch.done
	}
}

func (b *bench) startKCM(st setting, logPath string) (*child, error) {
	qps, burst := st.QPS, st.Burst
	if qps <= 0 {
		// client-go builds no rate limiter for a negative QPS.
		qps, burst = -1, 0
	}
	args := []string{
		"--kubeconfig=" + b.kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
		"--use-service-account-credentials=false",
		"--controllers=replicaset",
		"--concurrent-replicaset-syncs=5",
		"--kube-api-qps=" + strconv.FormatFloat(float64(qps), 'f', -1, 32),
		"--kube-api-burst=" + strconv.Itoa(burst),
	}
	return startChild(filepath.Join(b.o.binDir, "kube-controller-manager"), args, logPath, false)
}

func (b *bench) startEngine(st setting, run, name, logPath string) (*child, error) {
	dir, err := os.MkdirTemp("", "sidebyside-raft-")
	if err != nil {
		return nil, err
	}
	args := []string{"engine",
		"-kubeconfig=" + b.kubeconfig, "-namespace=" + benchNamespace, "-name=" + name, "-run=" + run,
		"-qps=" + strconv.FormatFloat(float64(st.QPS), 'f', -1, 32), "-burst=" + strconv.Itoa(st.Burst),
		"-burst-replicas=" + strconv.Itoa(b.o.burstReplicas), "-raft-dir=" + dir,
		"-write-timeout=" + b.o.writeTimeout.String(), "-max-inflight=" + strconv.Itoa(b.o.maxInFlight),
	}
	if b.o.profile {
		args = append(args, "-cpuprofile="+strings.TrimSuffix(logPath, ".log")+".cpu.pprof")
	}
	ch, err := startChild(b.self, args, logPath, true)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	go func() { <-ch.done; _ = os.RemoveAll(dir) }()
	return ch, nil
}

// startChild starts a controller process with its output in logPath. With
// control, its stdin takes commands and a READY line on its stdout closes
// ready.
func startChild(path string, args []string, logPath string, control bool) (*child, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", logPath, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	ch := &child{cmd: cmd, done: make(chan struct{}), ready: make(chan struct{})}
	if control {
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		ch.stdin = in
		var mu sync.Mutex
		ch.send = func(line string) error {
			mu.Lock()
			defer mu.Unlock()
			_, err := fmt.Fprintln(in, line)
			return err
		}
		ch.stats = make(chan string, 1)
		go func() {
			sc := bufio.NewScanner(out)
			closed := false
			for sc.Scan() {
				line := sc.Text()
				switch {
				case line == engineReady && !closed:
					close(ch.ready)
					closed = true
				case strings.HasPrefix(line, statsReply+" "):
					select {
					case ch.stats <- strings.TrimPrefix(line, statsReply+" "):
					default:
					}
				}
				fmt.Fprintln(logf, line)
			}
		}()
	} else {
		cmd.Stdout = logf
		close(ch.ready)
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return nil, fmt.Errorf("starting %s: %w", path, err)
	}
	go func() {
		_ = cmd.Wait()
		_ = logf.Close()
		close(ch.done)
	}()
	return ch, nil
}

// podWatch counts the pods of one run as a watch shows them.
type podWatch struct {
	mu     sync.Mutex
	seen   map[string]bool
	want   int
	at     time.Time
	full   chan struct{}
	cancel context.CancelFunc
}

func (b *bench) watchPods(ctx context.Context, run string, want int) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{seen: map[string]bool{}, want: want, full: make(chan struct{}), cancel: cancel}
	f := informers.NewSharedInformerFactoryWithOptions(b.cs, 0, informers.WithNamespace(benchNamespace),
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) {
			lo.LabelSelector = labels.SelectorFromSet(podLabels(run)).String()
		}))
	inf := f.Core().V1().Pods().Informer()
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.seen[p.Name] {
			return
		}
		w.seen[p.Name] = true
		if len(w.seen) == w.want {
			w.at = now
			close(w.full)
		}
	}}); err != nil {
		cancel()
		return nil, err
	}
	f.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, errors.New("pod watch never synced")
	}
	return w, nil
}

func (w *podWatch) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// run is one measured run of one controller.
func (b *bench) run(ctx context.Context, st setting, ctrlName string, pair int) (result, error) {
	r := result{Setting: st.Name, Controller: ctrlName, Pair: pair, Pods: b.o.pods}
	run := fmt.Sprintf("%s-%s-%d", ctrlName, st.Name, pair)
	ctx, cancel := context.WithTimeout(ctx, b.o.runTimeout)
	defer cancel()
	w, err := b.watchPods(ctx, run, b.o.pods)
	if err != nil {
		return r, err
	}
	defer w.cancel()

	logPath := filepath.Join(b.logDir, run+".log")
	var ch *child
	var owner client.Object
	b.proxy.reset()
	switch ctrlName {
	case kcm:
		if ch, err = b.startKCM(st, logPath); err != nil {
			return r, err
		}
		rs := &appsv1.ReplicaSet{
			ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: run},
			Spec: appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: podLabels(run)},
				Template: podTemplate(run)},
		}
		if err := b.cl.Create(ctx, rs); err != nil {
			ch.stop(10 * time.Second)
			return r, fmt.Errorf("creating ReplicaSet: %w", err)
		}
		owner = rs
	default:
		if ch, err = b.startEngine(st, run, run, logPath); err != nil {
			return r, err
		}
		owner = &v1alpha1.MemberReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: benchNamespace, Name: run}}
	}
	defer ch.stop(30 * time.Second)

	// Ready: the controller has synced its owner at 0 replicas.
	if err := b.waitOwner(ctx, ch, owner, 0, false); err != nil {
		return r, fmt.Errorf("waiting for %s to sync its owner (log %s): %w", ctrlName, logPath, err)
	}
	r.Startup = b.proxy.reset()
	before, err := sampleProc(ch.pid())
	if err != nil {
		return r, err
	}
	start := time.Now()
	switch ctrlName {
	case kcm:
		patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, b.o.pods)))
		if err := b.cl.Patch(ctx, owner, patch); err != nil {
			return r, fmt.Errorf("scaling the ReplicaSet: %w", err)
		}
	default:
		if err := ch.send(fmt.Sprintf("SCALE %d", b.o.pods)); err != nil {
			return r, fmt.Errorf("scaling the engine: %w", err)
		}
	}
	select {
	case <-w.full:
	case <-ch.done:
		return r, fmt.Errorf("%s exited (log %s)", ctrlName, logPath)
	case <-ctx.Done():
		return r, fmt.Errorf("%d of %d pods after %v: %w", w.count(), b.o.pods, time.Since(start).Round(time.Second), ctx.Err())
	}
	w.mu.Lock()
	r.Created = w.at.Sub(start)
	w.mu.Unlock()
	if err := b.waitOwner(ctx, ch, owner, b.o.pods, true); err != nil {
		return r, fmt.Errorf("waiting for %s's status to show %d ready pods: %w", ctrlName, b.o.pods, err)
	}
	r.Settled = time.Since(start)
	b.waitQuiet(ctx)
	after, err := sampleProc(ch.pid())
	if err != nil {
		return r, err
	}
	r.Window = b.proxy.reset()
	r.CPU = after.CPU - before.CPU
	r.RaftEntries = -1
	if ctrlName == replicafed {
		if r.RaftEntries, err = ch.raftEntries(ctx); err != nil {
			return r, fmt.Errorf("reading raft entries: %w", err)
		}
	}
	r.PeakRSS = after.PeakRSS
	r.RSSBefore = before.RSS
	ch.stop(30 * time.Second)
	if err := b.cleanup(ctx, run, owner); err != nil {
		return r, err
	}
	return r, nil
}

// waitOwner waits until the run's ReplicaSet or MemberReplicaSet has a
// status for its current generation with want replicas (and, with ready,
// want ready replicas).
func (b *bench) waitOwner(ctx context.Context, ch *child, owner client.Object, want int, ready bool) error {
	select {
	case <-ch.ready:
	case <-ch.done:
		return errors.New("controller exited")
	case <-ctx.Done():
		return ctx.Err()
	}
	return wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if ch.exited() {
			return false, errors.New("controller exited")
		}
		var gen, observed int64
		var replicas, readyReplicas int32
		switch o := owner.(type) {
		case *appsv1.ReplicaSet:
			if err := b.cl.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false, nil //nolint:nilerr // polled again
			}
			gen, observed, replicas, readyReplicas = o.Generation, o.Status.ObservedGeneration, o.Status.Replicas, o.Status.ReadyReplicas
		case *v1alpha1.MemberReplicaSet:
			if err := b.cl.Get(ctx, client.ObjectKeyFromObject(o), o); err != nil {
				return false, nil //nolint:nilerr // not created yet
			}
			gen, observed, replicas, readyReplicas = o.Generation, o.Status.ObservedGeneration, o.Status.Replicas, o.Status.ReadyReplicas
			if ready && o.Spec.Replicas != int32(want) {
				return false, nil
			}
		}
		return gen > 0 && observed == gen && replicas == int32(want) && (!ready || readyReplicas == int32(want)), nil
	})
}

// waitQuiet waits until the controller has made no write for 2 s (events
// are sent asynchronously), at most 30 s.
func (b *bench) waitQuiet(ctx context.Context) {
	last, quietSince := b.proxy.writesSoFar(), time.Now()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(250 * time.Millisecond)
		if n := b.proxy.writesSoFar(); n != last {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= 2*time.Second {
			return
		}
	}
}

// cleanup deletes the run's pods and owner (the controller is stopped) and
// waits until they are gone. A collection delete of thousands of pods can
// outlast the API server's request timeout on a loaded machine while it
// goes on deleting; it is sent again when pods remain and their number
// stopped falling.
func (b *bench) cleanup(ctx context.Context, run string, owner client.Object) error {
	sel := client.MatchingLabels(podLabels(run))
	deletePods := func() error {
		err := b.cl.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(benchNamespace), sel, client.GracePeriodSeconds(0))
		if err != nil && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err) {
			return fmt.Errorf("deleting the pods of %s: %w", run, err)
		}
		return nil
	}
	if err := deletePods(); err != nil {
		return err
	}
	if err := b.cl.Delete(ctx, owner); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the owner of %s: %w", run, err)
	}
	left := -1
	return wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(ctx context.Context) (bool, error) {
		var l corev1.PodList
		if err := b.cl.List(ctx, &l, client.InNamespace(benchNamespace), sel); err != nil {
			return false, nil //nolint:nilerr // polled again
		}
		if n := len(l.Items); n > 0 {
			stalled := n == left
			left = n
			if stalled {
				return false, deletePods()
			}
			return false, nil
		}
		err := b.cl.Get(ctx, client.ObjectKeyFromObject(owner), owner)
		return apierrors.IsNotFound(err), nil
	})
}
