package ownership

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func live(ids ...string) []Candidate {
	out := make([]Candidate, 0, len(ids))
	for _, id := range ids {
		out = append(out, Candidate{ID: id, Live: true, Stable: true})
	}
	return out
}

func TestAssign(t *testing.T) {
	members := []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	spread := map[string]string{"m1": "a", "m2": "a", "m3": "b", "m4": "b", "m5": "c", "m6": "c"}
	tests := []assignCase{
		{
			name: "initial spread", members: members, candidates: live("c", "a", "b"),
			want: Plan{Owners: spread, Moves: []Move{
				{"m1", "", "a"}, {"m2", "", "a"}, {"m3", "", "b"}, {"m4", "", "b"}, {"m5", "", "c"}, {"m6", "", "c"},
			}},
		},
		{
			name: "stable when nothing changed", members: members, candidates: live("a", "b", "c"), current: spread,
			want: Plan{Owners: spread},
		},
		{
			name: "a replica joins: only one member from each of two owners moves", members: members,
			candidates: live("a", "b", "c", "d"), current: spread,
			// Caps 2,2,1,1 (a and b own most, then lower ID): c gives up m6.
			want: Plan{
				Owners: map[string]string{"m1": "a", "m2": "a", "m3": "b", "m4": "b", "m5": "c", "m6": "d"},
				Moves:  []Move{{"m6", "c", "d"}},
			},
		},
		{
			name: "a replica dies: only its members move, spread over the others", members: members,
			candidates: []Candidate{{"a", true, true}, {"b", false, false}, {"c", true, true}}, current: spread,
			want: Plan{
				Owners: map[string]string{"m1": "a", "m2": "a", "m3": "a", "m4": "c", "m5": "c", "m6": "c"},
				Moves:  []Move{{"m3", "b", "a"}, {"m4", "b", "c"}},
			},
		},
		{
			name: "all die but one", members: members,
			candidates: []Candidate{{"a", false, false}, {"b", true, true}, {"c", false, false}}, current: spread,
			want: Plan{
				Owners: map[string]string{"m1": "b", "m2": "b", "m3": "b", "m4": "b", "m5": "b", "m6": "b"},
				Moves:  []Move{{"m1", "a", "b"}, {"m2", "a", "b"}, {"m5", "c", "b"}, {"m6", "c", "b"}},
			},
		},
		{
			name: "a member added goes to a replica with room", members: append(slices.Clone(members), "m0"),
			candidates: live("a", "b", "c"), current: spread,
			want: Plan{
				Owners: map[string]string{"m0": "a", "m1": "a", "m2": "a", "m3": "b", "m4": "b", "m5": "c", "m6": "c"},
				Moves:  []Move{{"m0", "", "a"}},
			},
		},
		{
			name: "a member removed is dropped, the rest stay", members: []string{"m1", "m2", "m3", "m4", "m5"},
			candidates: live("a", "b", "c"), current: spread,
			want: Plan{
				Owners:  map[string]string{"m1": "a", "m2": "a", "m3": "b", "m4": "b", "m5": "c"},
				Dropped: []string{"m6"},
			},
		},
		{
			name: "removing two of one owner rebalances with one move", members: []string{"m1", "m2", "m3", "m4", "m5", "m6", "m7"},
			candidates: live("a", "b", "c"),
			current:    map[string]string{"m1": "a", "m2": "a", "m3": "a", "m4": "a", "m5": "b", "m6": "b", "m7": "c"},
			want: Plan{
				Owners: map[string]string{"m1": "a", "m2": "a", "m3": "a", "m4": "c", "m5": "b", "m6": "b", "m7": "c"},
				Moves:  []Move{{"m4", "a", "c"}},
			},
		},
		{
			name: "no live candidate: nothing moves", members: members,
			candidates: []Candidate{{"a", false, false}}, current: spread,
			want: Plan{Owners: spread},
		},
		{
			name: "an owner that is no candidate any more loses its members", members: []string{"m1", "m2"},
			candidates: live("a", "b"), current: map[string]string{"m1": "a", "m2": "gone"},
			want: Plan{Owners: map[string]string{"m1": "a", "m2": "b"}, Moves: []Move{{"m2", "gone", "b"}}},
		},
	}
	runAssign(t, tests)
}

// assignCase is one Assign input and the plan it must give.
type assignCase struct {
	name       string
	members    []string
	candidates []Candidate
	current    map[string]string
	want       Plan
}

func runAssign(t *testing.T, tests []assignCase) {
	t.Helper()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Assign(tc.members, tc.candidates, tc.current)
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("Assign (-want +got):\n%s", diff)
			}
			if want := len(tc.want.Moves) > 0 || len(tc.want.Dropped) > 0; got.Changed() != want {
				t.Errorf("Changed() = %v, want %v", got.Changed(), want)
			}
		})
	}
}

// TestAssignDamping: members move from a live owner only to a stable
// candidate; members without a live owner go at once to any live one,
// first to those not yet stable.
func TestAssignDamping(t *testing.T) {
	members := []string{"m1", "m2", "m3", "m4", "m5", "m6"}
	spread := map[string]string{"m1": "a", "m2": "a", "m3": "b", "m4": "b", "m5": "c", "m6": "c"}
	// uneven: c came back after its members went to a and b.
	uneven := map[string]string{"m1": "a", "m2": "a", "m3": "a", "m4": "b", "m5": "b", "m6": "b"}
	runAssign(t, []assignCase{
		{
			name: "a returning replica not yet stable gets nothing from live owners", members: members,
			candidates: []Candidate{{"a", true, true}, {"b", true, true}, {"c", true, false}}, current: uneven,
			want: Plan{Owners: uneven},
		},
		{
			name: "a returning replica once stable gets its share", members: members,
			candidates: live("a", "b", "c"), current: uneven,
			want: Plan{
				Owners: map[string]string{"m1": "a", "m2": "a", "m3": "c", "m4": "b", "m5": "b", "m6": "c"},
				Moves:  []Move{{"m3", "a", "c"}, {"m6", "b", "c"}},
			},
		},
		{
			name: "a dead owner's members go at once, first to the replica not yet stable", members: members,
			candidates: []Candidate{{"a", true, true}, {"b", false, false}, {"c", true, false}}, current: spread,
			want: Plan{
				Owners: map[string]string{"m1": "a", "m2": "a", "m3": "c", "m4": "a", "m5": "c", "m6": "c"},
				Moves:  []Move{{"m3", "b", "c"}, {"m4", "b", "a"}},
			},
		},
		{
			name: "a fresh start: nothing owned, nobody stable, every member assigned", members: members,
			candidates: []Candidate{{"c", true, false}, {"a", true, false}, {"b", true, false}},
			want: Plan{Owners: spread, Moves: []Move{
				{"m1", "", "a"}, {"m2", "", "a"}, {"m3", "", "b"}, {"m4", "", "b"}, {"m5", "", "c"}, {"m6", "", "c"},
			}},
		},
		{
			name: "a single replica not yet stable gets every member", members: []string{"m1", "m2"},
			candidates: []Candidate{{"a", true, false}},
			want:       Plan{Owners: map[string]string{"m1": "a", "m2": "a"}, Moves: []Move{{"m1", "", "a"}, {"m2", "", "a"}}},
		},
		{
			name: "stable without live counts for nothing", members: []string{"m1", "m2"},
			candidates: []Candidate{{"a", true, true}, {"b", false, true}}, current: map[string]string{"m1": "a", "m2": "b"},
			want: Plan{Owners: map[string]string{"m1": "a", "m2": "a"}, Moves: []Move{{"m2", "b", "a"}}},
		},
	})
}

// TestAssignProperties checks, over random inputs, that every member gets a
// live owner, counts differ by at most one when every live candidate is
// stable, members of live owners move only as balance needs and only to
// stable candidates, and shuffled inputs give the same plan.
func TestAssignProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 500 {
		var members []string
		for i := range rng.IntN(40) {
			members = append(members, fmt.Sprintf("m%02d", i))
		}
		var cands []Candidate
		var ids []string
		for i := range 1 + rng.IntN(6) {
			id := fmt.Sprintf("r%d", i)
			ids = append(ids, id)
			cands = append(cands, Candidate{ID: id, Live: rng.IntN(4) != 0, Stable: rng.IntN(3) != 0})
		}
		current := map[string]string{}
		for _, m := range members {
			if rng.IntN(5) != 0 {
				current[m] = ids[rng.IntN(len(ids))]
			}
		}
		current["left"] = ids[0]
		got := Assign(members, cands, current)

		shuffled := slices.Clone(members)
		rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
		sc := slices.Clone(cands)
		rng.Shuffle(len(sc), func(i, j int) { sc[i], sc[j] = sc[j], sc[i] })
		if diff := cmp.Diff(got, Assign(shuffled, sc, current), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round %d: not deterministic (-first +shuffled):\n%s", round, diff)
		}
		checkPlan(t, round, members, cands, current, got)
	}
}

func checkPlan(t *testing.T, round int, members []string, cands []Candidate, current map[string]string, p Plan) {
	t.Helper()
	isLive, isStable := map[string]bool{}, map[string]bool{}
	allStable := true
	for _, c := range cands {
		isLive[c.ID] = isLive[c.ID] || c.Live
		isStable[c.ID] = isStable[c.ID] || (c.Live && c.Stable)
		allStable = allStable && (!c.Live || c.Stable)
	}
	if len(liveIDs(cands)) == 0 {
		return
	}
	counts := map[string]int{}
	for _, id := range liveIDs(cands) {
		counts[id] = 0
	}
	for _, m := range members {
		o := p.Owners[m]
		if !isLive[o] {
			t.Fatalf("round %d: member %s owned by %q, not a live replica", round, m, o)
		}
		counts[o]++
	}
	lo, hi := len(members), 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	if allStable && hi-lo > 1 {
		t.Fatalf("round %d: counts %v not balanced", round, counts)
	}
	// Minimal moves: a live owner loses members only down to its share.
	kept := map[string]int{}
	for _, m := range members {
		if o := current[m]; isLive[o] && p.Owners[m] == o {
			kept[o]++
		}
	}
	for _, m := range p.Moves {
		if o := m.From; isLive[o] && kept[o] < lo {
			t.Fatalf("round %d: %s moved away from live %s, which keeps only %d (share %d)", round, m.Member, o, kept[o], lo)
		}
		if isLive[m.From] && !isStable[m.To] {
			t.Fatalf("round %d: %s moved from live %s to %s, which is not stable", round, m.Member, m.From, m.To)
		}
	}
	if !slices.Equal(p.Dropped, []string{"left"}) {
		t.Fatalf("round %d: dropped %v, want [left]", round, p.Dropped)
	}
}
