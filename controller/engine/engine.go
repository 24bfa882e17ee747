// Package engine is the member-side ReplicaSet reconcile for one
// FederatedReplicaSet in one member cluster: the equivalent of upstream's
// syncReplicaSet and manageReplicas, with the MemberReplicaSet in the role of
// the ReplicaSet. See controller/doc.go for the design and the deliberate
// differences from upstream.
package engine

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// DefaultBurstReplicas caps creations or deletions per sync, as upstream.
const DefaultBurstReplicas = 500

// Event reasons, as upstream's ReplicaSet controller.
const (
	ReasonSuccessfulCreate = "SuccessfulCreate"
	ReasonFailedCreate     = "FailedCreate"
	ReasonSuccessfulDelete = "SuccessfulDelete"
	ReasonFailedDelete     = "FailedDelete"
)

// Options configure an Engine for one member cluster.
type Options struct {
	// Cluster is the member's name, used in expectation keys and logs.
	Cluster string
	// Client reads pods and MemberReplicaSets from the member's informer cache
	// (with PodControllerIndex registered) and writes to the member.
	Client client.Client
	// APIReader reads the member live, for the adoption re-check and the
	// status-update retry.
	APIReader client.Reader
	// Store holds expectations.
	Store expectations.Store
	// Source says what the hub wants.
	Source WorkloadSource
	// Sink receives statuses; optional.
	Sink StatusSink
	// Gate permits writes; nil means always open. A FencedGate permits
	// them under a member ownership fence instead of a leader term.
	Gate Gate
	// Recorder emits events in the member; optional.
	Recorder events.EventRecorder
	// CreateNamespaces creates a missing namespace in the member (labelled
	// as managed by replicafed); when false, the member reports a
	// ReplicaFailure with reason NamespaceMissing instead.
	CreateNamespaces bool
	// BurstReplicas caps creations or deletions per sync; 0 means 500.
	BurstReplicas int
	// Clock is injected for tests; nil means the real clock.
	Clock clock.PassiveClock
	// PodStoreRV returns the resource version the pod informer's store has
	// caught up to ("" when unknown); optional. It makes the cache check
	// before the first write of a term cheap; without it pods are compared.
	PodStoreRV func() string
	// UnsatisfiedRequeue is how soon a key whose expectations are not
	// satisfied is synced again without an event; it must be well below the
	// expectations TTL. 0 means DefaultUnsatisfiedRequeue.
	UnsatisfiedRequeue time.Duration
	// Nodes reads the member's nodes for node cost tiers; it must be an
	// informer cache so a scale-down costs no API call. nil means Client.
	Nodes client.Reader
	// Dependencies checks that a workload's dependencies exist before pods
	// are created; nil creates pods without checking.
	Dependencies DependencyChecker
	// DependencyRecheck is how soon a key waiting for dependencies is
	// synced again without an event; 0 means DefaultDependencyRecheck.
	DependencyRecheck time.Duration
	// PodsByController returns the cached pods of namespace whose
	// PodControllerIndex value is controller, as the informer store holds
	// them (shared: never modified), and ok false when it cannot (the
	// informer is not started yet); optional. Without it pods are listed
	// through Client, which copies every pod of the list on every sync:
	// with thousands of pods per MemberReplicaSet that copy was most of
	// the engine's CPU.
	PodsByController func(namespace, controller string) (pods []*corev1.Pod, ok bool)
	// ViewIncomplete says why the pod cache does not hold every pod of the
	// member (a bounded cache that is full), nil when it does; optional.
	// While it returns an error a sync writes nothing to the member: no
	// pod is created or deleted on a partial view, no owner or status is
	// written. It reports the MemberReplicaSet's last written counts to the
	// Sink with a ReplicaFailure condition, reason PodCacheIncomplete, and
	// the key is synced again after IncompleteRequeue (the worker also
	// requeues every key when the view is complete again).
	ViewIncomplete func() error
	// Busy reports whether the member's rate limit is the bottleneck:
	// requests of syncs (which are marked clientlimit.First) wait for its
	// tokens. While it does, status writes wait (deferWhileBusy); optional.
	Busy func() bool
	// MaxStatusDeferral is the longest a status write waits while Busy;
	// 0 means DefaultMaxStatusDeferral.
	MaxStatusDeferral time.Duration
}

// ReasonPodCacheIncomplete is the ReplicaFailure reason a member reports
// while its pod cache misses pods (Options.ViewIncomplete).
const ReasonPodCacheIncomplete = "PodCacheIncomplete"

// IncompleteRequeue is how soon a key is synced again while the member's
// view is incomplete.
const IncompleteRequeue = 30 * time.Second

// DefaultUnsatisfiedRequeue is the default Options.UnsatisfiedRequeue.
const DefaultUnsatisfiedRequeue = 15 * time.Second

// cacheLagRequeue is how soon a key is synced again when the pod cache has
// not caught up with a quorum list yet.
const cacheLagRequeue = 200 * time.Millisecond

// Engine syncs MemberReplicaSets of one member. It is safe for concurrent use
// on different keys; the caller must not sync one key concurrently (the
// workqueue guarantees that).
type Engine struct {
	o Options
	// fenced is o.Gate when it is a FencedGate.
	fenced   FencedGate
	verified verified
	// quorum is the member-wide quorum read behind coveredByMember.
	quorum  memberQuorum
	written written
	paced   statusPace
}

// Result tells the caller when to sync the key again without an event.
type Result struct {
	// RequeueAfter > 0 asks for another sync after that delay.
	RequeueAfter time.Duration
	// AwaitLull asks for another sync as soon as the member's rate limit is
	// no longer busy (Options.Busy): a status write waits for that. The
	// key's RequeueAfter still comes, at the deferral's bound at the latest.
	AwaitLull bool
}

// New returns an Engine with defaults filled in.
func New(o Options) *Engine {
	if o.Gate == nil {
		o.Gate = OpenGate{}
	}
	if o.BurstReplicas <= 0 {
		o.BurstReplicas = DefaultBurstReplicas
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.APIReader == nil {
		o.APIReader = o.Client
	}
	if o.Nodes == nil {
		o.Nodes = o.Client
	}
	if o.UnsatisfiedRequeue <= 0 {
		o.UnsatisfiedRequeue = DefaultUnsatisfiedRequeue
	}
	if o.DependencyRecheck <= 0 {
		o.DependencyRecheck = DefaultDependencyRecheck
	}
	if o.MaxStatusDeferral <= 0 {
		o.MaxStatusDeferral = DefaultMaxStatusDeferral
	}
	e := &Engine{o: o}
	e.fenced, _ = o.Gate.(FencedGate)
	return e
}

// Key returns the expectations key of a MemberReplicaSet in this member.
func (e *Engine) Key(nn types.NamespacedName) fedref.MemberObject {
	return fedref.MemberObject{Cluster: e.o.Cluster, Namespace: nn.Namespace, Name: nn.Name}
}
