package planner

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func fleetWithLabels() []Member {
	return []Member{
		{Name: "eu-1", Labels: map[string]string{"region": "eu", "tier": "reserved"}},
		{Name: "us-1", Labels: map[string]string{"region": "us", "tier": "spot"}},
		{Name: "eu-2", Labels: map[string]string{"region": "eu"}},
		{Name: "ap-1", Labels: map[string]string{"region": "ap", "tier": "spot"}},
	}
}

func TestSelect(t *testing.T) {
	cases := []struct {
		name         string
		placement    v1alpha1.Placement
		want         []string
		unregistered []string
		selectorErr  bool
	}{
		{name: "empty placement selects every member", want: []string{"ap-1", "eu-1", "eu-2", "us-1"}},
		{name: "listed names", placement: listed(pref("us-1"), pref("eu-2")), want: []string{"eu-2", "us-1"}},
		{name: "unregistered name is reported", placement: listed(pref("us-1"), pref("gone")),
			want: []string{"us-1"}, unregistered: []string{"gone"}},
		{name: "selector", placement: v1alpha1.Placement{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}},
			want: []string{"eu-1", "eu-2"}},
		{name: "selector expressions", placement: v1alpha1.Placement{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "tier", Operator: metav1.LabelSelectorOpExists},
			{Key: "region", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"us"}},
		}}}, want: []string{"ap-1", "eu-1"}},
		{name: "names and selector are a union", placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("us-1")},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "ap"}}}, want: []string{"ap-1", "us-1"}},
		{name: "empty selector matches all", placement: v1alpha1.Placement{ClusterSelector: &metav1.LabelSelector{}},
			want: []string{"ap-1", "eu-1", "eu-2", "us-1"}},
		{name: "invalid selector matches nothing but listed names stay", placement: v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref("eu-1")},
			ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Near"}}}},
			want: []string{"eu-1"}, selectorErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sel := Select(&tc.placement, fleetWithLabels())
			var got []string
			for _, c := range sel.Candidates {
				got = append(got, c.Member.Name)
			}
			if !slices.Equal(got, tc.want) || !slices.Equal(sel.Unregistered, tc.unregistered) || (sel.SelectorError != nil) != tc.selectorErr {
				t.Fatalf("got %v unregistered %v err %v; want %v %v err %v", got, sel.Unregistered, sel.SelectorError, tc.want, tc.unregistered, tc.selectorErr)
			}
		})
	}
}

func TestSelectPreferences(t *testing.T) {
	p := v1alpha1.Placement{
		Clusters:        []v1alpha1.ClusterPreference{pref("eu-1", weight(3), minR(5), maxR(2), cost(7))},
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
	}
	sel := Select(&p, fleetWithLabels())
	want := []Candidate{
		{Listed: true, Weight: 3, MinReplicas: 2, MaxReplicas: 2, DeletionCost: 7}, // min clamped to max
		{Weight: 1, MaxReplicas: unbounded},                                        // selected only: defaults
	}
	for i := range want {
		got := sel.Candidates[i]
		got.Member = nil
		if got != want[i] {
			t.Fatalf("candidate %d: got %+v want %+v", i, got, want[i])
		}
	}
}

// Duplicate member names: the first wins and it is reported.
func TestSelectDuplicateMembers(t *testing.T) {
	ms := []Member{{Name: "a", Health: Healthy}, {Name: "a", Health: Unhealthy}, {Name: "b", Health: Healthy}}
	r := Plan(Input{UID: "dup", Replicas: 4, Members: ms})
	if len(r.Targets) != 2 || len(r.Notes) != 1 || r.Target("a") != 2 {
		t.Fatalf("targets %v notes %v", r.TargetMap(), r.Notes)
	}
}

// A compiled selector agrees with the upstream LabelSelectorAsSelector.
func TestMatchSelectorAgreesWithUpstream(t *testing.T) {
	sels := []*metav1.LabelSelector{
		{},
		{MatchLabels: map[string]string{"region": "eu"}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"spot", "x"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"spot"}}}},
		{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpDoesNotExist}}},
		{MatchLabels: map[string]string{"region": "ap"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}},
	}
	for i, s := range sels {
		up, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fleetWithLabels() {
			if got, want := compileSelector(s).matches(m.Labels), up.Matches(labels.Set(m.Labels)); got != want {
				t.Errorf("selector %d on %s: got %v want %v", i, m.Name, got, want)
			}
		}
	}
}

// A previous member that is no longer a candidate shows up as a change to 0.
func TestNotSelectedChange(t *testing.T) {
	in := Input{UID: "ns", Replicas: 4, Previous: map[string]int32{"a": 2, "old": 2, "zero": 0},
		Placement: listed(pref("a"), pref("b")), Members: healthy("a", "b", "old")}
	r := Plan(in)
	checkInvariants(t, in, r)
	want := []Change{{"a", 2, 2, ""}, {"b", 0, 2, ReasonScaleUp}, {"old", 2, 0, ReasonNotSelected}}
	want = slices.DeleteFunc(want, func(c Change) bool { return c.From == c.To })
	if !slices.Equal(r.Changes, want) {
		t.Fatalf("changes %v, want %v", r.Changes, want)
	}
}

// Members found out of order only late in the pass (after candidates and a
// duplicate were already seen) give the same plan and selection as the same
// members stably sorted by name.
func TestUnsortedMembersDiscoveredLate(t *testing.T) {
	ms := []Member{
		{Name: "a", Health: Healthy, Labels: map[string]string{"zone": "1"}},
		{Name: "b", Health: Healthy, Labels: map[string]string{"zone": "1"}},
		{Name: "b", Health: Unhealthy, Labels: map[string]string{"zone": "1"}},
		{Name: "d", Health: Healthy, Labels: map[string]string{"zone": "1"}},
		{Name: "c", Health: Healthy, Labels: map[string]string{"zone": "1"}},
		{Name: "a", Health: Unhealthy, Labels: map[string]string{"zone": "2"}},
	}
	sorted := slices.Clone(ms)
	slices.SortStableFunc(sorted, func(x, y Member) int { return strings.Compare(x.Name, y.Name) })
	placements := []v1alpha1.Placement{
		{},
		{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "1"}}},
	}
	for _, pl := range placements {
		got := Plan(Input{UID: "late", Replicas: 7, Placement: pl, Members: ms})
		want := Plan(Input{UID: "late", Replicas: 7, Placement: pl, Members: sorted})
		if diff := cmp.Diff(want.Targets, got.Targets); diff != "" {
			t.Fatalf("placement %+v: targets (-sorted +unsorted):\n%s", pl, diff)
		}
		if diff := cmp.Diff(want.Notes, got.Notes); diff != "" {
			t.Fatalf("placement %+v: notes (-sorted +unsorted):\n%s", pl, diff)
		}
		if len(got.Notes) != 2 || len(got.Targets) != 4 {
			t.Fatalf("placement %+v: want 4 targets and 2 duplicate notes, got %s %q", pl, targetsString(got), got.Notes)
		}
		gs, ws := Select(&pl, ms), Select(&pl, sorted)
		if len(gs.Candidates) != len(ws.Candidates) {
			t.Fatalf("placement %+v: select %d candidates, sorted %d", pl, len(gs.Candidates), len(ws.Candidates))
		}
		if diff := cmp.Diff(ws.Duplicates, gs.Duplicates); diff != "" {
			t.Fatalf("placement %+v: select duplicates (-sorted +unsorted):\n%s", pl, diff)
		}
		for i := range gs.Candidates {
			if gs.Candidates[i].Member.Health != ws.Candidates[i].Member.Health || gs.Candidates[i].Member.Name != ws.Candidates[i].Member.Name {
				t.Fatalf("placement %+v: candidate %d differs", pl, i)
			}
		}
	}
}
