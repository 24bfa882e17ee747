package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// TestChaosAnalyze checks the round analysis on synthetic observations, so
// the chaos suite cannot pass a violation unnoticed. It needs no fleet.
func TestChaosAnalyze(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	even := func(n int) map[string]int { return map[string]int{memberA: n, memberB: n, memberC: n} }
	// pods makes n pod records in member m, created (if not initial) or
	// deleted at the given offsets.
	type podSet struct {
		member           string
		n                int
		initial, deleted bool
	}
	build := func(sets []podSet) *observer {
		o := &observer{pods: map[types.UID]*podRecord{}}
		i := 0
		for _, s := range sets {
			for range s.n {
				i++
				r := &podRecord{member: s.member, name: fmt.Sprintf("p-%d", i), uid: types.UID(fmt.Sprintf("uid-%04d", i)), initial: s.initial}
				if !s.initial {
					r.created = t0.Add(time.Duration(i) * time.Millisecond)
				}
				if s.deleted {
					r.deleting = t0.Add(2 * time.Second)
				}
				o.pods[r.uid] = r
			}
		}
		return o
	}
	withSamples := func(o *observer, ss ...map[string]int) *observer {
		for i, s := range ss {
			o.samples = append(o.samples, sample{at: t0.Add(time.Duration(i) * sampleInterval), active: s, all: s})
		}
		return o
	}
	upCheck := roundCheck{from: 30, to: 60, oldT: even(10), newT: even(20), surge: 1, start: t0, disrupted: t0.Add(time.Second)}
	downCheck := roundCheck{from: 60, to: 30, oldT: even(20), newT: even(10), surge: 1, start: t0, disrupted: t0.Add(time.Second)}

	for _, tc := range []struct {
		name                      string
		o                         *observer
		check                     roundCheck
		over, below, dup, extraDl int
		wantText                  string // in some violation
	}{
		{
			name: "clean scale-up",
			o: withSamples(build([]podSet{{memberA, 10, true, false}, {memberB, 10, true, false}, {memberC, 10, true, false},
				{memberA, 10, false, false}, {memberB, 10, false, false}, {memberC, 10, false, false}}),
				even(10), even(15), even(20), even(20)),
			check: upCheck,
		},
		{
			name: "duplicates on one member",
			o: withSamples(build([]podSet{{memberA, 10, true, false}, {memberB, 10, true, false}, {memberC, 10, true, false},
				{memberA, 13, false, false}, {memberB, 10, false, false}, {memberC, 10, false, false}}),
				even(10), map[string]int{memberA: 23, memberB: 20, memberC: 20}),
			check: upCheck, over: 2, dup: 3, wantText: "member-a: 13 pods created (needed 10)",
		},
		{
			name: "duplicate created then deleted as excess",
			o: withSamples(build([]podSet{{memberA, 10, true, false}, {memberB, 10, true, false}, {memberC, 10, true, false},
				{memberA, 10, false, false}, {memberA, 1, false, true}, {memberB, 10, false, false}, {memberC, 10, false, false}}),
				even(20)),
			check: upCheck, dup: 1, extraDl: 1, wantText: "deleted (1)",
		},
		{
			name: "clean scale-down",
			o: withSamples(build([]podSet{{memberA, 10, true, true}, {memberB, 10, true, true}, {memberC, 10, true, true},
				{memberA, 10, true, false}, {memberB, 10, true, false}, {memberC, 10, true, false}}),
				even(20), even(14), even(10)),
			check: downCheck,
		},
		{
			name: "scale-down deletes below target and replaces",
			o: withSamples(build([]podSet{{memberA, 12, true, true}, {memberB, 10, true, true}, {memberC, 10, true, true},
				{memberA, 8, true, false}, {memberA, 2, false, false}, {memberB, 10, true, false}, {memberC, 10, true, false}}),
				even(20), map[string]int{memberA: 8, memberB: 10, memberC: 10}, even(10)),
			check: downCheck, below: 2, dup: 2, extraDl: 2, wantText: "member-a runs 8 active pods < its target 10",
		},
		{
			name:  "a member's failed list is left out of the fleet bound",
			o:     withSamples(build(nil), map[string]int{memberA: 20, memberB: 21}),
			check: upCheck,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.o.analyze(tc.check)
			if f.overSamples != tc.over || f.belowSamples != tc.below || f.duplicates != tc.dup || f.extraDeletes != tc.extraDl {
				t.Errorf("over %d below %d duplicates %d extra deletes %d, want %d %d %d %d\n%s",
					f.overSamples, f.belowSamples, f.duplicates, f.extraDeletes, tc.over, tc.below, tc.dup, tc.extraDl, strings.Join(f.violations, "\n"))
			}
			clean := tc.over+tc.below+tc.dup+tc.extraDl == 0
			if clean != (len(f.violations) == 0) {
				t.Errorf("violations %q, want clean=%v", f.violations, clean)
			}
			if tc.wantText != "" && !strings.Contains(strings.Join(f.violations, "\n"), tc.wantText) {
				t.Errorf("no violation mentions %q:\n%s", tc.wantText, strings.Join(f.violations, "\n"))
			}
		})
	}
}
