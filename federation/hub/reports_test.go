package hub

import (
	"context"
	"testing"

	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
)

// TestReportsTrigger: a report enqueues its FederatedReplicaSet when it is
// the first, when its counts changed, and when it is the first of a new
// term even with the same counts (the hub reads only its own term's
// reports); a repeat within a term does not.
func TestReportsTrigger(t *testing.T) {
	key := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	at := func(term uint64, replicas int32) engine.MemberStatus {
		return engine.MemberStatus{Target: 15, Replicas: replicas, ReadyReplicas: replicas, Term: term}
	}
	cases := []struct {
		name    string
		reports []engine.MemberStatus
		want    int
	}{
		{"first report", []engine.MemberStatus{at(7, 30)}, 1},
		{"repeat within a term", []engine.MemberStatus{at(7, 15), at(7, 15)}, 1},
		{"counts change within a term", []engine.MemberStatus{at(7, 30), at(7, 15)}, 2},
		{"same counts, next term", []engine.MemberStatus{at(7, 15), at(9, 15)}, 2},
		{"same counts, next term, then a repeat", []engine.MemberStatus{at(7, 15), at(9, 15), at(9, 15)}, 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := 0
			r := NewReports(func(namespace, name string) {
				if namespace != key.Namespace || name != key.Name {
					t.Errorf("triggered %s/%s, want %s/%s", namespace, name, key.Namespace, key.Name)
				}
				got++
			})
			for _, st := range c.reports {
				r.Report(context.Background(), key, st)
			}
			if got != c.want {
				t.Errorf("%d triggers, want %d", got, c.want)
			}
		})
	}
}
