package hub

import (
	"context"
	"math"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/registry"
)

// memberCapacity estimates free room for the template: from the counters
// when the reconciler has them, else from the member's cache, unless the
// member's pods are not cached here (then its room is unknown: listing its
// pods would start caching them).
func (r *Reconciler) memberCapacity(ctx context.Context, m *registry.Member, tmpl *corev1.PodTemplateSpec) (int32, bool) {
	if r.Capacity != nil {
		return r.Capacity.Free(ctx, m.Name, tmpl)
	}
	if !r.podsCached(m.Name) {
		return 0, false
	}
	// Read-only use: skip the cache's deep copies, which dominate the cost of
	// this estimate in a large member.
	nodes := &corev1.NodeList{}
	if err := m.Cluster.GetCache().List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	pods := &corev1.PodList{}
	if err := m.Cluster.GetCache().List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	return capacity.Estimate(nodes.Items, pods.Items, tmpl), true
}

// podsTakingRoom counts the member's non-terminal pods of frs as its cache
// holds them (the cache the capacity counters are fed from), or -1 when it
// cannot tell: also for a member whose pods are not cached here, whose
// counters come from its owner's published usage (roomBeyondReport then
// takes the counters' room as the room beyond the report). They are the
// pods of the FRS's MemberReplicaSet and the orphans its selector matches,
// read through the engine's controller index: a list by selector would
// match every pod of the namespace for every FRS (with 1,000 FRS in one
// namespace, most of the idle leader's CPU).
func (r *Reconciler) podsTakingRoom(ctx context.Context, m *registry.Member, frs *v1alpha1.FederatedReplicaSet) int32 {
	if !r.podsCached(m.Name) {
		return -1
	}
	sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector)
	if err != nil || sel.Empty() {
		return -1
	}
	c := m.Cluster.GetCache()
	owners := []string{engine.OrphanIndexValue}
	mrs := &v1alpha1.MemberReplicaSet{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(frs), mrs); {
	case err == nil:
		owners = append(owners, string(mrs.UID))
	case !apierrors.IsNotFound(err):
		return -1
	}
	var n int32
	for _, owner := range owners {
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(frs.Namespace),
			client.MatchingFields{engine.PodControllerIndex: owner}, client.UnsafeDisableDeepCopy); err != nil {
			return -1
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			if owner == engine.OrphanIndexValue && !sel.Matches(labels.Set(p.Labels)) {
				continue
			}
			if p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				n++
			}
		}
	}
	return n
}

// podsCached reports whether this replica caches the member's pods.
func (r *Reconciler) podsCached(member string) bool {
	return r.PodsCached == nil || r.PodsCached(member)
}

// roomBeyondReport turns the member's free room (from the capacity counters,
// every non-terminal pod's room already taken, bound or not) into the room
// beyond the pods the member's report counts, which is what the planner adds
// to that report. The FRS's own pods in the same cache (own, -1 unknown) are
// the base: a report that lags the cache (pods created a moment ago, counted
// by the counters but not yet reported) or runs ahead of it moves the room
// the other way, so the total own + free is the same whichever was seen
// first, and a plan does not flap with the lag.
func roomBeyondReport(free, own, reported int32) int32 {
	if own < 0 {
		return free
	}
	return max(int32(min(int64(free)+int64(own)-int64(reported), math.MaxInt32)), 0)
}
