package hub

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
)

// ConditionDeleting is set while the deletion waits for members.
const ConditionDeleting = "Deleting"

// finalize removes the FederatedReplicaSet's MemberReplicaSets from every
// member that ever had a target, before releasing the finalizer:
//   - background or foreground deletion in the hub: each MemberReplicaSet is
//     deleted with foreground propagation, so the member's garbage collector
//     deletes its pods first and the MemberReplicaSet disappears last;
//   - orphan deletion in the hub (the "orphan" finalizer is present): each
//     MemberReplicaSet is deleted with orphan propagation, so the member's
//     garbage collector strips the owner reference and the pods keep running,
//     unmanaged.
//
// A member that is registered but unreachable keeps the finalizer, with a
// condition naming it: nothing is decided for a member replicafed cannot see.
func (r *Reconciler) finalize(ctx context.Context, frs *v1alpha1.FederatedReplicaSet) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(frs, v1alpha1.FinalizerCascade) {
		return ctrl.Result{}, nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("frs", klog.KObj(frs))
	if r.Intents != nil {
		r.Intents.Observe(frs)
	}
	orphan := controllerutil.ContainsFinalizer(frs, metav1.FinalizerOrphanDependents) ||
		frs.Annotations[AnnotationPropagation] == string(metav1.DeletePropagationOrphan) ||
		(r.Intents != nil && r.Intents.Orphan(frs.UID))
	policy := metav1.DeletePropagationForeground
	if orphan {
		policy = metav1.DeletePropagationOrphan
	}
	if frs.Annotations[AnnotationPropagation] != string(policy) {
		// Written before any member is touched, so a new leader continues the
		// same way even if this replica forgets.
		patch := client.MergeFrom(frs.DeepCopy())
		if frs.Annotations == nil {
			frs.Annotations = map[string]string{}
		}
		frs.Annotations[AnnotationPropagation] = string(policy)
		if err := r.Hub.Patch(ctx, frs, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("recording deletion propagation on %s: %w", klog.KObj(frs), err)
		}
	}

	names := map[string]bool{}
	if prev, _, ok := r.Targets.Targets(refOf(frs)); ok {
		for n := range prev {
			names[n] = true
		}
	}
	for _, m := range r.Registry.Members() {
		names[m.Name] = true
	}
	var waiting, unreachable []string
	for name := range names {
		m, ok := r.Registry.Get(name)
		if !ok {
			// Not registered any more: there is no member to clean.
			continue
		}
		if st, ok := r.Health.State(name); ok && st.Health == v1alpha1.ClusterUnreachable {
			unreachable = append(unreachable, name)
			continue
		}
		mrs := &v1alpha1.MemberReplicaSet{}
		err := m.Cluster.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: frs.Namespace, Name: frs.Name}, mrs)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			unreachable = append(unreachable, name)
			log.V(1).Info("cannot read MemberReplicaSet while deleting", "cluster", name, "error", err.Error())
			continue
		}
		if mrs.Spec.Hub.UID != "" && mrs.Spec.Hub.UID != frs.UID {
			// A MemberReplicaSet of an older object with the same name: not ours.
			continue
		}
		if mrs.DeletionTimestamp == nil {
			err := m.Cluster.GetClient().Delete(ctx, mrs, client.PropagationPolicy(policy),
				client.Preconditions{UID: &mrs.UID})
			if err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("deleting MemberReplicaSet %s in %s: %w", klog.KObj(mrs), name, err)
			}
			log.V(1).Info("MemberReplicaSet deleted", "cluster", name, "propagation", policy)
			r.event(frs, corev1.EventTypeNormal, "MemberDeleted", "Delete",
				"cluster %s: deleting MemberReplicaSet (%s propagation)", name, policy)
		}
		waiting = append(waiting, name)
	}
	if len(waiting) > 0 || len(unreachable) > 0 {
		sort.Strings(waiting)
		sort.Strings(unreachable)
		msg := ""
		if len(unreachable) > 0 {
			msg = "waiting for unreachable members: " + strings.Join(unreachable, ", ")
		}
		if len(waiting) > 0 {
			if msg != "" {
				msg += "; "
			}
			msg += "waiting for deletion in: " + strings.Join(waiting, ", ")
		}
		patch := client.MergeFrom(frs.DeepCopy())
		if meta.SetStatusCondition(&frs.Status.Conditions, metav1.Condition{
			Type: ConditionDeleting, Status: metav1.ConditionTrue, Reason: "WaitingForMembers", Message: msg,
			ObservedGeneration: frs.Generation,
		}) {
			if err := r.Hub.Status().Patch(ctx, frs, patch); err != nil && !apierrors.IsNotFound(err) {
				return ctrl.Result{}, fmt.Errorf("writing deletion condition: %w", err)
			}
		}
		return ctrl.Result{RequeueAfter: requeueWhileDeleting}, nil
	}

	if err := r.Targets.DeleteTargets(ctx, refOf(frs)); err != nil {
		return ctrl.Result{}, fmt.Errorf("forgetting targets of %s: %w", klog.KObj(frs), err)
	}
	for name := range names {
		r.Expectations.Delete(expectations.Key{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
	}
	r.Reports.Forget(frs.Namespace, frs.Name)
	if r.Intents != nil {
		r.Intents.Forget(frs.UID)
	}
	patch := client.MergeFrom(frs.DeepCopy())
	controllerutil.RemoveFinalizer(frs, v1alpha1.FinalizerCascade)
	if err := r.Hub.Patch(ctx, frs, patch); err != nil && !apierrors.IsNotFound(err) {
		return ctrl.Result{}, fmt.Errorf("removing finalizer from %s: %w", klog.KObj(frs), err)
	}
	log.V(1).Info("deletion finished in every member", "orphan", orphan)
	return ctrl.Result{}, nil
}
