package planner

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// A plan for the largest replica count over members without bounds gives
// every replica in proportion to the weights (Webster's quotas, each within
// one of the exact share) without handing seats out one by one.
func TestPlanMaxReplicas(t *testing.T) {
	in := Input{UID: "huge", Replicas: math.MaxInt32, Members: healthy("a", "b", "c"),
		Placement: listed(pref("a", weight(1)), pref("b", weight(2)), pref("c", weight(4)))}
	r := Plan(in)
	if r.Total() != math.MaxInt32 || r.Unplaced != 0 {
		t.Fatalf("total %d unplaced %d, want %d placed", r.Total(), r.Unplaced, int64(math.MaxInt32))
	}
	for _, tc := range []struct {
		cluster string
		weight  int64
	}{{"a", 1}, {"b", 2}, {"c", 4}} {
		share := float64(math.MaxInt32) * float64(tc.weight) / 7
		if got := float64(r.Target(tc.cluster)); math.Abs(got-share) > 1 {
			t.Errorf("%s: target %.0f, share %.1f", tc.cluster, got, share)
		}
	}
	checkInvariants(t, in, r)
}

// selectFirst puts the k smallest elements first, for every k, on inputs
// with repeated values and already sorted or reversed runs.
func TestSelectFirst(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	less := func(a, b int) bool { return a < b }
	for run := range 500 {
		n := 1 + rng.Intn(60)
		s := make([]int, n)
		for i := range s {
			s[i] = rng.Intn(1 + run%20)
		}
		switch run % 3 {
		case 1:
			slices.Sort(s)
		case 2:
			slices.Sort(s)
			slices.Reverse(s)
		}
		want := slices.Sorted(slices.Values(s))
		for k := 0; k <= n; k++ {
			got := slices.Clone(s)
			selectFirst(got, k, less)
			first := slices.Sorted(slices.Values(got[:k]))
			if !slices.Equal(first, want[:k]) {
				t.Fatalf("run %d k %d: first %v, want %v (input %v)", run, k, first, want[:k], s)
			}
		}
	}
}
