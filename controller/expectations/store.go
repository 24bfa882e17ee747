// Package expectations records the pod creations and deletions a member worker
// has asked for but not yet seen through its informer, so that a sync does not
// act twice on a stale cache. The engine depends only on the Store interface:
// the in-memory Store in this package mirrors upstream's
// UIDTrackingControllerExpectations, and raftstore provides a replicated one that
// reserves pod names before they are created.
package expectations

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
)

// Key identifies one FederatedReplicaSet in one member cluster.
type Key struct {
	// Cluster is the member cluster name.
	Cluster string
	// Namespace and Name are the FederatedReplicaSet's, which are also the
	// namespace and name of its MemberReplicaSet in the member.
	Namespace string
	Name      string
}

// String renders the key as cluster/namespace/name for logs.
func (k Key) String() string { return k.Cluster + "/" + k.Namespace + "/" + k.Name }

// CreateIntent describes a batch of creations the engine is about to make.
type CreateIntent struct {
	// Target is the member's replica target for this FederatedReplicaSet.
	Target int32
	// Active is the number of active pods the engine has claimed.
	Active int
	// Count is how many pods the engine wants to create (already capped at the burst limit).
	Count int
	// Prefix is the pod name prefix, "<frs-name>-".
	Prefix string
}

// PodRef names a pod chosen for deletion.
type PodRef struct {
	Name string
	UID  types.UID
}

// Store is what the member engine needs from an expectations store.
//
// Creations: ExpectCreations returns one entry per pod the engine may create.
// A non-empty entry is the exact pod name to create (AlreadyExists then counts
// as success); an empty entry means "use generateName". The store may grant
// fewer than asked, never more; a refusal is an error. Each granted entry is
// settled exactly once, by CreationObserved when the informer sees the pod, or
// by CreationFailed when the create call failed or was never made.
//
// Deletions: ExpectDeletions records the pods about to be deleted before the
// calls are made; DeletionObserved settles one of them (also for a failed
// delete, as upstream does).
type Store interface {
	// Satisfied reports whether no creations or deletions are outstanding for
	// key (or they have expired), so the engine may create or delete.
	Satisfied(key Key) bool
	// ExpectCreations grants names for creations; see the type comment.
	ExpectCreations(ctx context.Context, key Key, intent CreateIntent) ([]string, error)
	// CreationObserved settles one expected creation when a pod controlled by
	// key's owner appears. podName lets a name-reserving store settle the right
	// reservation; a counting store ignores it.
	CreationObserved(key Key, podName string)
	// CreationFailed settles one granted creation that did not happen.
	CreationFailed(key Key, podName string)
	// ExpectDeletions records pods about to be deleted. It replaces any earlier
	// set for key.
	ExpectDeletions(ctx context.Context, key Key, pods []PodRef) error
	// DeletionObserved settles the expected deletion of podName, at most once.
	DeletionObserved(key Key, podName string)
	// Delete forgets everything about key, for example when the owner is gone
	// or the member leaves.
	Delete(key Key)
	// DeleteCluster forgets every key of one member cluster.
	DeleteCluster(cluster string)
}
