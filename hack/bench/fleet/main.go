// Command fleet benchmarks the whole product on the e2e fleet (a hub, member
// clusters with kwok nodes, three replicafed replicas by default) against what users run
// without it: one ReplicaSet per member under each member's own
// kube-controller-manager at the same client QPS. Scenarios: one
// FederatedReplicaSet scaled from 0 to BENCH_REPLICAS, and BENCH_FRS
// FederatedReplicaSets of BENCH_FRS_REPLICAS each created at once. It prints a
// markdown table of medians over BENCH_RUNS runs; progress goes to stderr.
//
//	make bench-fleet
//	BENCH_REPLICAS=1000 BENCH_FRS=100 BENCH_RUNS=1 make bench-fleet
//
// Settings (environment): BENCH_REPLICAS (10000), BENCH_FRS (1000),
// BENCH_FRS_REPLICAS (10), BENCH_RUNS (3), BENCH_MEMBERS (4),
// BENCH_MEMBER_QPS (20), BENCH_MEMBER_BURST (30), BENCH_SCENARIOS
// ("single,many"), BENCH_SYSTEMS ("replicafed,kcm"), BENCH_CONFIG (JSON merged
// into every replica's configuration), BENCH_OUT (also write the table there),
// BENCH_RAW (write every run's raw figures there, JSON lines), BENCH_SERVERS
// (replicafed replicas, 3; at most 7), BENCH_PROFILE (a directory: turn on
// metrics.profiling, save every replica's CPU profile of the run's first
// 1.5 QPS ideals and its heap profile at the end of each replicafed run
// there, and fill the columns of the largest replica's pod
// cache and raft caches from them; GODEBUG=memprofilerate=4096 in the
// environment gives the replicas a finer sampling), BENCH_DELETE (a
// duration: each replicafed run's cleanup first deletes its
// FederatedReplicaSets through the hub alone and times, for up to that
// long, replicafed's removal of them, their MemberReplicaSets and pods,
// with the requests it cost; without it the cleanup deletes the members'
// objects directly, which is faster), BENCH_STRATEGY (the FederatedReplicaSets'
// spec.placement.strategy, for example Packed; unset leaves the API default,
// Weighted), BENCH_FINALIZER_POLICY (off: leave out the hub's admission
// policy that adds the cascade finalizer, so replicafed PATCHes it in, as on
// hubs older than Kubernetes 1.36). With sharding on in
// BENCH_CONFIG, each replicafed run starts once the members' owners are
// balanced over the replicas, so that no start-up handover falls inside it.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/hack/bench/envset"
)

// settings are the benchmark's knobs.
type settings struct {
	Replicas, FRS, FRSReplicas, Runs, Members int
	// Servers is how many replicafed replicas run.
	Servers            int
	MemberQPS          float64
	MemberBurst        int
	Scenarios, Systems []string
	Config             map[string]any
	Out, Raw           string
	// Profile is where heap profiles go; empty takes none.
	Profile string
	// Idle is the steady-state window measured after each replicafed run.
	Idle time.Duration
	// Binary is a prebuilt replicafed (to compare builds); empty builds
	// this checkout.
	Binary string
	// DeleteTimeout, when set, has each replicafed run's cleanup first
	// delete the FederatedReplicaSets through the hub alone and wait up
	// to it for replicafed to remove everything (BENCH_DELETE).
	DeleteTimeout time.Duration
	// Strategy is the FederatedReplicaSets' placement strategy; empty
	// leaves the API default (BENCH_STRATEGY).
	Strategy v1alpha1.PlacementStrategy
	// NoFinalizerPolicy leaves the finalizer admission policy out of the
	// hub (BENCH_FINALIZER_POLICY=off).
	NoFinalizerPolicy bool
}

func loadSettings() (settings, error) {
	s := settings{Servers: 3, Replicas: 10000, FRS: 1000, FRSReplicas: 10, Runs: 3, Members: 4, MemberQPS: 20, MemberBurst: 30,
		Scenarios: []string{scenarioSingle, scenarioMany}, Systems: []string{systemReplicafed, systemKCM}}
	ints := map[string]*int{"BENCH_REPLICAS": &s.Replicas, "BENCH_FRS": &s.FRS, "BENCH_FRS_REPLICAS": &s.FRSReplicas,
		"BENCH_RUNS": &s.Runs, "BENCH_MEMBERS": &s.Members, "BENCH_MEMBER_BURST": &s.MemberBurst, "BENCH_SERVERS": &s.Servers}
	if err := envset.PositiveInts(os.Getenv, ints); err != nil {
		return s, err
	}
	if err := envset.Members("BENCH_MEMBERS", s.Members); err != nil {
		return s, err
	}
	if s.Servers > 7 {
		return s, fmt.Errorf("BENCH_SERVERS=%d: at most 7 replicafed replicas", s.Servers)
	}
	if v := os.Getenv("BENCH_MEMBER_QPS"); v != "" {
		q, err := strconv.ParseFloat(v, 64)
		if err != nil || q <= 0 {
			return s, fmt.Errorf("BENCH_MEMBER_QPS=%q: want a positive number", v)
		}
		s.MemberQPS = q
	}
	lists := map[string]struct {
		dst     *[]string
		allowed []string
	}{
		"BENCH_SCENARIOS": {&s.Scenarios, []string{scenarioSingle, scenarioMany}},
		"BENCH_SYSTEMS":   {&s.Systems, []string{systemReplicafed, systemKCM}},
	}
	for key, l := range lists {
		v := os.Getenv(key)
		if v == "" {
			continue
		}
		*l.dst = nil
		for _, item := range strings.Split(v, ",") {
			item = strings.TrimSpace(item)
			if !contains(l.allowed, item) {
				return s, fmt.Errorf("%s: %q is not one of %v", key, item, l.allowed)
			}
			*l.dst = append(*l.dst, item)
		}
	}
	if v := os.Getenv("BENCH_CONFIG"); v != "" {
		if err := json.Unmarshal([]byte(v), &s.Config); err != nil {
			return s, fmt.Errorf("BENCH_CONFIG: %w", err)
		}
	}
	s.Out, s.Raw, s.Binary = os.Getenv("BENCH_OUT"), os.Getenv("BENCH_RAW"), os.Getenv("BENCH_BINARY")
	s.Profile = os.Getenv("BENCH_PROFILE")
	s.Idle = 20 * time.Second
	if v := os.Getenv("BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return s, fmt.Errorf("BENCH_IDLE=%q: want a duration such as 20s (0 skips the window)", v)
		}
		s.Idle = d
	}
	return s, loadRunSettings(&s)
}

// loadRunSettings reads the settings of what each run does: its cleanup,
// its objects' strategy and the hub's policies.
func loadRunSettings(s *settings) error {
	if v := os.Getenv("BENCH_DELETE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("BENCH_DELETE=%q: want how long to wait for the deletion, such as 20m", v)
		}
		s.DeleteTimeout = d
	}
	if v := os.Getenv("BENCH_STRATEGY"); v != "" {
		if !slices.Contains(v1alpha1.PlacementStrategies, v1alpha1.PlacementStrategy(v)) {
			return fmt.Errorf("BENCH_STRATEGY: %q is not one of %v", v, v1alpha1.PlacementStrategies)
		}
		s.Strategy = v1alpha1.PlacementStrategy(v)
	}
	switch v := os.Getenv("BENCH_FINALIZER_POLICY"); v {
	case "", "on":
	case "off":
		s.NoFinalizerPolicy = true
	default:
		return fmt.Errorf("BENCH_FINALIZER_POLICY=%q: want on or off", v)
	}
	return nil
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func main() {
	s, err := loadSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, s); err != nil {
		fmt.Fprintln(os.Stderr, "bench-fleet:", err)
		os.Exit(1)
	}
}
