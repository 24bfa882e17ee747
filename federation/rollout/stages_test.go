package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func TestResolve(t *testing.T) {
	names := func(st []Stage) []string {
		var out []string
		for _, s := range st {
			out = append(out, s.Name)
		}
		return out
	}
	for _, c := range []struct {
		name string
		u    *v1alpha1.UpdateStrategy
		want []string
	}{
		{"no strategy: one stage for all", nil, []string{FinalStageName}},
		{"no stages", &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling}, []string{FinalStageName}},
		{"last stage takes every member: no implicit stage", &v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{
			{Name: "c", Clusters: []string{"c"}}, {Name: "rest"}}}, []string{"c", "rest"}},
		{"last stage names members: the rest follow", &v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{
			{Name: "c", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1))}}}, []string{"c", FinalStageName}},
	} {
		t.Run(c.name, func(t *testing.T) {
			st, err := Resolve(c.u)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, names(st)); diff != "" {
				t.Errorf("stages (-want +got):\n%s", diff)
			}
		})
	}
	st, err := Resolve(&v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{{Name: "c", Clusters: []string{"c"},
		BakeTime: v1alpha1.DurationOf(90 * time.Second), Promotion: v1alpha1.PromotionManual}}})
	if err != nil || st[0].BakeTime != 90*time.Second || !st[0].Manual || st[1].Manual {
		t.Errorf("bake time and promotion not resolved: %+v, %v", st, err)
	}
	for name, bad := range map[string]v1alpha1.RolloutStage{
		"selector": {Name: "x", ClusterSelector: &v1alpha1.ClusterLabelSelector{MatchExpressions: []v1alpha1.ClusterSelectorRequirement{{Key: "k", Operator: "in"}}}},
		"bake":     {Name: "x", Clusters: []string{"a"}, BakeTime: ptr.To(v1alpha1.Duration("1d"))},
		"canary":   {Name: "x", Clusters: []string{"a"}, Canary: ptr.To(intstr.FromString("half"))},
	} {
		if _, err := Resolve(&v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{bad}}); err == nil {
			t.Errorf("invalid %s resolved without an error", name)
		}
	}
}

func TestShares(t *testing.T) {
	eu := &v1alpha1.ClusterLabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	stages, err := Resolve(&v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{
		{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(2))},
		{Name: "eu-tenth", ClusterSelector: eu, Canary: ptr.To(intstr.FromString("10%"))},
		{Name: "eu", ClusterSelector: eu},
	}})
	if err != nil {
		t.Fatal(err)
	}
	fleet := []MemberShare{
		{Name: "a", Labels: map[string]string{"region": "eu"}, Target: 7},
		{Name: "b", Labels: map[string]string{"region": "eu"}, Target: 7},
		{Name: "c", Labels: map[string]string{"region": "us"}, Target: 6},
		{Name: "d", Labels: map[string]string{"region": "us"}, Target: 0},
		{Name: "e", Labels: map[string]string{"region": "eu"}, Target: 6},
	}
	for _, c := range []struct {
		name  string
		index int
		want  map[string]int32
	}{
		{"canary: 2 pods in c only", 0, map[string]int32{"a": 0, "b": 0, "c": 2, "d": 0, "e": 0}},
		// 10% of 20 is 2, split 7:7:6 -> 0.7, 0.7, 0.6: largest remainders, ties by name.
		{"10% of eu, split by target; c keeps its canary", 1, map[string]int32{"a": 1, "b": 1, "c": 2, "d": 0, "e": 0}},
		{"eu in full", 2, map[string]int32{"a": 7, "b": 7, "c": 2, "d": 0, "e": 6}},
		{"final stage: everyone in full", 3, map[string]int32{"a": 7, "b": 7, "c": 6, "d": 0, "e": 6}},
		{"past the end: everyone in full", 9, map[string]int32{"a": 7, "b": 7, "c": 6, "d": 0, "e": 6}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Shares(stages, c.index, fleet)); diff != "" {
				t.Errorf("shares (-want +got):\n%s", diff)
			}
		})
	}
	// A canary larger than the members' targets takes them all.
	big, _ := Resolve(&v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{{Name: "c", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(50))}}})
	if got := Shares(big, 0, fleet)["c"]; got != 6 {
		t.Errorf("canary of 50 in a member of 6: share %d, want 6", got)
	}
}
