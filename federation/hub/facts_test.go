package hub

import (
	"maps"
	"testing"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/planner"
)

func TestKeepCandidates(t *testing.T) {
	members := []planner.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	listed := func(names ...string) v1alpha1.Placement {
		var p v1alpha1.Placement
		for _, n := range names {
			p.Clusters = append(p.Clusters, v1alpha1.ClusterPreference{Name: n})
		}
		return p
	}
	for _, tc := range []struct {
		name      string
		placement v1alpha1.Placement
		prev      map[string]int32
		missing   map[string]string
		want      map[string]string
	}{
		{
			name:      "every member is a candidate when none is listed",
			placement: listed(),
			missing:   map[string]string{"a": "x", "c": "y"},
			want:      map[string]string{"a": "x", "c": "y"},
		},
		{
			name:      "a member not selected and holding no target cannot change the plan",
			placement: listed("a"),
			missing:   map[string]string{"a": "x", "b": "y"},
			want:      map[string]string{"a": "x"},
		},
		{
			name:      "a member not selected that holds a target can",
			placement: listed("a"),
			prev:      map[string]int32{"b": 2},
			missing:   map[string]string{"b": "y", "c": "z"},
			want:      map[string]string{"b": "y"},
		},
		{
			name:      "unknown registrations are always missing",
			placement: listed("a"),
			missing:   map[string]string{"*": "registered members unknown"},
			want:      map[string]string{"*": "registered members unknown"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := facts{members: members, missing: maps.Clone(tc.missing)}
			f.keepCandidates(&tc.placement, tc.prev)
			if !maps.Equal(f.missing, tc.want) {
				t.Errorf("missing = %v, want %v", f.missing, tc.want)
			}
		})
	}
}

func TestPlannerHealth(t *testing.T) {
	r := &Reconciler{Health: fakeHealth{
		"up":   v1alpha1.ClusterHealthy,
		"down": v1alpha1.ClusterUnreachable,
		"odd":  v1alpha1.ClusterHealth("Unknown"),
	}}
	for _, tc := range []struct {
		name       string
		wantHealth planner.Health
		wantSince  time.Time
	}{
		{name: "up", wantHealth: planner.Healthy},
		{name: "down", wantHealth: planner.Unhealthy, wantSince: now.Add(-time.Hour)},
		{name: "odd", wantHealth: planner.HealthUnknown},
		{name: "no verdict", wantHealth: planner.HealthUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, since := r.plannerHealth(tc.name)
			if h != tc.wantHealth || !since.Equal(tc.wantSince) {
				t.Errorf("plannerHealth = %v, %v; want %v, %v", h, since, tc.wantHealth, tc.wantSince)
			}
		})
	}
}
