package hub

import (
	"context"
	"sync"

	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Reports keeps each member's latest status for each FederatedReplicaSet. It is
// the member engine's StatusSink; a report that changes something enqueues
// the FederatedReplicaSet for the hub reconciler.
type Reports struct {
	mu      sync.RWMutex
	latest  map[fedref.MemberObject]engine.MemberStatus
	trigger func(namespace, name string)
}

// NewReports returns an empty Reports; trigger is called after a changed report.
func NewReports(trigger func(namespace, name string)) *Reports {
	return &Reports{latest: map[fedref.MemberObject]engine.MemberStatus{}, trigger: trigger}
}

// Report implements engine.StatusSink.
func (r *Reports) Report(_ context.Context, key fedref.MemberObject, st engine.MemberStatus) {
	r.mu.Lock()
	old, had := r.latest[key]
	r.latest[key] = st
	r.mu.Unlock()
	if had && sameCounts(old, st) {
		return
	}
	if r.trigger != nil {
		// A rollout revision's MemberReplicaSet has a name of its own; the
		// hub reference names the FederatedReplicaSet.
		name := key.Name
		if st.Hub.Name != "" {
			name = st.Hub.Name
		}
		r.trigger(key.Namespace, name)
	}
}

// sameCounts reports whether b would tell the hub nothing a did. A report
// of a new term always tells something: the hub reads only its own term's
// reports (memberReport), so a new leader whose first report repeats the
// counts it reported when it last led must still enqueue the
// FederatedReplicaSet, or the hub status waits for the next resync (10 s
// after a leader SIGSTOP on a scale-down in the chaos suite).
func sameCounts(a, b engine.MemberStatus) bool {
	af, bf := "", ""
	if a.ReplicaFailure != nil {
		af = a.ReplicaFailure.Message
	}
	if b.ReplicaFailure != nil {
		bf = b.ReplicaFailure.Message
	}
	return a.Term == b.Term && a.Target == b.Target && a.Replicas == b.Replicas && a.FullyLabeledReplicas == b.FullyLabeledReplicas &&
		a.ReadyReplicas == b.ReadyReplicas && a.AvailableReplicas == b.AvailableReplicas &&
		a.TerminatingReplicas == b.TerminatingReplicas && a.Unschedulable == b.Unschedulable && af == bf
}

// Get returns the latest report of key.
func (r *Reports) Get(key fedref.MemberObject) (engine.MemberStatus, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	st, ok := r.latest[key]
	return st, ok
}

// Forget drops the reports of one FederatedReplicaSet in every member,
// those of its rollout revisions included.
func (r *Reports) Forget(namespace, name string) {
	r.mu.Lock()
	for k, st := range r.latest {
		if k.Namespace == namespace && (k.Name == name || st.Hub.Name == name) {
			delete(r.latest, k)
		}
	}
	r.mu.Unlock()
}

// ForgetCluster drops every report of a member that left.
func (r *Reports) ForgetCluster(cluster string) {
	r.mu.Lock()
	for k := range r.latest {
		if k.Cluster == cluster {
			delete(r.latest, k)
		}
	}
	r.mu.Unlock()
}
