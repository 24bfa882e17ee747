// Package report turns fleet benchmark runs into figures and a markdown
// table: per-pod and per-FRS ratios, medians over runs. It is pure.
package report

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// NA marks a figure that does not apply to a system (kube-controller-manager
// has no raft log, no hub).
var NA = math.NaN()

// Run is what one scenario run of one system measured.
type Run struct {
	// Scenario and System name the row.
	Scenario, System string
	// Pods created; FRS is the number of workload objects (FRS or, for the
	// baseline, ReplicaSets per member).
	Pods, FRS int
	// Created and Ready are the times from the first write of the
	// benchmark until every pod existed, and until every pod was Ready.
	Created, Ready time.Duration
	// Stalled runs did not reach every pod Ready in time: their times
	// are left out, their per-pod figures kept.
	Stalled bool `json:",omitempty"`
	// Ideal is the member QPS bound: the most pods any member had to
	// create, over the member client QPS.
	Ideal time.Duration
	// RaftEntries is the leader's applied index delta.
	RaftEntries float64
	// RaftEntryKinds break down the raft entries the replicas proposed
	// while leading by what they carried (replicafed_raft_entries_proposed_total:
	// a command type, or "batch:" and the types of a shared entry), and
	// RaftCommands the commands in them by type; nil for the baseline.
	RaftEntryKinds map[string]float64 `json:",omitempty"`
	RaftCommands   map[string]float64 `json:",omitempty"`
	// PodWrites are create/update/patch/delete requests on pods (not their
	// status or binding) the member API servers served.
	PodWrites float64
	// MemberWrites are every write the controller sent to the members
	// (pods, its own objects and their status, events).
	MemberWrites float64
	// HubWrites are every write replicafed sent to the hub.
	HubWrites float64
	// LeaderCPU is the leader's CPU seconds; FollowerCPU the followers' mean.
	LeaderCPU, FollowerCPU float64
	// LeaderHeap and FollowerHeap are the growth of the live heap (bytes
	// after GC) from before the run to its end; for the baseline, the
	// controller-manager's resident set growth.
	LeaderHeap, FollowerHeap float64
	// MaxHeap is the largest live heap growth of any one replica, leader
	// or not (memory per replica when the members are sharded); for the
	// baseline, the largest controller-manager's resident set growth.
	MaxHeap float64
	// PodCache and RaftCaches are, from heap profiles taken at the end of
	// the run (BENCH_PROFILE), the largest replica's in-use bytes of the
	// member pod caches and of raft's bounded caches (recent entries,
	// remembered results); 0 when no profile was taken.
	PodCache, RaftCaches float64 `json:",omitempty"`
	// StatusWrites are FederatedReplicaSet status writes on the hub.
	StatusWrites float64
	// StatusComplete is the time from the first write until every
	// FederatedReplicaSet's hub status showed all its replicas Ready
	// (replicafed only; 0 when not measured or not reached).
	StatusComplete time.Duration `json:",omitempty"`
	// EventSeries counts the event series replicafed left in the run's
	// namespace (members and hub). client-go writes each series' final
	// count once more after 6 to 12 quiet minutes, outside the run's
	// window: a write the run causes but does not count. NaN for the
	// baseline (kube-controller-manager's core events are not deferred).
	EventSeries float64
	// Idle is what the fleet cost while nothing changed, after the run
	// (replicafed only; nil when not measured).
	Idle *Idle `json:",omitempty"`
	// Writes break the API servers' write requests of the run down by
	// "member|hub resource[/subresource] VERB code" (every client's,
	// scheduler and kwok included), for reading where writes went.
	Writes map[string]float64 `json:",omitempty"`
}

// Idle is a window after a run in which nothing was asked of the fleet.
type Idle struct {
	Seconds float64
	// LeaderCPU is the leader's CPU seconds in the window.
	LeaderCPU float64
	// RaftEntries, HubWrites, MemberWrites and StatusWrites count what
	// replicafed did in the window.
	RaftEntries, HubWrites, MemberWrites, StatusWrites float64
	// Writes break the window's writes down as Run.Writes does.
	Writes map[string]float64 `json:",omitempty"`
}

// Figures are the derived numbers of one run, in table order.
type Figures struct {
	Created, Ready, Ideal         float64 // seconds
	CreatedRatio, ReadyRatio      float64 // over Ideal
	RaftPer1k                     float64 // raft entries per 1,000 pods
	PodWritesPerPod               float64
	WritesPerPod                  float64 // member + hub writes per pod
	LaterWritesPerPod             float64 // event series' final writes, after the run, per pod
	HubWritesPerPod               float64
	LeaderCPUPer1k, FollowerCPU1k float64 // CPU seconds per 1,000 pods
	LeaderHeapPer1k, FollowerHeap float64 // MiB per 1,000 pods
	MaxHeapPer1k                  float64 // MiB per 1,000 pods, largest replica
	PodCacheMiB, RaftCachesMiB    float64 // largest replica's, from its heap profile
	StatusPerFRSMin               float64 // status writes per FRS per minute (until Ready)
	StatusComplete                float64 // seconds until every FRS status showed its pods Ready
}

// Derive computes the figures of one run.
func Derive(r Run) Figures {
	per := func(v float64, unit float64) float64 {
		if r.Pods == 0 {
			return NA
		}
		return v / float64(r.Pods) * unit
	}
	f := Figures{
		Created: r.Created.Seconds(), Ready: r.Ready.Seconds(), Ideal: r.Ideal.Seconds(),
		RaftPer1k:         per(r.RaftEntries, 1000),
		PodWritesPerPod:   per(r.PodWrites, 1),
		HubWritesPerPod:   per(r.HubWrites, 1),
		LaterWritesPerPod: per(r.EventSeries, 1),
		LeaderCPUPer1k:    per(r.LeaderCPU, 1000),
		FollowerCPU1k:     per(r.FollowerCPU, 1000),
		LeaderHeapPer1k:   per(r.LeaderHeap/(1<<20), 1000),
		FollowerHeap:      per(r.FollowerHeap/(1<<20), 1000),
		MaxHeapPer1k:      per(r.MaxHeap/(1<<20), 1000),
		CreatedRatio:      NA, ReadyRatio: NA, StatusPerFRSMin: NA, StatusComplete: NA,
		PodCacheMiB: NA, RaftCachesMiB: NA,
	}
	if r.PodCache > 0 || r.RaftCaches > 0 {
		f.PodCacheMiB, f.RaftCachesMiB = r.PodCache/(1<<20), r.RaftCaches/(1<<20)
	}
	if r.StatusComplete > 0 {
		f.StatusComplete = r.StatusComplete.Seconds()
	}
	f.WritesPerPod = per(r.MemberWrites+nanZero(r.HubWrites), 1)
	if r.Stalled {
		f.Created, f.Ready = NA, NA
	}
	if r.Ideal > 0 && !r.Stalled {
		f.CreatedRatio = r.Created.Seconds() / r.Ideal.Seconds()
		f.ReadyRatio = r.Ready.Seconds() / r.Ideal.Seconds()
	}
	if r.FRS > 0 && r.Ready > 0 && !r.Stalled && !math.IsNaN(r.StatusWrites) {
		f.StatusPerFRSMin = r.StatusWrites / float64(r.FRS) / r.Ready.Minutes()
	}
	return f
}

func nanZero(v float64) float64 {
	if math.IsNaN(v) {
		return 0
	}
	return v
}

// Median is the median of the values that apply (NaN when none does).
func Median(vs []float64) float64 {
	var xs []float64
	for _, v := range vs {
		if !math.IsNaN(v) {
			xs = append(xs, v)
		}
	}
	if len(xs) == 0 {
		return NA
	}
	slices.Sort(xs)
	if len(xs)%2 == 1 {
		return xs[len(xs)/2]
	}
	return (xs[len(xs)/2-1] + xs[len(xs)/2]) / 2
}

// column is one table column: a header and how to read and format it.
type column struct {
	head   string
	get    func(Figures) float64
	digits int
}

var columns = []column{
	{"created s", func(f Figures) float64 { return f.Created }, 1},
	{"ready s", func(f Figures) float64 { return f.Ready }, 1},
	{"ideal s", func(f Figures) float64 { return f.Ideal }, 1},
	{"created/ideal", func(f Figures) float64 { return f.CreatedRatio }, 2},
	{"ready/ideal", func(f Figures) float64 { return f.ReadyRatio }, 2},
	{"raft entries /1k pods", func(f Figures) float64 { return f.RaftPer1k }, 1},
	{"pod writes /pod", func(f Figures) float64 { return f.PodWritesPerPod }, 3},
	{"all writes /pod", func(f Figures) float64 { return f.WritesPerPod }, 3},
	{"later event writes /pod", func(f Figures) float64 { return f.LaterWritesPerPod }, 3},
	{"hub writes /pod", func(f Figures) float64 { return f.HubWritesPerPod }, 3},
	{"leader CPU s /1k pods", func(f Figures) float64 { return f.LeaderCPUPer1k }, 2},
	{"follower CPU s /1k pods", func(f Figures) float64 { return f.FollowerCPU1k }, 2},
	{"leader heap MiB /1k pods", func(f Figures) float64 { return f.LeaderHeapPer1k }, 2},
	{"follower heap MiB /1k pods", func(f Figures) float64 { return f.FollowerHeap }, 2},
	{"largest replica heap MiB /1k pods", func(f Figures) float64 { return f.MaxHeapPer1k }, 2},
	{"largest pod cache MiB (profile)", func(f Figures) float64 { return f.PodCacheMiB }, 1},
	{"largest raft caches MiB (profile)", func(f Figures) float64 { return f.RaftCachesMiB }, 1},
	{"status writes /FRS/min", func(f Figures) float64 { return f.StatusPerFRSMin }, 2},
	{"hub status complete s", func(f Figures) float64 { return f.StatusComplete }, 1},
}

// Table renders one row per scenario and system (in first-seen order), each
// figure the median over that row's runs, as a markdown table.
func Table(runs []Run) string {
	type key struct{ scenario, system string }
	var order []key
	rows := map[key][]Figures{}
	pods := map[key]int{}
	stalled := map[key]int{}
	for _, r := range runs {
		k := key{r.Scenario, r.System}
		if _, ok := rows[k]; !ok {
			order = append(order, k)
		}
		rows[k] = append(rows[k], Derive(r))
		pods[k] = r.Pods
		if r.Stalled {
			stalled[k]++
		}
	}
	var b strings.Builder
	b.WriteString("| scenario | system | runs | pods |")
	for _, c := range columns {
		b.WriteString(" " + c.head + " |")
	}
	b.WriteString("\n|---|---|---|---|")
	for range columns {
		b.WriteString("---|")
	}
	b.WriteString("\n")
	for _, k := range order {
		fs := rows[k]
		runs := fmt.Sprint(len(fs))
		if n := stalled[k]; n > 0 {
			runs += fmt.Sprintf(" (%d stalled)", n)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d |", k.scenario, k.system, runs, pods[k])
		for _, c := range columns {
			vs := make([]float64, len(fs))
			for i, f := range fs {
				vs[i] = c.get(f)
			}
			b.WriteString(" " + format(Median(vs), c.digits) + " |")
		}
		b.WriteString("\n")
	}
	return b.String()
}

func format(v float64, digits int) string {
	if math.IsNaN(v) {
		return "–"
	}
	return fmt.Sprintf("%.*f", digits, v)
}

// MarshalJSON writes a run with the figures that do not apply (NaN, which
// JSON cannot carry) as zero and named in "NA".
func (r Run) MarshalJSON() ([]byte, error) {
	type plain Run
	p := plain(r)
	var na []string
	v := reflect.ValueOf(&p).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Float64 && math.IsNaN(f.Float()) {
			f.SetFloat(0)
			na = append(na, v.Type().Field(i).Name)
		}
	}
	return json.Marshal(struct {
		plain
		NA []string `json:",omitempty"`
	}{p, na})
}

// IdleTable renders, per scenario and system with idle windows, the
// steady-state costs (medians): the leader's CPU share, and raft entries,
// hub and member writes per second, and status writes per FRS per minute.
func IdleTable(runs []Run) string {
	type key struct{ scenario, system string }
	var order []key
	rows := map[key][]Run{}
	for _, r := range runs {
		if r.Idle == nil || r.Idle.Seconds <= 0 {
			continue
		}
		k := key{r.Scenario, r.System}
		if _, ok := rows[k]; !ok {
			order = append(order, k)
		}
		rows[k] = append(rows[k], r)
	}
	if len(order) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("| scenario (idle, all pods Ready) | system | FRS | leader CPU % | leader CPU ms/s per 1k FRS | raft entries/s | hub writes/s | member writes/s | status writes /FRS/min |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		col := func(f func(r Run) float64) float64 {
			vs := make([]float64, len(rows[k]))
			for i, r := range rows[k] {
				vs[i] = f(r)
			}
			return Median(vs)
		}
		frs := rows[k][0].FRS
		cpu := col(func(r Run) float64 { return r.Idle.LeaderCPU / r.Idle.Seconds })
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %s | %s |\n", k.scenario, k.system, frs,
			format(100*cpu, 1), format(1000*cpu/float64(frs)*1000, 1),
			format(col(func(r Run) float64 { return r.Idle.RaftEntries / r.Idle.Seconds }), 2),
			format(col(func(r Run) float64 { return r.Idle.HubWrites / r.Idle.Seconds }), 2),
			format(col(func(r Run) float64 { return r.Idle.MemberWrites / r.Idle.Seconds }), 2),
			format(col(func(r Run) float64 { return r.Idle.StatusWrites / float64(r.FRS) / (r.Idle.Seconds / 60) }), 3))
	}
	return b.String()
}
