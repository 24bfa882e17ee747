// Package enginecpu holds BenchmarkEngineCPUPerPod, the member engine's
// regression benchmark (make bench): the engine's own CPU time and heap
// allocations per pod created, against the figures committed in
// testdata/baseline.json. See README.md.
package enginecpu_test

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/hack/bench/enginerig"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/loadavg"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

var update = flag.Bool("update", false, "write the measured figures into testdata/baseline.json (this machine class's entry) instead of comparing with them")

const (
	baselinePath = "testdata/baseline.json"
	// tolerance is how much a median may exceed the committed figure.
	tolerance = 0.10
	// pods per run, and runs measured after one warm-up run.
	podsPerRun = 1000
	runs       = 5
	namespace  = "bench"
)

// baseline is one machine class's committed figures and where they were
// measured; testdata/baseline.json holds a list of them, one per class.
type baseline struct {
	// CPUNanosPerPod is the engine process's user+system CPU time per pod
	// created (median of the runs).
	CPUNanosPerPod float64 `json:"cpuNanosPerPod"`
	// AllocsPerPod and BytesPerPod are its heap allocations per pod.
	AllocsPerPod float64 `json:"allocsPerPod"`
	BytesPerPod  float64 `json:"bytesPerPod"`
	// Machine is the machine class (CPU model, CPUs, OS/arch, Go); CPU
	// time is compared only on the same class, allocations everywhere.
	Machine string `json:"machine"`
	// Pods, Runs, Load, Commit and Measured say how it was measured.
	Pods     int    `json:"pods"`
	Runs     int    `json:"runs"`
	Load     string `json:"load"`
	Commit   string `json:"commit,omitempty"`
	Measured string `json:"measured"`
}

// sample is one run's cost per pod.
type sample struct{ cpuNanos, allocs, bytes float64 }

// BenchmarkEngineCPUPerPod creates pods with the member engine as a
// replica runs it (enginerig: raft expectations, fenced member client,
// slim informers; client limits off) against a real kube-apiserver, which
// runs in a process of its own, so this process's CPU time is the
// engine's (with its informers, raft node and status sink). Each run
// scales a fresh MemberReplicaSet from 0 to 1,000 pods and measures from
// the scale-up to the status report showing every pod; pods stay Pending
// (no nodes), so only creation is measured. After one warm-up run, the
// median of 5 runs is compared with testdata/baseline.json: it fails when
// CPU per pod (same machine class only) or allocations per pod exceed the
// committed figure by more than 10 %. -update writes the figures instead:
//
//	go test -run '^$' -bench EngineCPUPerPod ./hack/bench/enginecpu -update
//
// It measures once whatever b.N is (one measurement takes about a minute).
func BenchmarkEngineCPUPerPod(b *testing.B) {
	// The engine logs nothing here (and controller-runtime does not
	// complain that no logger was set).
	ctrl.SetLogger(logr.Discard())
	member, err := crds.Member()
	if err != nil {
		b.Fatal(err)
	}
	c := testcluster.Start(b, testcluster.Options{Name: "enginecpu", CRDs: member})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cl, err := client.New(c.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		b.Fatal(err)
	}
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}); err != nil {
		b.Fatal(err)
	}
	rig, err := enginerig.Start(ctx, enginerig.Options{Member: c.Config, DataDir: b.TempDir(), WriteTimeout: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer rig.Stop()

	load := loadavg.Read()
	var samples []sample
	for i := range runs + 1 {
		s, err := measureRun(ctx, rig, fmt.Sprintf("cpu-%d", i))
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("run %d: %.0f CPU ns/pod, %.0f allocs/pod, %.0f B/pod", i, s.cpuNanos, s.allocs, s.bytes)
		if i > 0 { // run 0 warms up caches, pools and maps
			samples = append(samples, s)
		}
	}
	b.StopTimer()
	got := baseline{
		CPUNanosPerPod: median(samples, func(s sample) float64 { return s.cpuNanos }),
		AllocsPerPod:   median(samples, func(s sample) float64 { return s.allocs }),
		BytesPerPod:    median(samples, func(s sample) float64 { return s.bytes }),
		Machine:        machineClass(), Pods: podsPerRun, Runs: runs,
		Load: load + " / " + loadavg.Read(), Measured: time.Now().UTC().Format(time.RFC3339),
	}
	b.ReportMetric(got.CPUNanosPerPod, "cpu-ns/pod")
	b.ReportMetric(got.AllocsPerPod, "allocs/pod")
	b.ReportMetric(got.BytesPerPod, "B/pod")
	if *update {
		got.Commit = os.Getenv("ENGINECPU_COMMIT")
		writeBaseline(b, got)
		return
	}
	checkBaseline(b, got, !busy(load))
}

// busy reports whether the 1-minute load average before the runs was
// above twice the CPUs: other work then inflates this process's CPU time
// by more than the tolerance (up to +45 % seen at load 13 on 2 cores).
func busy(load string) bool {
	f := strings.Fields(load)
	if len(f) == 0 {
		return false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return err == nil && l > 2*float64(runtime.NumCPU())
}

// measureRun creates podsPerRun pods for a fresh MemberReplicaSet and
// returns the cost per pod from the scale-up to the report showing them
// all; then it scales back to 0 (not measured), so every run starts with
// the same cache.
func measureRun(ctx context.Context, rig *enginerig.Rig, name string) (sample, error) {
	key := enginerig.Key(namespace, name)
	reported := func(n int32) func(engine.MemberStatus) bool {
		return func(st engine.MemberStatus) bool { return st.Target == n && st.Replicas == n }
	}
	// An owner that exists has been synced once its status observed a
	// generation; the engine's report of zero for a member without an
	// owner never has one.
	ownerSyncedAtZero := func(st engine.MemberStatus) bool { return reported(0)(st) && st.ObservedGeneration > 0 }
	rig.SetTarget(key, name, 0)
	// The owner exists at zero before the measured scale-up (the engine
	// creates none for a target of zero), as when the baseline was taken.
	if err := rig.CreateOwner(ctx, key); err != nil {
		return sample{}, err
	}
	if err := rig.Source.WaitReport(ctx, key, ownerSyncedAtZero); err != nil {
		return sample{}, err
	}
	cpu0 := cpuTime()
	allocs0, bytes0 := heapAllocs()
	rig.SetTarget(key, name, podsPerRun)
	if err := rig.Source.WaitReport(ctx, key, reported(podsPerRun)); err != nil {
		return sample{}, err
	}
	cpu1 := cpuTime()
	allocs1, bytes1 := heapAllocs()
	rig.SetTarget(key, name, 0)
	if err := rig.Source.WaitReport(ctx, key, reported(0)); err != nil {
		return sample{}, err
	}
	return sample{
		cpuNanos: float64(cpu1-cpu0) / podsPerRun,
		allocs:   float64(allocs1-allocs0) / podsPerRun,
		bytes:    float64(bytes1-bytes0) / podsPerRun,
	}, nil
}

// cpuTime is this process's user plus system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(fmt.Sprintf("getrusage: %v", err))
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// heapAllocs returns the heap objects and bytes allocated so far.
func heapAllocs() (objects, bytes uint64) {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:objects"}, {Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

func median(samples []sample, f func(sample) float64) float64 {
	v := make([]float64, len(samples))
	for i, s := range samples {
		v[i] = f(s)
	}
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// machineClass names what CPU time depends on: the CPU model, the CPUs
// this process may use, the platform and the Go release.
func machineClass() string {
	model := "unknown CPU"
	if data, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%s, %d CPUs, %s/%s, %s", model, runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())
}

// readBaselines reads the committed figures, one entry per machine class.
func readBaselines() ([]baseline, error) {
	data, err := os.ReadFile(baselinePath)
	if err != nil {
		return nil, fmt.Errorf("reading the committed figures (write them with -update): %w", err)
	}
	var all []baseline
	if err := json.Unmarshal(data, &all); err != nil {
		return nil, fmt.Errorf("parsing %s: %w", baselinePath, err)
	}
	return all, nil
}

// withFigures returns all with got in place of its machine class's entry,
// or added when the class has none; other classes' figures stay.
func withFigures(all []baseline, got baseline) []baseline {
	out := slices.Clone(all)
	for i := range out {
		if out[i].Machine == got.Machine {
			out[i] = got
			return out
		}
	}
	return append(out, got)
}

// figuresFor is what a run on machine is compared with: its class's entry
// when there is one (CPU and allocations), else the most recently measured
// entry (allocations only, which do not depend on the machine).
func figuresFor(all []baseline, machine string) (baseline, bool) {
	var newest baseline
	for _, f := range all {
		if f.Machine == machine {
			return f, true
		}
		if f.Measured > newest.Measured {
			newest = f
		}
	}
	return newest, false
}

func writeBaseline(b *testing.B, got baseline) {
	all, err := readBaselines()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		b.Fatal(err)
	}
	data, err := json.MarshalIndent(withFigures(all, got), "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(baselinePath), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(baselinePath, append(data, '\n'), 0o644); err != nil {
		b.Fatal(err)
	}
	b.Logf("wrote %s: %s", baselinePath, data)
}

// checkBaseline fails when a median exceeds the committed figure by more
// than the tolerance. CPU time is compared only on the machine class it
// was measured on and when the machine was not busy (cpu); allocations
// depend on neither.
func checkBaseline(b *testing.B, got baseline, cpu bool) {
	all, err := readBaselines()
	if err != nil {
		b.Fatal(err)
	}
	if len(all) == 0 {
		b.Fatalf("%s holds no figures", baselinePath)
	}
	want, sameClass := figuresFor(all, got.Machine)
	for _, p := range problems(got, want, cpu) {
		b.Error(p)
	}
	switch {
	case !sameClass:
		b.Logf("CPU not compared: no committed figure for %q (allocations compared with %q's); add one with -update on a quiet machine", got.Machine, want.Machine)
	case !cpu:
		b.Logf("CPU not compared: the machine was busy (load %s on %d CPUs); committed %.0f ns/pod", got.Load, runtime.NumCPU(), want.CPUNanosPerPod)
	}
}

// problems lists the figures of got that exceed want's by more than the
// tolerance (CPU only when cpu is set, and on want's machine class).
func problems(got, want baseline, cpu bool) []string {
	var out []string
	check := func(what string, g, w float64) {
		if w > 0 && g > w*(1+tolerance) {
			out = append(out, fmt.Sprintf("%s grew %.1f %% (more than %.0f %%): %.0f, committed %.0f (measured %s on %s, load %s)",
				what, (g/w-1)*100, tolerance*100, g, w, want.Measured, want.Machine, want.Load))
		}
	}
	if cpu && got.Machine == want.Machine {
		check("engine CPU ns per pod", got.CPUNanosPerPod, want.CPUNanosPerPod)
	}
	check("heap allocations per pod", got.AllocsPerPod, want.AllocsPerPod)
	return out
}
