package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/hack/bench/enginerig"
	"github.com/replicafed/replicafed/internal/logging"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/replica/writefence"
)

// The engine child's protocol: it prints engineReady once it may write;
// "SCALE <n>" on its stdin sets the target; statsCommand makes it print
// statsReply and the number of raft entries since the first SCALE.
const (
	engineReady  = "READY"
	statsCommand = "STATS"
	statsReply   = "RAFT_ENTRIES"
)

// runEngine is the child process that runs replicafed's member engine the
// way a replicafed replica does (enginerig: worker.Manager with its
// informers and transforms, a raft node with the raft-backed expectations
// store and its write gate, the member client's rate limit, write
// deadline, in-flight bound and lease fence, the leader's 10 s re-enqueue
// of every MemberReplicaSet), for one
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

	rc, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading member kubeconfig: %w", err)
	}
	if *maxInFlight <= 0 {
		*maxInFlight = -1 // enginerig: no bound
	}
	rig, err := enginerig.Start(ctx, enginerig.Options{Member: rc, DataDir: *dataDir, QPS: float32(*qps), Burst: *burst,
		BurstReplicas: *burstReplicas, WriteTimeout: *writeTimeout, MaxInFlight: *maxInFlight,
		Tolerations: []corev1.Toleration{testcluster.KwokToleration}, Log: log})
	if err != nil {
		return err
	}
	defer rig.Stop()
	n := rig.Node
	key := enginerig.Key(*namespace, *name)
	rig.SetTarget(key, *run, 0)
	// The owner exists at zero before the scale-up, as the ReplicaSet
	// kube-controller-manager scales does (the engine creates none for
	// a target of zero).
	if err := rig.CreateOwner(ctx, key); err != nil {
		return err
	}
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
			rig.SetTarget(key, *run, target)
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
