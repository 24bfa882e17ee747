package enginecpu_test

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestProblems: a median fails only beyond the tolerance, and CPU time
// only against a figure from the same machine class, on a machine that is
// not busy.
func TestProblems(t *testing.T) {
	want := baseline{CPUNanosPerPod: 1000, AllocsPerPod: 100, Machine: "m1"}
	cases := []struct {
		name string
		got  baseline
		busy bool
		fail []string
	}{
		{"equal", baseline{CPUNanosPerPod: 1000, AllocsPerPod: 100, Machine: "m1"}, false, nil},
		{"within tolerance", baseline{CPUNanosPerPod: 1099, AllocsPerPod: 109, Machine: "m1"}, false, nil},
		{"cheaper", baseline{CPUNanosPerPod: 500, AllocsPerPod: 50, Machine: "m1"}, false, nil},
		{"cpu grew", baseline{CPUNanosPerPod: 1101, AllocsPerPod: 100, Machine: "m1"}, false, []string{"CPU"}},
		{"allocs grew", baseline{CPUNanosPerPod: 1000, AllocsPerPod: 111, Machine: "m1"}, false, []string{"allocations"}},
		{"both grew", baseline{CPUNanosPerPod: 2000, AllocsPerPod: 200, Machine: "m1"}, false, []string{"CPU", "allocations"}},
		{"cpu on another machine", baseline{CPUNanosPerPod: 5000, AllocsPerPod: 100, Machine: "m2"}, false, nil},
		{"allocs on another machine", baseline{CPUNanosPerPod: 5000, AllocsPerPod: 200, Machine: "m2"}, false, []string{"allocations"}},
		{"cpu on a busy machine", baseline{CPUNanosPerPod: 5000, AllocsPerPod: 100, Machine: "m1"}, true, nil},
		{"allocs on a busy machine", baseline{CPUNanosPerPod: 5000, AllocsPerPod: 200, Machine: "m1"}, true, []string{"allocations"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := problems(c.got, want, !c.busy)
			if len(got) != len(c.fail) {
				t.Fatalf("problems = %q, want %d about %q", got, len(c.fail), c.fail)
			}
			for i, w := range c.fail {
				if !strings.Contains(got[i], w) {
					t.Errorf("problem %d = %q, want it about %s", i, got[i], w)
				}
			}
		})
	}
}

func TestBusy(t *testing.T) {
	for load, want := range map[string]bool{"0.50 1.00 1.00": false, "100.0 1 1": true, "unknown": false, "": false} {
		if got := busy(load); got != want {
			t.Errorf("busy(%q) = %v, want %v", load, got, want)
		}
	}
}

// TestFigures: each machine class keeps its own entry; a class without
// one is compared with the newest entry's allocations only.
func TestFigures(t *testing.T) {
	amd := baseline{Machine: "amd", CPUNanosPerPod: 400, AllocsPerPod: 300, Measured: "2026-11-26T01:29:43Z"}
	intel := baseline{Machine: "intel", CPUNanosPerPod: 300, AllocsPerPod: 310, Measured: "2026-11-26T20:00:00Z"}
	intel2 := baseline{Machine: "intel", CPUNanosPerPod: 250, AllocsPerPod: 305, Measured: "2026-11-27T20:00:00Z"}
	t.Run("withFigures", func(t *testing.T) {
		cases := []struct {
			name string
			all  []baseline
			got  baseline
			want []baseline
		}{
			{"first", nil, amd, []baseline{amd}},
			{"another class is added", []baseline{amd}, intel, []baseline{amd, intel}},
			{"the same class is replaced", []baseline{amd, intel}, intel2, []baseline{amd, intel2}},
		}
		for _, c := range cases {
			if diff := cmp.Diff(c.want, withFigures(c.all, c.got)); diff != "" {
				t.Errorf("%s: withFigures (-want +got):\n%s", c.name, diff)
			}
		}
	})
	t.Run("figuresFor", func(t *testing.T) {
		cases := []struct {
			name    string
			all     []baseline
			machine string
			want    baseline
			same    bool
		}{
			{"own class", []baseline{amd, intel}, "amd", amd, true},
			{"own class, not the newest", []baseline{intel, amd}, "amd", amd, true},
			{"unknown class: the newest", []baseline{amd, intel}, "arm", intel, false},
			{"none", nil, "arm", baseline{}, false},
		}
		for _, c := range cases {
			got, same := figuresFor(c.all, c.machine)
			if diff := cmp.Diff(c.want, got); diff != "" || same != c.same {
				t.Errorf("%s: figuresFor = same %v (want %v), (-want +got):\n%s", c.name, same, c.same, diff)
			}
		}
	})
}
