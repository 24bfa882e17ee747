package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
	"github.com/replicafed/replicafed/controller/podstate"
)

// PodControllerIndex is the pod cache index the engine lists by: the UID of the
// pod's controller, or OrphanIndexValue. Register it with PodControllerIndexFunc.
const PodControllerIndex = "replicafed.io/pod-controller"

// OrphanIndexValue is the PodControllerIndex value of pods without a controller.
const OrphanIndexValue = "<orphan>"

// PodControllerIndexFunc computes PodControllerIndex.
func PodControllerIndexFunc(obj client.Object) []string {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil {
		return []string{OrphanIndexValue}
	}
	return []string{string(ref.UID)}
}

// NewPod builds a pod for mrs from tmpl: labels, annotations and finalizers
// copied, spec deep-copied, the controller reference set. An empty name means
// the API server generates one from "<mrs-name>-".
func NewPod(mrs *v1alpha1.MemberReplicaSet, tmpl *corev1.PodTemplateSpec, name string) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:       mrs.Namespace,
			Labels:          copyMap(tmpl.Labels),
			Annotations:     copyMap(tmpl.Annotations),
			Finalizers:      append([]string(nil), tmpl.Finalizers...),
			OwnerReferences: []metav1.OwnerReference{claim.OwnerRef(mrs)},
		},
		Spec: *tmpl.Spec.DeepCopy(),
	}
	if name == "" {
		p.GenerateName = mrs.Name + "-"
	} else {
		p.Name = name
	}
	return p
}

func copyMap(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// listPods returns the pods controlled by mrs plus the orphans in its
// namespace, straight from the cache: they must not be modified.
func (e *Engine) listPods(ctx context.Context, mrs *v1alpha1.MemberReplicaSet) ([]*corev1.Pod, error) {
	owned, err := e.podsOf(ctx, mrs.Namespace, string(mrs.UID))
	if err != nil {
		return nil, err
	}
	orphans, err := e.podsOf(ctx, mrs.Namespace, OrphanIndexValue)
	if err != nil || len(orphans) == 0 {
		return owned, err
	}
	return append(append(make([]*corev1.Pod, 0, len(owned)+len(orphans)), owned...), orphans...), nil
}

// podsOf lists the cached pods of namespace whose PodControllerIndex value
// is controller: from the informer's index (shared, never modified) when
// Options.PodsByController can, else through the client without copies.
func (e *Engine) podsOf(ctx context.Context, namespace, controller string) ([]*corev1.Pod, error) {
	if byController := e.o.PodsByController; byController != nil {
		if pods, ok := byController(namespace, controller); ok {
			return pods, nil
		}
	}
	var l corev1.PodList
	if err := e.o.Client.List(ctx, &l, client.InNamespace(namespace),
		client.MatchingFields{PodControllerIndex: controller}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods from cache: %w", err)
	}
	out := make([]*corev1.Pod, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// filterPods splits the pods listed for mrs into the active ones (claim
// candidates) and those terminating that mrs controls and its selector
// matches (counted in the status only). Succeeded and failed pods are in
// neither.
func filterPods(all []*corev1.Pod, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector) (active, terminating []*corev1.Pod) {
	for _, p := range all {
		if podstate.IsActive(p) {
			active = append(active, p)
		} else if podstate.IsTerminating(p) && metav1.IsControlledBy(p, mrs) && selector.Matches(labels.Set(p.Labels)) {
			terminating = append(terminating, p)
		}
	}
	return active, terminating
}

// claimPods adopts matching orphans and releases owned pods that no longer
// match, and returns the active pods the MemberReplicaSet owns. An adoption
// first re-reads the owner live, as upstream.
func (e *Engine) claimPods(ctx context.Context, s *syncScope, active []*corev1.Pod) ([]*corev1.Pod, error) {
	cm := &claim.Claimer{Patcher: e.o.Client, Owner: s.mrs, Selector: s.selector, Deleting: s.deleting,
		CanAdopt: claim.RecheckOwner(e.o.APIReader, s.mrs)}
	claimed, err := cm.Claim(ctx, active)
	if err != nil {
		return nil, fmt.Errorf("claiming pods: %w", err)
	}
	return claimed, nil
}
