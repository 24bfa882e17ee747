package enginecpu_test

import (
	"strings"
	"testing"
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
