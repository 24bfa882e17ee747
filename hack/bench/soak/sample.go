package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/replicafed/replicafed/hack/bench/fleet/promtext"
	"github.com/replicafed/replicafed/internal/test/loadavg"
)

// sample reads every replica's figures; a replica that does not answer is
// skipped for this round and said so (it is restarting, or loaded).
func (k *soak) sample(ctx context.Context, at float64) {
	for _, r := range k.f.Replicas {
		got, err := promtext.Get(ctx, http.DefaultClient, "http://"+r.MetricsAddress+"/metrics")
		if err != nil {
			say("sampling %s: %v", r.ID, err)
			continue
		}
		s := sample{
			at:         at,
			heap:       got.Sum("go_memstats_heap_inuse_bytes", nil),
			goroutines: got.Sum("go_goroutines", nil),
			lastIndex:  got.Sum("replicafed_raft_last_log_index", nil),
			snapIndex:  got.Sum("replicafed_raft_last_snapshot_index", nil),
		}
		if fi, err := os.Stat(filepath.Join(k.f.Dir, r.ID, "raft", "raft.db")); err == nil {
			s.boltBytes = float64(fi.Size())
		}
		k.samples[r.ID] = append(k.samples[r.ID], s)
	}
}

// report prints each replica's series and the verdicts (and writes them to
// SOAK_OUT), and returns whether every replica stayed flat.
func (k *soak) report() bool {
	var b strings.Builder
	fmt.Fprintf(&b, "Soak: %s; %d changes (%d failed); load at the end %s.\n\n", k, k.changes, k.failed, loadavg.Read())
	b.WriteString("| replica | minute | heap in use MiB | goroutines | raft last index | snapshot index | raft.db MiB |\n")
	b.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	ids := make([]string, 0, len(k.samples))
	for id := range k.samples {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		for _, s := range k.samples[id] {
			fmt.Fprintf(&b, "| %s | %.0f | %.1f | %.0f | %.0f | %.0f | %.1f |\n", id, s.at/60, s.heap/(1<<20),
				s.goroutines, s.lastIndex, s.snapIndex, s.boltBytes/(1<<20))
		}
	}
	b.WriteString("\nVerdict (median of the first third of the samples against the last third):\n\n")
	flat := len(ids) == len(k.f.Replicas)
	if !flat {
		fmt.Fprintf(&b, "- only %d of %d replicas were sampled\n", len(ids), len(k.f.Replicas))
	}
	for _, id := range ids {
		lines, ok := judge(id, k.samples[id], snapshotRule)
		flat = flat && ok
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
	}
	fmt.Println(b.String())
	if k.s.Out != "" {
		if err := os.WriteFile(k.s.Out, []byte(b.String()), 0o644); err != nil {
			say("SOAK_OUT: %v", err)
		}
	}
	return flat
}
