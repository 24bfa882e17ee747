package report

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{5}, 5},
		{[]float64{NA, 7, NA}, 7},
	}
	for _, tc := range tests {
		if got := Median(tc.in); got != tc.want {
			t.Errorf("Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
	if !math.IsNaN(Median([]float64{NA})) || !math.IsNaN(Median(nil)) {
		t.Error("Median of nothing that applies must be NaN")
	}
}

func TestDerive(t *testing.T) {
	f := Derive(Run{
		Pods: 10000, FRS: 1, Created: 130 * time.Second, Ready: 132 * time.Second, Ideal: 125 * time.Second,
		RaftEntries: 150, PodWrites: 10050, MemberWrites: 10200, HubWrites: 100,
		LeaderCPU: 40, FollowerCPU: 10, LeaderHeap: 30 << 20, FollowerHeap: 20 << 20, MaxHeap: 30 << 20, StatusWrites: 66,
		StatusComplete: 140 * time.Second, EventSeries: 40, PodCache: 5 << 20, RaftCaches: 3 << 19,
	})
	want := Figures{
		Created: 130, Ready: 132, Ideal: 125, CreatedRatio: 1.04, ReadyRatio: 1.056,
		RaftPer1k: 15, PodWritesPerPod: 1.005, WritesPerPod: 1.03, HubWritesPerPod: 0.01, LaterWritesPerPod: 0.004,
		LeaderCPUPer1k: 4, FollowerCPU1k: 1, LeaderHeapPer1k: 3, FollowerHeap: 2, MaxHeapPer1k: 3, StatusPerFRSMin: 30,
		StatusComplete: 140, PodCacheMiB: 5, RaftCachesMiB: 1.5,
	}
	if !nearly(f, want) {
		t.Fatalf("Derive =\n%+v\nwant\n%+v", f, want)
	}
}

func TestDeriveBaselineHasNoHubFigures(t *testing.T) {
	f := Derive(Run{Pods: 100, Ready: time.Minute, MemberWrites: 110, HubWrites: NA, RaftEntries: NA, StatusWrites: NA, EventSeries: NA})
	if !math.IsNaN(f.RaftPer1k) || !math.IsNaN(f.HubWritesPerPod) || !math.IsNaN(f.StatusPerFRSMin) || !math.IsNaN(f.CreatedRatio) ||
		!math.IsNaN(f.StatusComplete) || !math.IsNaN(f.LaterWritesPerPod) || !math.IsNaN(f.PodCacheMiB) || !math.IsNaN(f.RaftCachesMiB) {
		t.Fatalf("figures that do not apply must be NaN: %+v", f)
	}
	if f.WritesPerPod != 1.1 {
		t.Fatalf("WritesPerPod = %v, want 1.1 (no hub writes)", f.WritesPerPod)
	}
}

func nearly(a, b Figures) bool {
	eq := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 || (math.IsNaN(x) && math.IsNaN(y)) }
	return eq(a.Created, b.Created) && eq(a.Ready, b.Ready) && eq(a.Ideal, b.Ideal) &&
		eq(a.CreatedRatio, b.CreatedRatio) && eq(a.ReadyRatio, b.ReadyRatio) && eq(a.RaftPer1k, b.RaftPer1k) &&
		eq(a.PodWritesPerPod, b.PodWritesPerPod) && eq(a.WritesPerPod, b.WritesPerPod) && eq(a.HubWritesPerPod, b.HubWritesPerPod) &&
		eq(a.LaterWritesPerPod, b.LaterWritesPerPod) &&
		eq(a.LeaderCPUPer1k, b.LeaderCPUPer1k) && eq(a.FollowerCPU1k, b.FollowerCPU1k) &&
		eq(a.LeaderHeapPer1k, b.LeaderHeapPer1k) && eq(a.FollowerHeap, b.FollowerHeap) && eq(a.MaxHeapPer1k, b.MaxHeapPer1k) && eq(a.StatusPerFRSMin, b.StatusPerFRSMin) &&
		eq(a.StatusComplete, b.StatusComplete) && eq(a.PodCacheMiB, b.PodCacheMiB) && eq(a.RaftCachesMiB, b.RaftCachesMiB)
}

func TestTableMediansPerRow(t *testing.T) {
	runs := []Run{
		{Scenario: "s", System: "replicafed", Pods: 1000, Created: 10 * time.Second, Ready: 11 * time.Second, Ideal: 10 * time.Second},
		{Scenario: "s", System: "kcm", Pods: 1000, Created: 12 * time.Second, Ready: 13 * time.Second, Ideal: 10 * time.Second, RaftEntries: NA},
		{Scenario: "s", System: "replicafed", Pods: 1000, Created: 30 * time.Second, Ready: 31 * time.Second, Ideal: 10 * time.Second},
		{Scenario: "s", System: "replicafed", Pods: 1000, Created: 20 * time.Second, Ready: 21 * time.Second, Ideal: 10 * time.Second},
	}
	out := Table(runs)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header, rule and two rows, got:\n%s", out)
	}
	if !strings.HasPrefix(lines[2], "| s | replicafed | 3 | 1000 | 20.0 | 21.0 | 10.0 | 2.00 |") {
		t.Fatalf("replicafed row is not the median of its three runs: %s", lines[2])
	}
	if !strings.HasPrefix(lines[3], "| s | kcm | 1 | 1000 | 12.0 |") || !strings.Contains(lines[3], "| – |") {
		t.Fatalf("kcm row wrong: %s", lines[3])
	}
}

func TestStalledRunsKeepPerPodFiguresOnly(t *testing.T) {
	runs := []Run{
		{Scenario: "s", System: "replicafed", Pods: 100, Created: 10 * time.Second, Ready: 10 * time.Second, Ideal: 10 * time.Second, PodWrites: 100},
		{Scenario: "s", System: "replicafed", Pods: 100, Stalled: true, Created: 0, Ready: 0, Ideal: 10 * time.Second, PodWrites: 120},
	}
	out := Table(runs)
	if !strings.Contains(out, "| s | replicafed | 2 (1 stalled) | 100 | 10.0 | 10.0 | 10.0 | 1.00 | 1.00 |") {
		t.Fatalf("stalled run's times must be left out of the medians:\n%s", out)
	}
	if !strings.Contains(out, "| 1.100 |") {
		t.Fatalf("stalled run's writes must count (median of 1.0 and 1.2):\n%s", out)
	}
}

func TestRunJSONNamesWhatDoesNotApply(t *testing.T) {
	raw, err := json.Marshal(Run{Scenario: "s", Pods: 10, RaftEntries: NA, HubWrites: NA, PodWrites: 11})
	if err != nil {
		t.Fatal(err)
	}
	got := string(raw)
	if !strings.Contains(got, `"NA":["RaftEntries","HubWrites"]`) || !strings.Contains(got, `"PodWrites":11`) || !strings.Contains(got, `"RaftEntries":0`) {
		t.Fatalf("JSON = %s", got)
	}
}

func TestIdleTable(t *testing.T) {
	runs := []Run{
		{Scenario: "s", System: "replicafed", FRS: 100, Idle: &Idle{Seconds: 20, LeaderCPU: 2, RaftEntries: 10, HubWrites: 4, MemberWrites: 40, StatusWrites: 0}},
		{Scenario: "s", System: "kcm", FRS: 100},
	}
	out := IdleTable(runs)
	want := "| s | replicafed | 100 | 10.0 | 1000.0 | 0.50 | 0.20 | 2.00 | 0.000 |"
	if !strings.Contains(out, want) || strings.Contains(out, "kcm") {
		t.Fatalf("IdleTable =\n%s\nwant a row %s and none for runs without a window", out, want)
	}
}
