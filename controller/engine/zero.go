package engine

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/replicafed/replicafed/controller/podstate"
)

// A member whose target is zero gets no MemberReplicaSet until it has a
// pod to act on. The planner gives every candidate member a target, zeros
// included; a FederatedReplicaSet of 10 replicas over 100 members would
// otherwise create 90 empty MemberReplicaSets, each with its status write
// and event, nine member writes per pod. What an empty MemberReplicaSet
// would do, the sync does without it: it reports zero to the hub, and when
// an orphan pod in the namespace matches the selector (left by a
// FederatedReplicaSet deleted with --cascade=orphan) it creates the owner
// after all, which adopts and deletes the orphan as a ReplicaSet of zero
// replicas does upstream. A MemberReplicaSet that exists is kept when its
// target drops to zero, as upstream keeps a scaled-down ReplicaSet.

// ownerNeeded reports whether a workload of target zero needs its
// MemberReplicaSet created: an active orphan pod of its namespace matches
// its selector.
func (e *Engine) ownerNeeded(ctx context.Context, nn types.NamespacedName, w *Workload) (bool, error) {
	sel, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil || sel.Empty() {
		// The owner's own sync refuses such a selector; nothing to adopt.
		return false, nil
	}
	orphans, err := e.podsOf(ctx, nn.Namespace, OrphanIndexValue)
	if err != nil {
		return false, err
	}
	for _, p := range orphans {
		if podstate.IsActive(p) && sel.Matches(labels.Set(p.Labels)) {
			return true, nil
		}
	}
	return false, nil
}

// reportZero tells the hub that the member runs nothing of w, as the sync
// of an empty MemberReplicaSet would.
func (e *Engine) reportZero(ctx context.Context, w *Workload) {
	if e.o.Sink == nil {
		return
	}
	st := MemberStatus{Target: 0, Hub: w.Hub, ReportedAt: e.o.Clock.Now()}
	st.Term, st.Fence = reportedPermit(ctx)
	e.o.Sink.Report(ctx, w.Key, st)
}
