package engine

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Workload is what the hub wants of one FederatedReplicaSet in one member.
type Workload struct {
	// Key names the member and the FederatedReplicaSet.
	Key fedref.MemberObject
	// Target is the member's replica count.
	Target int32
	// Selector is the FederatedReplicaSet's pod selector.
	Selector *metav1.LabelSelector
	// Template is the pod template; its labels must match Selector.
	Template corev1.PodTemplateSpec
	// TemplateHash is the rollout revision's template hash for a rolling
	// FederatedReplicaSet (the MemberReplicaSet is labelled with it,
	// v1alpha1.LabelTemplateHash); empty otherwise.
	TemplateHash string
	// MinReadySeconds is copied from the FederatedReplicaSet.
	MinReadySeconds int32
	// Hub identifies the FederatedReplicaSet.
	Hub v1alpha1.HubReference
	// Deleting is true while the hub object is being deleted: like a ReplicaSet
	// with a deletionTimestamp, no pod is created, deleted, adopted or released.
	Deleting bool
	// NodeCost is the FederatedReplicaSet's spec.scaleDown.nodeCost, or the
	// configured default; nil keeps upstream's deletion order. It is recorded
	// in the MemberReplicaSet spec and read from there on scale-down.
	NodeCost *v1alpha1.NodeCost
	// NamespaceLabels are the labels of the FederatedReplicaSet's namespace
	// in the hub. When the engine creates the namespace in the member it
	// copies the pod-security.kubernetes.io/* ones (see PodSecurityLabels),
	// so pods there meet the same Pod Security Standard as in the hub.
	NamespaceLabels map[string]string
	// Dependencies are the objects pods must find in the member before
	// they are created (spec.propagateDependencies: the template's
	// required references); empty means pods are created at once.
	Dependencies []dependencies.Ref
}

// DependencyChecker says which of a template's dependencies are missing in
// the member. The engine asks it only when it is about to create pods.
type DependencyChecker interface {
	// Missing returns those of refs that do not exist in namespace.
	Missing(ctx context.Context, namespace string, refs []dependencies.Ref) ([]dependencies.Ref, error)
}

// WorkloadSource tells the engine what the hub wants; federation and raft
// provide it. A key it does not know means "hands off": the engine neither
// creates the MemberReplicaSet nor touches pods.
type WorkloadSource interface {
	Workload(key fedref.MemberObject) (*Workload, bool)
}

// WorkloadLister is implemented by a WorkloadSource that can list the keys
// it has a workload for in one member. A worker's periodic resync enqueues
// them as well as the MemberReplicaSets it finds, so a key whose
// MemberReplicaSet does not exist yet (its first enqueue was lost, for
// example while the member's worker was being replaced) is not forgotten.
type WorkloadLister interface {
	WorkloadKeys(ctx context.Context, cluster string) ([]fedref.MemberObject, error)
}

// MemberStatus is one member's view of one FederatedReplicaSet after a sync.
type MemberStatus struct {
	// Target is the MemberReplicaSet's spec.replicas.
	Target int32
	// Hub is the MemberReplicaSet's hub reference, including the hub
	// generation the target was planned for.
	Hub v1alpha1.HubReference
	// Replicas, FullyLabeledReplicas, ReadyReplicas, AvailableReplicas and
	// TerminatingReplicas are the ReplicaSet status counts.
	Replicas             int32
	FullyLabeledReplicas int32
	ReadyReplicas        int32
	AvailableReplicas    int32
	TerminatingReplicas  int32
	// Restarts and CrashLoopingReplicas are the status's: the rollout's
	// health gate reads them per revision.
	Restarts, CrashLoopingReplicas int32
	// Unschedulable counts active pods with PodScheduled=False reason
	// Unschedulable; UnschedulableSince is the oldest such transition.
	Unschedulable      int32
	UnschedulableSince time.Time
	// ObservedGeneration is the MemberReplicaSet generation the status reflects.
	ObservedGeneration int64
	// ReplicaFailure is the ReplicaFailure condition, or nil.
	ReplicaFailure *metav1.Condition
	// ReportedAt is when the status was computed.
	ReportedAt time.Time
	// Term names the write permission the sync ran under: the leader term
	// behind a Gate, or the member's ownership epoch behind a FencedGate
	// (then Fence is set too). Either changes whenever another writer
	// takes the member over, which is what consumers compare it for (the
	// hub re-reads a member whose report comes from a new writer even
	// when its counts repeat); terms and epochs are different counters,
	// so only equality means anything across the two. 0 when unknown.
	Term uint64
	// Fence is the member ownership the sync wrote under (a FencedGate);
	// zero behind a plain Gate.
	Fence expectations.Fence
}

// StatusSink receives every sync's status; the hub aggregator consumes it.
// Report must not block for long: it runs on the sync path.
type StatusSink interface {
	Report(ctx context.Context, key fedref.MemberObject, st MemberStatus)
}

// Gate says whether this process may write to members now. Enter returns
// ok false on followers: they keep caches warm and write nothing. On the
// leader it returns a context cancelled when the permission ends (leadership
// lost, or the gate closed for a handover), the leader term the permission
// belongs to, and done, which the caller calls once every write made under
// ctx has returned: a handover waits for that before it transfers
// leadership.
type Gate interface {
	Enter() (ctx context.Context, term uint64, done func(), ok bool)
}

// FencedGate is a Gate whose permission is the ownership of one member
// (sharding) rather than raft leadership: a replica that owns the member
// writes to it whether or not it leads. When a member's gate implements
// it, Sync calls EnterFenced instead of Enter. ctx and done mean what they
// mean for Enter (ctx is cancelled promptly when the ownership ends:
// moved, a new epoch, or the lease lapsed); fence is the (owner, epoch)
// the permission belongs to. The sync's context then carries the fence
// (expectations.WithFence) and no term, and the takeover check
// (a quorum list and ReconcileReservations before the first write of a
// key) runs once per key and epoch where it runs once per key and term
// behind a plain Gate.
type FencedGate interface {
	Gate
	EnterFenced() (ctx context.Context, fence expectations.Fence, done func(), ok bool)
}

// OpenGate always allows writes; for tests and single-replica setups.
type OpenGate struct{}

// Enter implements Gate.
func (OpenGate) Enter() (context.Context, uint64, func(), bool) {
	return context.Background(), 0, func() {}, true
}
