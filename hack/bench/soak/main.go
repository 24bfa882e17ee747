// Command soak holds the e2e fleet (a hub, member clusters with kwok nodes,
// three replicafed replicas) in a long steady state: SOAK_FRS
// FederatedReplicaSets, one of them scaled to a random size every
// SOAK_CHANGE_EVERY, for SOAK_DURATION. Every SOAK_SAMPLE_EVERY it reads each
// replica's heap in use, goroutines, raft log position and snapshot index,
// and the size of its raft log store on disk; at the end it prints the
// series and judges, per replica, whether each stayed flat (verdict.go),
// exiting 1 when one grew. It is `make soak`, not part of `make test`.
//
// The replicas run with the product's raft snapshot settings except
// raft.trailingLogs: the default keeps 10,240 entries after each snapshot,
// which at this change rate (about 3 entries a change) takes about an hour
// to fill, so within 30 minutes the log store would only grow towards its
// bound. SOAK_TRAILING_LOGS (1024) lets the run reach the compacted size
// and show it holding; set it to 10240 for the default over a longer run.
//
//	make soak
//	SOAK_DURATION=5m SOAK_FRS=200 make soak
//
// Settings (environment): SOAK_DURATION (30m), SOAK_FRS (1000),
// SOAK_MAX_REPLICAS (4: each FRS is sized 0 to this), SOAK_MEMBERS (4),
// SOAK_CHANGE_EVERY (1s), SOAK_SAMPLE_EVERY (1m), SOAK_SEED (1),
// SOAK_TRAILING_LOGS (1024), SOAK_OUT (also write the report there).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/replicafed/replicafed/hack/bench/envset"
)

// settings are the soak's knobs.
type settings struct {
	Duration, ChangeEvery, SampleEvery time.Duration
	FRS, MaxReplicas, Members          int
	TrailingLogs                       int
	Seed                               int64
	Out                                string
}

func loadSettings() (settings, error) {
	s := settings{Duration: 30 * time.Minute, ChangeEvery: time.Second, SampleEvery: time.Minute,
		FRS: 1000, MaxReplicas: 4, Members: 4, TrailingLogs: 1024, Seed: 1, Out: os.Getenv("SOAK_OUT")}
	durations := map[string]*time.Duration{"SOAK_DURATION": &s.Duration, "SOAK_CHANGE_EVERY": &s.ChangeEvery,
		"SOAK_SAMPLE_EVERY": &s.SampleEvery}
	if err := envset.PositiveDurations(os.Getenv, durations); err != nil {
		return s, err
	}
	ints := map[string]*int{"SOAK_FRS": &s.FRS, "SOAK_MAX_REPLICAS": &s.MaxReplicas, "SOAK_MEMBERS": &s.Members,
		"SOAK_TRAILING_LOGS": &s.TrailingLogs}
	if err := envset.PositiveInts(os.Getenv, ints); err != nil {
		return s, err
	}
	if err := envset.Members("SOAK_MEMBERS", s.Members); err != nil {
		return s, err
	}
	if v := os.Getenv("SOAK_SEED"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return s, fmt.Errorf("SOAK_SEED=%q: want an integer", v)
		}
		s.Seed = n
	}
	if s.Duration < 6*s.SampleEvery {
		return s, fmt.Errorf("SOAK_DURATION=%s is under six SOAK_SAMPLE_EVERY (%s): too few samples to judge", s.Duration, s.SampleEvery)
	}
	return s, nil
}

func main() {
	s, err := loadSettings()
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	flat, err := run(ctx, s)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(2)
	}
	if !flat {
		os.Exit(1)
	}
}
