package charts

import (
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
)

// withoutAggregated drops the ClusterRoles aggregated into the built-in
// user-facing roles (they are bound by nobody in the chart).
func withoutAggregated(roles []*rbacv1.ClusterRole) []*rbacv1.ClusterRole {
	var out []*rbacv1.ClusterRole
	for _, r := range roles {
		if !aggregated(r) {
			out = append(out, r)
		}
	}
	return out
}

func aggregated(r *rbacv1.ClusterRole) bool {
	for k := range r.Labels {
		if strings.HasPrefix(k, "rbac.authorization.k8s.io/aggregate-to-") {
			return true
		}
	}
	return false
}

// TestAggregatedRoles: namespace users with edit may create and scale
// FederatedReplicaSets, with view read them, and neither may write status.
func TestAggregatedRoles(t *testing.T) {
	m := template(t)
	byLabel := map[string]*rbacv1.ClusterRole{}
	for _, r := range m.clusterRoles {
		for _, to := range []string{"edit", "view", "admin"} {
			if r.Labels["rbac.authorization.k8s.io/aggregate-to-"+to] == "true" {
				byLabel[to] = r
			}
		}
	}
	for _, to := range []string{"edit", "view", "admin"} {
		if byLabel[to] == nil {
			t.Fatalf("no ClusterRole aggregated to %s", to)
		}
	}
	edit, view := byLabel["edit"], byLabel["view"]
	for _, want := range []struct {
		role     *rbacv1.ClusterRole
		resource string
		verbs    []string
	}{
		{edit, "federatedreplicasets", []string{"create", "delete", "get", "list", "watch", "update", "patch"}},
		{edit, "federatedreplicasets/scale", []string{"get", "update", "patch"}},
		{edit, "federatedreplicasets/status", []string{"get"}},
		{view, "federatedreplicasets", []string{"get", "list", "watch"}},
		{view, "federatedreplicasets/scale", []string{"get"}},
		{view, "federatedreplicasets/status", []string{"get"}},
	} {
		if !granted(want.role.Rules, "replicafed.io", want.resource, want.verbs) {
			t.Errorf("ClusterRole %s lacks %v on %s", want.role.Name, want.verbs, want.resource)
		}
	}
	for _, r := range []*rbacv1.ClusterRole{edit, view} {
		for _, rule := range r.Rules {
			if contains(rule.Resources, "federatedreplicasets/status") && !subset(rule.Verbs, "get", "list", "watch") {
				t.Errorf("ClusterRole %s lets users write status: %+v", r.Name, rule)
			}
			if !subset(rule.APIGroups, "replicafed.io") {
				t.Errorf("ClusterRole %s grants outside replicafed.io: %+v", r.Name, rule)
			}
		}
	}
	for _, r := range []*rbacv1.ClusterRole{view} {
		for _, rule := range r.Rules {
			if !subset(rule.Verbs, "get", "list", "watch") {
				t.Errorf("view ClusterRole %s may write: %+v", r.Name, rule)
			}
		}
	}
}
