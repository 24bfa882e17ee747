package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/logging"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/writefence"
)

// memberName is the member the engine child serves.
const memberName = "member"

// The engine child's protocol: it prints engineReady once it may write;
// "SCALE <n>" on its stdin sets the target; statsCommand makes it print
// statsReply and the number of raft entries since the first SCALE.
const (
	engineReady  = "READY"
	statsCommand = "STATS"
	statsReply   = "RAFT_ENTRIES"
)

// runEngine is the child process that runs replicafed's member engine the
// way a replicafed replica does (worker.Manager with its informers and
// transforms, a raft node with the raft-backed expectations store and its
// write gate, the member client's rate limit, write deadline and lease
// fence, the leader's 10 s re-enqueue of every MemberReplicaSet), for one
// MemberReplicaSet whose target it reads from stdin ("SCALE <n>"). The hub
// is left out: the target comes from the benchmark, not from a planner.
// It stops when stdin closes or on SIGTERM.
func runEngine(args []string) error {
	fs := flag.NewFlagSet("engine", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "member kubeconfig")
	namespace := fs.String("namespace", "", "namespace of the MemberReplicaSet")
	name := fs.String("name", "", "name of the MemberReplicaSet")
	run := fs.String("run", "", "run label value of the pod template")
	qps := fs.Float64("qps", 0, "member client QPS; <= 0 turns the limit off (controller.memberRateLimit=false)")
	burst := fs.Int("burst", 0, "member client burst")
	burstReplicas := fs.Int("burst-replicas", 0, "controller.burstReplicas; 0 keeps the product default")
	dataDir := fs.String("raft-dir", "", "raft data directory")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile from the first SCALE until exit to this file")
	writeTimeout := fs.Duration("write-timeout", -1, "controller.memberWriteTimeout; negative keeps the product default, 0 turns the deadline off")
	maxInFlight := fs.Int("max-inflight", writefence.DefaultMaxInFlight, "member writes in flight at once (writefence.Bounded); <= 0: no bound")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *kubeconfig == "" || *namespace == "" || *name == "" || *dataDir == "" {
		return errors.New("engine: -kubeconfig, -namespace, -name and -raft-dir are required")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()

	// SIDEBYSIDE_ENGINE_LOG_LEVEL (e.g. 2) shows the engine's decisions.
	log, err := logging.New(config.Logging{Level: envString("SIDEBYSIDE_ENGINE_LOG_LEVEL", "info"), Format: config.FormatJSON})
	if err != nil {
		return err
	}
	ctrl.SetLogger(log)
	ctx = ctrl.LoggerInto(ctx, log)

	cfg, err := productConfig(*dataDir)
	if err != nil {
		return err
	}
	if *burstReplicas > 0 {
		cfg.Controller.BurstReplicas = *burstReplicas
	}
	if *writeTimeout >= 0 {
		cfg.Controller.MemberWriteTimeout = *writeTimeout
	}
	cfg.Controller.MemberRateLimit = *qps > 0
	cfg.Controller.MemberQPS, cfg.Controller.MemberBurst = float32(*qps), *burst

	n, err := node.New(raftNodeConfig(cfg), log.WithName("raft"))
	if err != nil {
		return fmt.Errorf("starting raft node: %w", err)
	}
	defer func() { _ = n.Shutdown() }()
	store := raftexp.New(n, log.WithName("expectations"))
	go store.Run(ctx)
	if err := waitGate(ctx, n, time.Minute); err != nil {
		return err
	}

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading member kubeconfig: %w", err)
	}
	if err := memberClient(rc, cfg.Controller, n, *maxInFlight); err != nil {
		return fmt.Errorf("configuring the member client: %w", err)
	}
	cl, err := cluster.New(rc, func(o *cluster.Options) {
		o.Scheme = kubescheme.Must()
		worker.CacheOptionsFor(cfg.Controller.MaxCachedPodsPerMember)(o)
	})
	if err != nil {
		return fmt.Errorf("creating member cluster: %w", err)
	}
	go func() {
		if err := cl.Start(ctx); err != nil {
			log.Error(err, "Member cluster stopped")
		}
	}()

	key := fedref.MemberObject{Cluster: memberName, Namespace: *namespace, Name: *name}
	src := &fixedSource{w: engine.Workload{
		Key: key, Selector: &metav1.LabelSelector{MatchLabels: podLabels(*run)}, Template: podTemplate(*run),
		Hub: v1alpha1.HubReference{Namespace: "hub", Name: *name, UID: types.UID("hub-" + *name)},
	}}
	mgr := worker.NewManager(worker.Options{
		Workers: cfg.Controller.Workers, BurstReplicas: cfg.Controller.BurstReplicas, CreateNamespaces: cfg.Controller.CreateNamespaces,
		Store: store, Source: src, Gate: n, MaxCachedPods: cfg.Controller.MaxCachedPodsPerMember,
		UnsatisfiedRequeue: min(cfg.Controller.ExpectationsTTL/10, engine.DefaultUnsatisfiedRequeue),
	})
	if err := mgr.Engage(ctx, memberName, cl); err != nil {
		return fmt.Errorf("engaging the member: %w", err)
	}
	defer mgr.Stop()
	go resync(ctx, mgr)
	mgr.Enqueue(key)
	fmt.Println(engineReady)

	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	profiling := false
	var scaledAt uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case line, ok := <-lines:
			if !ok {
				return nil
			}
			if line == statsCommand {
				// Raft entries since the scale-up (including its own
				// leadership and configuration entries: none after start).
				fmt.Printf("%s %d\n", statsReply, n.Raft().LastIndex()-scaledAt)
				continue
			}
			target, err := parseScale(line)
			if err != nil {
				log.Error(err, "Ignoring command")
				continue
			}
			if *cpuProfile != "" && !profiling {
				stopProfile, err := startCPUProfile(*cpuProfile)
				if err != nil {
					return err
				}
				defer stopProfile()
				profiling = true
			}
			if scaledAt == 0 {
				scaledAt = n.Raft().LastIndex()
			}
			src.setTarget(target)
			mgr.Enqueue(key)
		}
	}
}

// startCPUProfile starts a CPU profile written to path when stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// parseScale reads "SCALE <n>".
func parseScale(line string) (int32, error) {
	f := strings.Fields(line)
	if len(f) != 2 || f[0] != "SCALE" {
		return 0, fmt.Errorf("want \"SCALE <n>\", got %q", line)
	}
	n, err := strconv.ParseInt(f[1], 10, 32)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("bad replica count in %q", line)
	}
	return int32(n), nil
}

// productConfig is replicafed's default configuration (config.Load with no
// file and no environment) for a single replica with its raft data in dir.
func productConfig(dir string) (*config.Config, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// Required by the configuration, never served here.
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	fs := pflag.NewFlagSet("replicafed", pflag.ContinueOnError)
	config.BindFlags(fs)
	flag := func(key, val string) string { return "--" + config.FlagName(key) + "=" + val }
	args := []string{
		flag("raft.id", "bench"), flag("raft.peers", "bench="+addr), flag("raft.bindAddress", addr),
		flag("raft.dataDir", dir), flag("raft.tls.insecure", "true"), flag("raft.adminAddress", admin),
		flag("metrics.bindAddress", "0"), flag("health.probeAddress", "0"),
	}
	cfg, err := config.Load(fs, args, nil)
	if err != nil {
		return nil, fmt.Errorf("loading replicafed's default configuration: %w", err)
	}
	return cfg, nil
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// raftNodeConfig maps the configuration onto the raft node, as a replica
// does.
func raftNodeConfig(cfg *config.Config) node.NodeConfig {
	r := cfg.Raft
	nc := node.NodeConfig{
		ID: r.ID, ClusterID: r.ClusterID, BindAddr: r.BindAddress, AdvertiseAddr: r.AdvertiseAddress, DataDir: r.DataDir,
		HeartbeatTimeout: r.HeartbeatTimeout, ElectionTimeout: r.ElectionTimeout, LeaderLeaseTimeout: r.LeaderLeaseTimeout,
		CommitTimeout: r.CommitTimeout, MaxAppendEntries: r.MaxAppendEntries, SnapshotInterval: r.SnapshotInterval,
		SnapshotThreshold: uint64(r.SnapshotThreshold), TrailingLogs: uint64(r.TrailingLogs), ApplyTimeout: r.ApplyTimeout,
		ObservationBatchSize: r.ObservationBatchSize, ObservationFlushInterval: r.ObservationFlushInterval,
		ExpectationsTTL: cfg.Controller.ExpectationsTTL, DeadServerTimeout: r.DeadServerTimeout,
		TLS: node.TLSFiles{Insecure: r.TLS.Insecure},
	}
	for _, p := range r.Peers {
		nc.Peers = append(nc.Peers, node.Peer{ID: p.ID, Address: p.Address})
	}
	return nc
}

// waitGate waits until the single raft node leads and may write to members.
func waitGate(ctx context.Context, n *node.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, ok := n.Allowed(); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raft node not leading after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// memberClient sets up the member client as a replica does: the member
// rate limit (or none), the user agent, and every write bounded by
// controller.memberWriteTimeout with pod writes sent only under the raft
// write lease, at most maxInFlight at once.
func memberClient(rc *rest.Config, c config.Controller, n *node.Node, maxInFlight int) error {
	if c.MemberRateLimit {
		rc.QPS, rc.Burst = c.MemberQPS, c.MemberBurst
	} else {
		rc.QPS, rc.Burst = -1, 0
	}
	rc.UserAgent = "replicafed"
	d := c.MemberWriteTimeout
	return writefence.Bounded(d, func() bool { return n.WriteLease(d) }, maxInFlight)(rc)
}

// resync re-enqueues every MemberReplicaSet every 10 s, as the leader does.
func resync(ctx context.Context, mgr *worker.Manager) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mgr.EnqueueAll(ctx)
		}
	}
}

// fixedSource is the hub's answer for one workload, with a target the
// benchmark sets.
type fixedSource struct {
	mu sync.Mutex
	w  engine.Workload
}

func (s *fixedSource) Workload(k fedref.MemberObject) (*engine.Workload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if k != s.w.Key {
		return nil, false
	}
	w := s.w
	return &w, true
}

func (s *fixedSource) setTarget(n int32) {
	s.mu.Lock()
	s.w.Target = n
	s.mu.Unlock()
}
