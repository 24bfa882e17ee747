package hub

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Members lists the engaged member clusters (registry.Registry).
type Members interface {
	Members() []*registry.Member
	Get(name string) (*registry.Member, bool)
}

// HealthSource gives each member's reachability (health.Monitor).
type HealthSource interface {
	State(cluster string) (health.State, bool)
}

// TargetStore keeps the committed per-member targets (raft in production).
type TargetStore interface {
	// Targets returns the committed targets and the FederatedReplicaSet
	// generation they were planned for.
	Targets(frs fedref.FRS) (targets map[string]int32, generation int64, ok bool)
	// SetTargets commits new targets.
	SetTargets(ctx context.Context, frs fedref.FRS, generation int64, targets map[string]int32) error
	// DeleteTargets forgets a FederatedReplicaSet.
	DeleteTargets(ctx context.Context, frs fedref.FRS) error
}

// Gate says whether this replica may act (it is the raft leader with a valid
// lease). The context ends when that permission ends.
type Gate interface {
	Allowed() (context.Context, bool)
}

// Poker asks a member worker to sync one key soon.
type Poker interface {
	Enqueue(key fedref.MemberObject)
}

// ExpectationsForgetter drops a FederatedReplicaSet's expectations once it is
// gone from every member.
type ExpectationsForgetter interface {
	Delete(key fedref.MemberObject)
}

// CapacitySource estimates how many more pods of a template fit in a member
// (capacity.Tracker, from counters its informers keep). ok is false when
// the member's capacity is unknown.
type CapacitySource interface {
	Free(ctx context.Context, cluster string, tmpl *corev1.PodTemplateSpec) (free int32, ok bool)
}
