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

	"github.com/replicafed/replicafed/internal/fedref"
)

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

type termKey struct{}

// WithTerm returns ctx carrying the leader term a sync was permitted in, so
// that a store that fences its entries by term stamps them with the term
// the decision was made in.
func WithTerm(ctx context.Context, term uint64) context.Context {
	return context.WithValue(ctx, termKey{}, term)
}

// TermFrom returns the term set by WithTerm.
func TermFrom(ctx context.Context) (uint64, bool) {
	t, ok := ctx.Value(termKey{}).(uint64)
	return t, ok
}

type fenceKey struct{}

// Fence is the member ownership a sync writes under when the replicas
// share the members out (sharding): the owning replica and the epoch of
// its assignment. A store that fences its entries sends it instead of the
// leader term, so a write decided under an older owner is refused.
type Fence struct {
	// Owner is the owning replica's raft server ID.
	Owner string
	// Epoch is the member's ownership epoch; epochs never repeat.
	Epoch uint64
}

// WithFence returns ctx carrying the member ownership a sync was
// permitted under.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence set by WithFence.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// Store is what the member engine needs from an expectations store.
//
// Creations: ExpectCreations returns one entry per pod the engine may create.
// A non-empty entry is the exact pod name to create (AlreadyExists then counts
// as success); an empty entry means "use generateName". The store may grant
// fewer than asked, never more; a refusal is an error. Each granted entry is
// settled exactly once: by CreationObserved when the informer sees the pod, by
// CreationFailed when the create was refused or never sent, or by
// CreationUnknown when its outcome is unknown (timeout, cancelled call), in
// which case a name-reserving store keeps the name for the slot and grants
// it again instead of a new one.
//
// Deletions: ExpectDeletions records the pods about to be deleted before the
// calls are made; DeletionObserved settles one of them (also for a failed
// delete, as upstream does).
type Store interface {
	// Satisfied reports whether no creations or deletions are outstanding for
	// key (or they have expired), so the engine may create or delete.
	Satisfied(key fedref.MemberObject) bool
	// ExpectCreations grants names for creations; see the type comment.
	ExpectCreations(ctx context.Context, key fedref.MemberObject, intent CreateIntent) ([]string, error)
	// CreationObserved settles one expected creation when a pod controlled by
	// key's owner appears. podName lets a name-reserving store settle the right
	// reservation; a counting store ignores it.
	CreationObserved(key fedref.MemberObject, podName string)
	// CreationFailed settles one granted creation that did not happen.
	CreationFailed(key fedref.MemberObject, podName string)
	// CreationUnknown settles one granted creation whose call may or may not
	// have created the pod.
	CreationUnknown(key fedref.MemberObject, podName string)
	// ExpectDeletions records pods about to be deleted. It replaces any earlier
	// set for key.
	ExpectDeletions(ctx context.Context, key fedref.MemberObject, pods []PodRef) error
	// DeletionObserved settles the expected deletion of podName, at most once.
	DeletionObserved(key fedref.MemberObject, podName string)
	// Delete forgets everything about key, for example when the owner is gone.
	// A replicated store forgets shared state only on the fenced leader; any
	// other caller's Delete is local.
	Delete(key fedref.MemberObject)
	// DeleteCluster drops this process's local state for one member cluster
	// when its worker stops. It never changes replicated state: another
	// replica may be acting on that member.
	DeleteCluster(cluster string)
}

// Relister is implemented by stores that may drop observations (bounded
// memory). When Epoch changes, observations were lost and the engine must
// re-verify each key from a fresh list before it writes.
type Relister interface {
	Epoch() uint64
}

// TermReconciler is implemented by stores whose expectations outlive a
// leader term. Before its first write for a key in a term, the engine lists
// the member's pods with a quorum read and passes them (by name) here; the
// store settles what the list proves, keeps the names of earlier terms'
// unfulfilled reservations for the current term, and keeps earlier terms'
// deletes of pods that still run, which the engine then deletes itself.
type TermReconciler interface {
	ReconcileReservations(ctx context.Context, key fedref.MemberObject, listed map[string]ListedPod) (Settlement, error)
}

// QuietReconciler is a TermReconciler that can tell, without a list, when
// a reconcile of key under ctx's term or fence would settle nothing: it
// holds no expectations for key, or (under a term) only names granted in
// that term and handed to no one, so no earlier write for key can still be
// in flight. The engine then checks its cache for key against one quorum
// read of the whole member per term instead of a list of the key's pods.
type QuietReconciler interface {
	TermReconciler
	Quiet(ctx context.Context, key fedref.MemberObject) bool
}

// ListedPod is one pod of a quorum list, as a TermReconciler reads it.
type ListedPod struct {
	UID types.UID
	// Deleting is true when the pod already carries a deletion timestamp.
	Deleting bool
}

// Settlement is what a TermReconciler decided for one key.
type Settlement struct {
	// Completed are reserved names whose pod exists.
	Completed []string
	// Held are earlier-term reserved names without a pod, kept for this term.
	Held []string
	// HeldDeletes are earlier-term deletes whose pod still runs: the deposed
	// leader's call may still land, so this term deletes exactly these pods
	// (by UID) instead of choosing other victims.
	HeldDeletes []PodRef
}
