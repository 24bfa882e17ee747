package engine

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
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
