package worker

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

// TestMemberStatusChanged: the MemberReplicaSet update handler calls
// Options.MemberStatusChanged when, and only when, the status changed,
// with the key and the hub reference; the key is queued either way.
func TestMemberStatusChanged(t *testing.T) {
	hubRef := v1alpha1.HubReference{Namespace: "ns", Name: "frs", UID: "frs-uid"}
	base := func(rv string, replicas int32) *v1alpha1.MemberReplicaSet {
		m := mrs("web", "u1", blue, 0)
		m.ResourceVersion, m.Spec.Hub, m.Status.Replicas = rv, hubRef, replicas
		return m
	}
	tests := []struct {
		name     string
		old, cur *v1alpha1.MemberReplicaSet
		want     bool
	}{
		{name: "status changed", old: base("1", 1), cur: base("2", 2), want: true},
		{name: "condition added", old: base("1", 2), cur: func() *v1alpha1.MemberReplicaSet {
			m := base("2", 2)
			m.Status.Conditions = append(m.Status.Conditions, metav1.Condition{Type: v1alpha1.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: "FailedCreate"})
			return m
		}(), want: true},
		{name: "spec only", old: base("1", 2), cur: func() *v1alpha1.MemberReplicaSet {
			m := base("2", 2)
			m.Spec.Replicas = 5
			return m
		}()},
		{name: "labels only", old: base("1", 2), cur: func() *v1alpha1.MemberReplicaSet {
			m := base("2", 2)
			m.Labels = map[string]string{"x": "y"}
			return m
		}()},
		{name: "periodic resync", old: base("1", 2), cur: base("1", 2)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			var calls []fedref.MemberObject
			var hubs []v1alpha1.HubReference
			f.h.w.o.MemberStatusChanged = func(k fedref.MemberObject, hub v1alpha1.HubReference) {
				calls, hubs = append(calls, k), append(hubs, hub)
			}
			f.h.updateOwner(tc.old, tc.cur)
			if (len(calls) == 1) != tc.want || len(calls) > 1 {
				t.Fatalf("hook calls %v, want one: %v", calls, tc.want)
			}
			if tc.want && (calls[0] != f.key("web") || hubs[0] != hubRef) {
				t.Fatalf("hook got %v %+v, want %v %+v", calls[0], hubs[0], f.key("web"), hubRef)
			}
			if got := f.drain(); !eq(got, []string{"web"}) {
				t.Fatalf("queued %v, want web", got)
			}
		})
	}
	// Without a hook nothing changes.
	f := newFixture(t)
	f.h.updateOwner(base("1", 1), base("2", 2))
	if got := f.drain(); !eq(got, []string{"web"}) {
		t.Fatalf("queued %v, want web", got)
	}
}
