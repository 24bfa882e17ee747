package main

import (
	"fmt"
	"slices"
	"strings"
)

// sample is one replica's figures at one moment of the soak.
type sample struct {
	at         float64 // seconds since the steady state began
	heap       float64 // go_memstats_heap_inuse_bytes
	goroutines float64
	lastIndex  float64 // replicafed_raft_last_log_index
	snapIndex  float64 // replicafed_raft_last_snapshot_index
	boltBytes  float64 // size of the raft log store on disk
}

// bound says how much a figure may grow between the first and the last
// third of the soak: a ratio of the first third's median plus an absolute
// slack (for figures near zero).
type bound struct {
	name  string
	get   func(sample) float64
	ratio float64
	slack float64
}

// bounds are what "stays flat" means. Heap moves with GC timing and the
// informers' churn, so a quarter; goroutines are counted, so a few; the
// raft log store is bounded by snapshots and the trailing logs, and bolt
// reuses freed pages, so its file stops growing once the log has been
// compacted past the trailing logs.
var bounds = []bound{
	{"heap in use", func(s sample) float64 { return s.heap }, 1.25, 8 << 20},
	{"goroutines", func(s sample) float64 { return s.goroutines }, 1.05, 20},
	{"raft log store on disk", func(s sample) float64 { return s.boltBytes }, 1.25, 2 << 20},
}

// raftRule is the raft settings the soak runs with: raft snapshots once
// threshold entries are new at a check every interval, so the entries
// since the last snapshot stay under threshold plus what two intervals add.
type raftRule struct {
	threshold float64
	interval  float64 // seconds
}

// limit is the most entries since a snapshot the samples may show.
func (r raftRule) limit(ss []sample) float64 {
	rate := 0.0 // entries per second, the fastest seen between samples
	for i := 1; i < len(ss); i++ {
		if dt := ss[i].at - ss[i-1].at; dt > 0 {
			rate = max(rate, (ss[i].lastIndex-ss[i-1].lastIndex)/dt)
		}
	}
	return r.threshold + 2*rate*r.interval
}

// judge compares each bound's median over the first and the last third of
// one replica's samples, and checks that the entries since the last
// snapshot never exceed the raft rule's limit in the last two thirds (the
// first snapshot may come late); it returns a line per check and whether
// all held. Fewer than six samples cannot show a trend.
func judge(replica string, ss []sample, rule raftRule) (lines []string, ok bool) {
	if len(ss) < 6 {
		return []string{fmt.Sprintf("%s: %d samples, need 6 or more to judge", replica, len(ss))}, false
	}
	third := len(ss) / 3
	ok = true
	for _, b := range bounds {
		first, last := median(ss[:third], b.get), median(ss[len(ss)-third:], b.get)
		limit := first*b.ratio + b.slack
		verdict := "flat"
		if last > limit {
			verdict, ok = "GROWING", false
		}
		lines = append(lines, fmt.Sprintf("%s: %s first third %s, last third %s (limit %s): %s",
			replica, b.name, human(b.name, first), human(b.name, last), human(b.name, limit), verdict))
	}
	most, limit := 0.0, rule.limit(ss)
	for _, s := range ss[third:] {
		most = max(most, s.lastIndex-s.snapIndex)
	}
	verdict := "bounded"
	if most > limit {
		verdict, ok = "GROWING", false
	}
	lines = append(lines, fmt.Sprintf("%s: raft entries since snapshot at most %.0f after the first third (limit %.0f): %s",
		replica, most, limit, verdict))
	return lines, ok
}

func median(ss []sample, get func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = get(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

// human prints bytes as MiB and counts as integers.
func human(name string, v float64) string {
	if strings.Contains(name, "heap") || strings.Contains(name, "disk") {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}
