// Package builder makes the API objects tests need, one fluent builder per
// kind (kueue's pkg/util/testing style): start from a small valid object,
// change only what the test is about, and take the result with Obj.
//
//	f := builder.FRS("default", "web").Replicas(3).Clusters("a", "b").Obj()
package builder

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// DefaultImage is the container image of a built pod template; no test pulls it.
const DefaultImage = "registry.k8s.io/pause:3.10"

// FRSBuilder builds a FederatedReplicaSet.
type FRSBuilder struct{ f v1alpha1.FederatedReplicaSet }

// FRS starts a valid FederatedReplicaSet namespace/name of one replica:
// selector and template labels app=name, one container "c" of DefaultImage.
func FRS(namespace, name string) *FRSBuilder {
	lbls := map[string]string{"app": name}
	return &FRSBuilder{f: v1alpha1.FederatedReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.FederatedReplicaSetSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: lbls},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: DefaultImage}}},
			},
		},
	}}
}

// Obj returns a copy of the object built so far; the builder stays usable.
func (b *FRSBuilder) Obj() *v1alpha1.FederatedReplicaSet { return b.f.DeepCopy() }

// Replicas sets spec.replicas.
func (b *FRSBuilder) Replicas(n int32) *FRSBuilder { b.f.Spec.Replicas = ptr.To(n); return b }

// NoReplicas leaves spec.replicas unset.
func (b *FRSBuilder) NoReplicas() *FRSBuilder { b.f.Spec.Replicas = nil; return b }

// UID sets metadata.uid.
func (b *FRSBuilder) UID(uid types.UID) *FRSBuilder { b.f.UID = uid; return b }

// Generation sets metadata.generation.
func (b *FRSBuilder) Generation(g int64) *FRSBuilder { b.f.Generation = g; return b }

// Annotation sets one metadata annotation.
func (b *FRSBuilder) Annotation(k, v string) *FRSBuilder {
	if b.f.Annotations == nil {
		b.f.Annotations = map[string]string{}
	}
	b.f.Annotations[k] = v
	return b
}

// Label makes key=value the one label the selector matches and the pod
// template carries, in place of app=name.
func (b *FRSBuilder) Label(key, value string) *FRSBuilder {
	b.f.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	b.f.Spec.Template.Labels = map[string]string{key: value}
	return b
}

// Placement replaces spec.placement.
func (b *FRSBuilder) Placement(p v1alpha1.Placement) *FRSBuilder { b.f.Spec.Placement = p; return b }

// Selector replaces spec.selector (the template's labels are not changed).
func (b *FRSBuilder) Selector(s *metav1.LabelSelector) *FRSBuilder { b.f.Spec.Selector = s; return b }

// Template replaces the pod template.
func (b *FRSBuilder) Template(t corev1.PodTemplateSpec) *FRSBuilder { b.f.Spec.Template = t; return b }

// TemplateLabels replaces the pod template's labels.
func (b *FRSBuilder) TemplateLabels(l map[string]string) *FRSBuilder {
	b.f.Spec.Template.Labels = l
	return b
}

// TemplateAnnotation sets one pod template annotation.
func (b *FRSBuilder) TemplateAnnotation(k, v string) *FRSBuilder {
	if b.f.Spec.Template.Annotations == nil {
		b.f.Spec.Template.Annotations = map[string]string{}
	}
	b.f.Spec.Template.Annotations[k] = v
	return b
}

// PodSpec replaces the pod template's spec.
func (b *FRSBuilder) PodSpec(s corev1.PodSpec) *FRSBuilder { b.f.Spec.Template.Spec = s; return b }

// EditPodSpec changes the pod template's spec in place.
func (b *FRSBuilder) EditPodSpec(edit func(*corev1.PodSpec)) *FRSBuilder {
	edit(&b.f.Spec.Template.Spec)
	return b
}

// Clusters prefers the named members, with no weight or bounds.
func (b *FRSBuilder) Clusters(names ...string) *FRSBuilder {
	for _, n := range names {
		b.f.Spec.Placement.Clusters = append(b.f.Spec.Placement.Clusters, v1alpha1.ClusterPreference{Name: n})
	}
	return b
}

// Cluster adds one member preference as given.
func (b *FRSBuilder) Cluster(p v1alpha1.ClusterPreference) *FRSBuilder {
	b.f.Spec.Placement.Clusters = append(b.f.Spec.Placement.Clusters, p)
	return b
}

// ClusterSelector sets spec.placement.clusterSelector.
func (b *FRSBuilder) ClusterSelector(s *metav1.LabelSelector) *FRSBuilder {
	b.f.Spec.Placement.ClusterSelector = s
	return b
}

// Strategy sets spec.placement.strategy.
func (b *FRSBuilder) Strategy(s v1alpha1.PlacementStrategy) *FRSBuilder {
	b.f.Spec.Placement.Strategy = s
	return b
}

// Toleration adds a member taint toleration.
func (b *FRSBuilder) Toleration(t v1alpha1.ClusterToleration) *FRSBuilder {
	b.f.Spec.Placement.Tolerations = append(b.f.Spec.Placement.Tolerations, t)
	return b
}

// Failover sets spec.failover.
func (b *FRSBuilder) Failover(f v1alpha1.Failover) *FRSBuilder { b.f.Spec.Failover = f; return b }

// MoveBudget sets spec.moveBudget's surge and unavailable bounds.
func (b *FRSBuilder) MoveBudget(maxSurge, maxUnavailable intstr.IntOrString) *FRSBuilder {
	b.f.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: &maxSurge, MaxUnavailable: &maxUnavailable}
	return b
}

// DeletionPolicy sets spec.deletionPolicy.
func (b *FRSBuilder) DeletionPolicy(p v1alpha1.DeletionPolicy) *FRSBuilder {
	b.f.Spec.DeletionPolicy = p
	return b
}

// PropagateDependencies sets spec.propagateDependencies.
func (b *FRSBuilder) PropagateDependencies() *FRSBuilder {
	b.f.Spec.PropagateDependencies = true
	return b
}

// ClusterStatus sets status.clusters to rows and the status totals to their
// sums, as the hub's aggregation would.
func (b *FRSBuilder) ClusterStatus(rows ...v1alpha1.ClusterStatus) *FRSBuilder {
	s := &b.f.Status
	s.Clusters = rows
	s.Replicas, s.ReadyReplicas, s.AvailableReplicas = 0, 0, 0
	for _, r := range rows {
		s.Replicas += r.Replicas
		s.ReadyReplicas += r.ReadyReplicas
		s.AvailableReplicas += r.AvailableReplicas
	}
	return b
}

// Edit changes anything else in place.
func (b *FRSBuilder) Edit(edit func(*v1alpha1.FederatedReplicaSet)) *FRSBuilder {
	edit(&b.f)
	return b
}
