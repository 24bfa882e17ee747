package engine

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/ranking"
)

// PodSecurityLabelPrefix prefixes the Pod Security admission labels of a
// namespace (enforce, audit, warn and their -version).
const PodSecurityLabelPrefix = "pod-security.kubernetes.io/"

// PodSecurityLabels returns the pod-security.kubernetes.io/* labels of a
// hub namespace, the only ones copied to a namespace the engine creates:
// other labels may mean something else in the member. The result is never
// nil.
func PodSecurityLabels(hub map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range hub {
		if strings.HasPrefix(k, PodSecurityLabelPrefix) {
			out[k] = v
		}
	}
	return out
}

// nodeTiers returns a tier lookup for one scale-down: each node is read once
// from the node cache. A node missing from the cache (or a failed read) is
// unranked, so its pods keep upstream's order behind the ranked ones.
func (e *Engine) nodeTiers(ctx context.Context, nc *v1alpha1.NodeCost) func(*corev1.Pod) ranking.NodeTier {
	log := ctrl.LoggerFrom(ctx)
	seen := map[string]ranking.NodeTier{}
	return func(p *corev1.Pod) ranking.NodeTier {
		name := p.Spec.NodeName
		if name == "" {
			return ranking.NodeTier{}
		}
		if t, ok := seen[name]; ok {
			return t
		}
		var t ranking.NodeTier
		node := &corev1.Node{}
		// Read-only: the cache's copy is enough to read one label.
		err := e.o.Nodes.Get(ctx, types.NamespacedName{Name: name}, node, client.UnsafeDisableDeepCopy)
		switch {
		case err == nil:
			t = ranking.TierOf(nc, node.Labels)
		case apierrors.IsNotFound(err):
			log.V(4).Info("Node not in cache, its pods are unranked", "node", name)
		default:
			log.Error(err, "Reading node from cache, its pods are unranked", "node", name)
		}
		seen[name] = t
		return t
	}
}

// NodeCostFor is the node cost a Workload carries for frs: its own
// spec.scaleDown.nodeCost, else the controller's default def (nil for none).
// The result is a copy.
func NodeCostFor(frs *v1alpha1.FederatedReplicaSet, def *v1alpha1.NodeCost) *v1alpha1.NodeCost {
	if sd := frs.Spec.ScaleDown; sd != nil && sd.NodeCost != nil {
		return sd.NodeCost.DeepCopy()
	}
	return def.DeepCopy()
}
