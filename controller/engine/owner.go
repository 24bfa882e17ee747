package engine

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

// getOwner reads the MemberReplicaSet from the cache; nil when it does not
// exist.
func (e *Engine) getOwner(ctx context.Context, nn types.NamespacedName) (*v1alpha1.MemberReplicaSet, error) {
	mrs := &v1alpha1.MemberReplicaSet{}
	if err := e.o.Client.Get(ctx, nn, mrs); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("reading MemberReplicaSet %s from cache: %w", nn, err)
	}
	return mrs, nil
}

// syncOwner brings the MemberReplicaSet in line with the workload: a key
// with neither is forgotten, a MemberReplicaSet without a workload is left
// alone, a missing one is created and a spec that differs is updated. It
// returns the copy to sync pods from, or nil when this sync ends here.
func (e *Engine) syncOwner(ctx context.Context, nn types.NamespacedName, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, wanted bool) (*v1alpha1.MemberReplicaSet, error) {
	switch {
	case mrs == nil && (!wanted || w.Deleting):
		e.forget(key)
		return nil, nil
	case !wanted:
		// Removing the MemberReplicaSet (and with it the pods) is the
		// federation's decision; without a workload we touch nothing.
		ctrl.LoggerFrom(ctx).V(2).Info("No workload for this member, leaving it alone")
		return nil, nil
	case mrs == nil && w.Target == 0:
		// No MemberReplicaSet for nothing to run (zero.go).
		needed, err := e.ownerNeeded(ctx, nn, w)
		if err != nil {
			return nil, err
		}
		if !needed {
			ctrl.LoggerFrom(ctx).V(4).Info("Target zero, no MemberReplicaSet needed")
			e.reportZero(ctx, w)
			return nil, nil
		}
		ctrl.LoggerFrom(ctx).V(1).Info("Target zero, but orphan pods match the selector: creating the MemberReplicaSet to adopt them")
		return nil, e.createOwner(ctx, nn, w)
	case mrs == nil:
		// Pods are created on a later sync, once the cache holds the owner, so
		// their add events resolve to it and settle expectations.
		return nil, e.createOwner(ctx, nn, w)
	}
	mrs = e.written.newest(key, mrs)
	if mrs.DeletionTimestamp == nil && !w.Deleting && ownerSpecDiffers(mrs, w) {
		return e.updateOwner(ctx, key, mrs, w)
	}
	return mrs, nil
}

// forget drops what the engine keeps for a key whose MemberReplicaSet and
// workload are both gone.
func (e *Engine) forget(key fedref.MemberObject) {
	e.o.Store.Delete(key)
	e.verified.forget(key)
	e.written.forget(key)
	e.paced.forget(key)
}

// ownerSpec is the MemberReplicaSet spec the workload asks for.
func ownerSpec(w *Workload) v1alpha1.MemberReplicaSetSpec {
	return v1alpha1.MemberReplicaSetSpec{Replicas: w.Target, Selector: w.Selector.DeepCopy(), MinReadySeconds: w.MinReadySeconds,
		NodeCost: w.NodeCost.DeepCopy(), Hub: w.Hub}
}

// ownerSpecDiffers reports whether mrs's spec is not what w asks for.
func ownerSpecDiffers(mrs *v1alpha1.MemberReplicaSet, w *Workload) bool {
	return !equality.Semantic.DeepEqual(mrs.Spec, ownerSpec(w))
}

// NewOwner is the MemberReplicaSet the engine creates for w under nn.
func NewOwner(nn types.NamespacedName, w *Workload) *v1alpha1.MemberReplicaSet {
	mrs := &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: nn.Namespace, Name: nn.Name,
			Labels:      map[string]string{v1alpha1.LabelManagedBy: v1alpha1.ManagedByValue, v1alpha1.LabelFederatedName: w.Hub.Name},
			Annotations: map[string]string{v1alpha1.AnnotationHubUID: string(w.Hub.UID)},
		},
		Spec: ownerSpec(w),
	}
	if w.TemplateHash != "" {
		mrs.Labels[v1alpha1.LabelTemplateHash] = w.TemplateHash
	}
	return mrs
}

// createOwner creates the MemberReplicaSet for w, creating its namespace
// first when allowed (namespaceMissing).
func (e *Engine) createOwner(ctx context.Context, nn types.NamespacedName, w *Workload) error {
	mrs := NewOwner(nn, w)
	err := e.o.Client.Create(ctx, mrs)
	if apierrors.IsNotFound(err) {
		err = e.namespaceMissing(ctx, nn, w, mrs)
	}
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind; its add event will requeue the key.
			return nil
		}
		return fmt.Errorf("creating MemberReplicaSet %s: %w", nn, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Created MemberReplicaSet", "target", w.Target)
	return nil
}

// namespaceMissing handles a create refused because the namespace does not
// exist in the member: create it and retry, or report the failure to the hub.
func (e *Engine) namespaceMissing(ctx context.Context, nn types.NamespacedName, w *Workload, mrs *v1alpha1.MemberReplicaSet) error {
	if !e.o.CreateNamespaces {
		err := fmt.Errorf("namespace %s does not exist in member %s and controller.createNamespaces is false", nn.Namespace, e.o.Cluster)
		if e.o.Sink != nil {
			e.o.Sink.Report(ctx, w.Key, MemberStatus{
				Target: w.Target, Hub: w.Hub, ReportedAt: e.o.Clock.Now(),
				ReplicaFailure: &metav1.Condition{Type: "ReplicaFailure", Status: metav1.ConditionTrue, Reason: "NamespaceMissing", Message: err.Error()},
			})
		}
		return err
	}
	nsLabels := PodSecurityLabels(w.NamespaceLabels)
	nsLabels[v1alpha1.LabelManagedBy] = v1alpha1.ManagedByValue
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nn.Namespace, Labels: nsLabels}}
	if err := e.o.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", nn.Namespace, err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Created missing namespace", "namespace", nn.Namespace, "labels", nsLabels)
	return e.o.Client.Create(ctx, mrs)
}

// updateOwner writes the spec w asks for and returns the updated copy,
// remembered until the cache shows it.
func (e *Engine) updateOwner(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload) (*v1alpha1.MemberReplicaSet, error) {
	upd := mrs.DeepCopy()
	upd.Spec = ownerSpec(w)
	if err := e.o.Client.Update(ctx, upd); err != nil {
		return nil, fmt.Errorf("updating MemberReplicaSet %s spec: %w", klog.KObj(mrs), err)
	}
	e.written.record(key, mrs, upd)
	ctrl.LoggerFrom(ctx).V(1).Info("Updated MemberReplicaSet spec", "target", w.Target, "previousTarget", mrs.Spec.Replicas)
	return upd, nil
}
