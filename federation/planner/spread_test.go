package planner

import (
	"strings"
	"testing"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// regions returns healthy members labelled region=<value>; a value of ""
// leaves the label off.
func regions(pairs ...string) []Member {
	var ms []Member
	for i := 0; i < len(pairs); i += 2 {
		m := Member{Name: pairs[i], Health: Healthy, Labels: map[string]string{"zone": pairs[i] + "-z"}}
		if pairs[i+1] != "" {
			m.Labels["region"] = pairs[i+1]
		}
		ms = append(ms, m)
	}
	return ms
}

func spreadBy(key string, minGroups, maxGroups int32) v1alpha1.SpreadConstraint {
	c := v1alpha1.SpreadConstraint{TopologyKey: key}
	if minGroups > 0 {
		c.MinGroups = &minGroups
	}
	if maxGroups > 0 {
		c.MaxGroups = &maxGroups
	}
	return c
}

// Item 4 of issue 14 (karmada#5986: minGroups was ignored for divided
// replicas).
func TestSpreadConstraints(t *testing.T) {
	// Odd replicas between equal weights go by the (UID, member) hash.
	cases := []struct {
		name        string
		members     []Member
		placement   v1alpha1.Placement
		previous    map[string]int32
		replicas    int32
		want        map[string]int32
		groups      [][]string // chosen groups per constraint, best first
		unsatisfied string     // substring of the message; "" when satisfied
	}{
		{
			name:    "minGroups 2 gives the light region its replica",
			members: regions("a", "eu", "b", "eu", "c", "us"),
			placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("a", weight(10)), pref("b", weight(10)), pref("c", weight(1))},
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 0)}},
			replicas: 6, want: map[string]int32{"a": 2, "b": 3, "c": 1}, groups: [][]string{{"eu", "us"}},
		},
		{
			name:    "maxGroups 1 keeps the heaviest region",
			members: regions("a", "eu", "b", "eu", "c", "us", "d", "ap"),
			placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("a"), pref("b"), pref("c", weight(3)), pref("d")},
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 0, 1)}},
			replicas: 6, want: map[string]int32{"a": 0, "b": 0, "c": 6, "d": 0}, groups: [][]string{{"us"}},
		},
		{
			name:      "equal weight: ties by label value",
			members:   regions("a", "us", "b", "eu", "c", "ap"),
			placement: v1alpha1.Placement{SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 2)}},
			replicas:  4, want: map[string]int32{"a": 0, "b": 2, "c": 2}, groups: [][]string{{"ap", "eu"}},
		},
		{
			name:    "groups that run replicas stay chosen",
			members: regions("a", "eu", "b", "us"),
			placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("a", weight(9)), pref("b")},
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 0, 1)}},
			previous: map[string]int32{"b": 4}, replicas: 4,
			want: map[string]int32{"a": 0, "b": 4}, groups: [][]string{{"us"}},
		},
		{
			name:      "too few groups: placed on those there are, reported",
			members:   regions("a", "eu", "b", "us"),
			placement: v1alpha1.Placement{SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 3, 0)}},
			replicas:  5, want: map[string]int32{"a": 2, "b": 3}, groups: [][]string{{"eu", "us"}},
			unsatisfied: "2 groups can run replicas, minGroups is 3",
		},
		{
			name:      "fewer replicas than minGroups",
			members:   regions("a", "eu", "b", "us"),
			placement: v1alpha1.Placement{SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 0)}},
			replicas:  1, want: map[string]int32{"a": 0, "b": 1}, groups: [][]string{{"eu", "us"}},
			unsatisfied: "1 replicas cannot cover minGroups 2",
		},
		{
			name:      "members without the label take no part",
			members:   regions("a", "eu", "b", ""),
			placement: v1alpha1.Placement{SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 0, 0)}},
			replicas:  4, want: map[string]int32{"a": 4, "b": 0}, groups: [][]string{{"eu"}},
		},
		{
			name:    "a weight-0 region is not eligible",
			members: regions("a", "eu", "b", "us"),
			placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("a"), pref("b", weight(0))},
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 0)}},
			replicas: 4, want: map[string]int32{"a": 4, "b": 0}, groups: [][]string{{"eu"}},
			unsatisfied: "1 groups can run replicas",
		},
		{
			name:    "zones inside the chosen regions",
			members: regions("a", "eu", "b", "eu", "c", "us", "d", "ap"),
			placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("a"), pref("b"), pref("c", weight(2)), pref("d")},
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 2), spreadBy("zone", 3, 0)}},
			replicas: 8, want: map[string]int32{"a": 2, "b": 2, "c": 4, "d": 0},
			groups: [][]string{{"eu", "us"}, {"c-z", "a-z", "b-z"}},
		},
		{
			name:    "AvailableCapacity ranks groups by capacity",
			members: withFree(regions("a", "eu", "b", "us"), 3, 20),
			placement: v1alpha1.Placement{Strategy: v1alpha1.StrategyAvailableCapacity,
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 0, 1)}},
			replicas: 5, want: map[string]int32{"a": 0, "b": 5}, groups: [][]string{{"us"}},
		},
		{
			name:      "Duplicated: one replica covers every group",
			members:   regions("a", "eu", "b", "us"),
			placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated, SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 0)}},
			replicas:  1, want: map[string]int32{"a": 1, "b": 1}, groups: [][]string{{"eu", "us"}},
		},
		{
			name:    "Duplicated runs replicas in every member of the chosen groups",
			members: regions("a", "eu", "b", "eu", "c", "us"),
			placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated,
				SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 0, 1)}},
			replicas: 3, want: map[string]int32{"a": 3, "b": 3, "c": 0}, groups: [][]string{{"eu"}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{UID: "spread", Replicas: tc.replicas, Now: now, Members: tc.members, Placement: tc.placement, Previous: tc.previous}
			for name, v := range tc.previous {
				m := member(t, &in, name)
				m.Current, m.Ready = v, v
			}
			r := Plan(in)
			checkInvariants(t, in, r)
			wantTargets(t, r, tc.want)
			if len(r.Spread) != len(tc.groups) {
				t.Fatalf("%d outcomes, want %d", len(r.Spread), len(tc.groups))
			}
			for k, g := range tc.groups {
				if strings.Join(r.Spread[k].Groups, ",") != strings.Join(g, ",") {
					t.Errorf("constraint %d chose %v, want %v", k, r.Spread[k].Groups, g)
				}
			}
			msgs := r.SpreadUnsatisfied()
			switch {
			case tc.unsatisfied == "" && len(msgs) > 0:
				t.Errorf("unsatisfied %q, want satisfied", msgs)
			case tc.unsatisfied != "" && (len(msgs) == 0 || !strings.Contains(msgs[0], tc.unsatisfied)):
				t.Errorf("unsatisfied %q, want %q", msgs, tc.unsatisfied)
			}
			for _, tg := range r.Targets {
				if tg.State == StateExcluded && r.Note(tg.Cluster) == "" {
					t.Errorf("%s excluded without a note", tg.Cluster)
				}
			}
		})
	}
}

// A region whose only member fails over is no longer eligible: its share
// moves to the other region, and minGroups 2 is reported unmet rather than
// silently dropped.
func TestSpreadFailover(t *testing.T) {
	members := regions("a", "eu", "b", "us")
	in := Input{UID: "sf", Replicas: 4, Now: now, Members: members,
		Placement: v1alpha1.Placement{SpreadConstraints: []v1alpha1.SpreadConstraint{spreadBy("region", 2, 0)}}}
	next := settle(in, Plan(in))
	next.Members[1].Health, next.Members[1].UnhealthySince = Unhealthy, now.Add(-time.Hour)
	r := Plan(next)
	checkInvariants(t, next, r)
	wantTargets(t, r, map[string]int32{"a": 4, "b": 0})
	if msgs := r.SpreadUnsatisfied(); len(msgs) != 1 {
		t.Fatalf("unsatisfied %q, want one message", msgs)
	}
	// Within the grace period the held member keeps its group.
	next.Members[1].UnhealthySince = now.Add(-time.Second)
	r = Plan(next)
	wantTargets(t, r, map[string]int32{"a": 2, "b": 2})
	if msgs := r.SpreadUnsatisfied(); len(msgs) != 0 {
		t.Fatalf("unsatisfied %q while the member is held", msgs)
	}
}

// Item 6 of issue 14: Duplicated runs replicas in every selected member.
func TestDuplicated(t *testing.T) {
	dup := func(prefs ...v1alpha1.ClusterPreference) v1alpha1.Placement {
		return v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated, Clusters: prefs}
	}
	cases := []struct {
		name      string
		placement v1alpha1.Placement
		edit      func(ms []Member)
		replicas  int32
		want      map[string]int32
		unplaced  int32
		shortfall int32
	}{
		{name: "every member runs replicas", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			replicas: 4, want: map[string]int32{"a": 4, "b": 4, "c": 4}},
		{name: "maxReplicas caps, weight and minReplicas do not apply",
			placement: dup(pref("a", maxR(2)), pref("b", weight(0)), pref("c", minR(9))),
			replicas:  4, want: map[string]int32{"a": 2, "b": 4, "c": 4}},
		{name: "strategy ignored", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated, Strategy: v1alpha1.StrategyCostOrdered},
			replicas: 3, want: map[string]int32{"a": 3, "b": 3, "c": 3}},
		{name: "failed over gets 0, held keeps at most its previous target",
			placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			edit: func(ms []Member) {
				ms[0].Health, ms[0].UnhealthySince = Unhealthy, now.Add(-time.Hour)
				ms[1].Health = HealthUnknown
			},
			replicas: 5, want: map[string]int32{"a": 0, "b": 2, "c": 5}},
		{name: "capacity shows as shortfall", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			edit:     func(ms []Member) { ms[2].FreeCapacity = ptr[int32](1) },
			replicas: 3, want: map[string]int32{"a": 3, "b": 3, "c": 3}, shortfall: 2},
		{name: "cordoned member keeps its pods", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			edit: func(ms []Member) {
				ms[2].Taints = []Taint{{Key: "k", Effect: v1alpha1.TaintNoSchedule}}
				ms[2].Current, ms[2].Ready = 1, 1
			},
			replicas: 3, want: map[string]int32{"a": 3, "b": 3, "c": 1}},
		{name: "evicted member gets 0", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			edit:     func(ms []Member) { ms[2].Taints = []Taint{{Key: "k", Effect: v1alpha1.TaintNoExecute}} },
			replicas: 3, want: map[string]int32{"a": 3, "b": 3, "c": 0}},
		{name: "no member can run them", placement: dup(pref("a", maxR(0))),
			replicas: 3, want: map[string]int32{"a": 0}, unplaced: 3, shortfall: 3},
		{name: "zero replicas", placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated},
			replicas: 0, want: map[string]int32{"a": 0, "b": 0, "c": 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ms := healthy("a", "b", "c")
			if tc.edit != nil {
				tc.edit(ms)
			}
			in := Input{UID: "dup", Replicas: tc.replicas, Now: now, Members: ms, Placement: tc.placement,
				Previous: map[string]int32{"a": 2, "b": 2, "c": 2}}
			r := Plan(in)
			checkInvariants(t, in, r)
			wantTargets(t, r, tc.want)
			if r.Unplaced != tc.unplaced || r.Shortfall != tc.shortfall || r.Surge != 0 {
				t.Errorf("unplaced %d shortfall %d surge %d, want %d %d 0", r.Unplaced, r.Shortfall, r.Surge, tc.unplaced, tc.shortfall)
			}
		})
	}
}

func TestNewSpreadOutcome(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	tests := []struct {
		name      string
		min, max  *int32
		wantMin   int32
		wantMax   int32
		wantLimit int32
	}{
		{name: "unset", wantMin: 1, wantLimit: unbounded},
		{name: "set", min: i32(2), max: i32(3), wantMin: 2, wantMax: 3, wantLimit: 3},
		{name: "zero raised to one", min: i32(0), max: i32(0), wantMin: 1, wantMax: 1, wantLimit: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := v1alpha1.SpreadConstraint{TopologyKey: "zone", MinGroups: tc.min, MaxGroups: tc.max}
			o := newSpreadOutcome(&c)
			if o.TopologyKey != "zone" || o.MinGroups != tc.wantMin || o.MaxGroups != tc.wantMax {
				t.Errorf("outcome = %+v, want key zone, min %d, max %d", o, tc.wantMin, tc.wantMax)
			}
			if got := groupLimit(&c); got != tc.wantLimit {
				t.Errorf("groupLimit = %d, want %d", got, tc.wantLimit)
			}
		})
	}
}

func TestJudgeSpread(t *testing.T) {
	tests := []struct {
		name       string
		minGroups  int32
		alive      int32
		replicas   int64
		duplicated bool
		want       bool
		wantMsg    string
	}{
		{name: "enough groups", minGroups: 2, alive: 2, replicas: 4, want: true},
		{name: "too few groups", minGroups: 3, alive: 2, replicas: 4,
			wantMsg: "spread by zone: 2 groups can run replicas, minGroups is 3"},
		{name: "too few replicas", minGroups: 3, alive: 3, replicas: 2,
			wantMsg: "spread by zone: 2 replicas cannot cover minGroups 3"},
		{name: "duplicated covers any groups", minGroups: 3, alive: 3, replicas: 2, duplicated: true, want: true},
		{name: "zero replicas", minGroups: 3, alive: 3, replicas: 0, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := SpreadOutcome{TopologyKey: "zone", MinGroups: tc.minGroups}
			judgeSpread(&o, tc.alive, tc.replicas, tc.duplicated)
			if o.Satisfied != tc.want || o.Message != tc.wantMsg {
				t.Errorf("satisfied, message = %v, %q; want %v, %q", o.Satisfied, o.Message, tc.want, tc.wantMsg)
			}
		})
	}
}
