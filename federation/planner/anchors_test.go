package planner

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// TestWorkedExamples replays examples from the Karmada, KubeFed and Clusternet
// issues the package documentation links. Each case says what those projects
// produce and what we produce.
func TestWorkedExamples(t *testing.T) {
	type want map[string]int32
	cases := []struct {
		name string
		in   Input
		want want
	}{
		{
			// Karmada's Webster anchor (#6735), n=7 of 170/110/60.
			name: "karmada webster 170/110/60 n=7",
			in: Input{Replicas: 7, Members: healthy("a", "b", "c"),
				Placement: listed(pref("a", weight(170)), pref("b", weight(110)), pref("c", weight(60)))},
			want: want{"a": 4, "b": 2, "c": 1},
		},
		{
			// #6424: floor+remainder gave 2:0. 2*2/3 = 1.33 and 2*1/3 = 0.67
			// both round to 1 under Webster: the second seat's priority for b
			// (1/1) beats a's (2/3).
			name: "2 replicas at weights 2:1 give 1:1",
			in: Input{Replicas: 2, Members: healthy("a", "b"),
				Placement: listed(pref("a", weight(2)), pref("b", weight(1)))},
			want: want{"a": 1, "b": 1},
		},
		{
			// KubeFed's ceil rounding gives 4/4/2.
			name: "10 over 3 equal is 4/3/3 not kubefed 4/4/2",
			in:   Input{UID: "uid-10-3", Replicas: 10, Members: healthy("a", "b", "c")},
			want: nil, // checked below: one 4 and two 3s
		},
		{
			// KubeFed PR #288 review: c2=7 c1=3 for min 2/4, weights 2:3.
			// We honour both minimums and divide the rest so the totals are
			// in proportion 2:3.
			name: "kubefed min/max example gives 4/6",
			in: Input{Replicas: 10, Members: healthy("c1", "c2"),
				Placement: listed(pref("c1", minR(2), maxR(6), weight(2)), pref("c2", minR(4), maxR(8), weight(3)))},
			want: want{"c1": 4, "c2": 6},
		},
		{
			// Clusternet #526: 2 over 3/6/9 gave 1/0/1.
			name: "clusternet 2 over 3/6/9 gives 0/1/1",
			in: Input{Replicas: 2, Members: healthy("a", "b", "c"),
				Placement: listed(pref("a", weight(3)), pref("b", weight(6)), pref("c", weight(9)))},
			want: want{"a": 0, "b": 1, "c": 1},
		},
		{
			// Karmada Aggregated 12 over available 10/8 gives 7/5; so does
			// AvailableCapacity (weights are capacity).
			name: "available capacity 12 over 10/8",
			in: Input{Replicas: 12, Placement: v1alpha1.Placement{Strategy: v1alpha1.StrategyAvailableCapacity},
				Members: []Member{{Name: "a", Health: Healthy, FreeCapacity: ptr[int32](10)}, {Name: "b", Health: Healthy, FreeCapacity: ptr[int32](8)}}},
			want: want{"a": 7, "b": 5},
		},
		{
			// KubeFed #763: 9 over A, B (cordoned), C gave A5 B0 C4 plus 3
			// Pending on B. Here B's zero room sends its share to A and C and
			// nothing is left Pending.
			name: "kubefed 9 over A, cordoned B, C",
			in: Input{UID: "u763", Replicas: 9, Members: []Member{
				{Name: "A", Health: Healthy}, {Name: "B", Health: Healthy, FreeCapacity: ptr[int32](0)}, {Name: "C", Health: Healthy}}},
			want: nil, // checked below: B=0, A+C=9 as 5/4
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Plan(tc.in)
			checkInvariants(t, tc.in, r)
			switch {
			case tc.want != nil:
				if got := r.TargetMap(); !maps.Equal(got, tc.want) {
					t.Fatalf("got %v, want %v", got, map[string]int32(tc.want))
				}
			case tc.name == "10 over 3 equal is 4/3/3 not kubefed 4/4/2":
				vals := slices.Sorted(maps.Values(r.TargetMap()))
				if !slices.Equal(vals, []int32{3, 3, 4}) {
					t.Fatalf("got %v, want one 4 and two 3s", r.TargetMap())
				}
			default:
				if r.Target("B") != 0 || r.Target("A")+r.Target("C") != 9 || max(r.Target("A"), r.Target("C")) != 5 {
					t.Fatalf("got %v, want B=0 and A/C 5/4", r.TargetMap())
				}
				if r.Shortfall != 0 {
					t.Fatalf("shortfall %d, want 0", r.Shortfall)
				}
			}
		})
	}
}

// TestWebsterSequence checks the whole Karmada sequence n=1..7 of 170/110/60.
func TestWebsterSequence(t *testing.T) {
	want := [][3]int32{{1, 0, 0}, {1, 1, 0}, {1, 1, 1}, {2, 1, 1}, {2, 2, 1}, {3, 2, 1}, {4, 2, 1}}
	for n, w := range want {
		in := Input{Replicas: int32(n + 1), Members: healthy("a", "b", "c"),
			Placement: listed(pref("a", weight(170)), pref("b", weight(110)), pref("c", weight(60)))}
		r := Plan(in)
		got := [3]int32{r.Target("a"), r.Target("b"), r.Target("c")}
		if got != w {
			t.Errorf("n=%d: got %v, want %v", n+1, got, w)
		}
	}
}

// TestRemainderSpreadsAcrossFRS is karmada#4220: the remainder must not always
// land on the same member. 5 over 4 equal members is 2/1/1/1; over many UIDs
// every member must get the 2 sometimes, and roughly evenly.
func TestRemainderSpreadsAcrossFRS(t *testing.T) {
	counts := map[string]int{}
	const n = 4000
	for i := range n {
		in := Input{UID: fmt.Sprintf("uid-%d", i), Replicas: 5, Members: healthy("m1", "m2", "m3", "m4")}
		r := Plan(in)
		vals := slices.Sorted(maps.Values(r.TargetMap()))
		if !slices.Equal(vals, []int32{1, 1, 1, 2}) {
			t.Fatalf("uid-%d: got %v, want 2/1/1/1 (kubefed gives 2/2/1/0)", i, r.TargetMap())
		}
		for name, v := range r.TargetMap() {
			if v == 2 {
				counts[name]++
			}
		}
	}
	for _, name := range []string{"m1", "m2", "m3", "m4"} {
		if c := counts[name]; c < n/4*8/10 || c > n/4*12/10 {
			t.Errorf("%s got the remainder %d times out of %d, want about %d", name, c, n, n/4)
		}
	}
}
