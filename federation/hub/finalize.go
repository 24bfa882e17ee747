package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

// ConditionDeleting is set while the deletion waits for members.
const ConditionDeleting = "Deleting"

// finalize removes the FederatedReplicaSet's MemberReplicaSets from every
// member that ever had a target, before releasing the finalizer:
//   - background or foreground deletion in the hub: each MemberReplicaSet is
//     deleted with foreground propagation, so the member's garbage collector
//     deletes its pods first and the MemberReplicaSet disappears last. The
//     member's collector can finish that before its own informer has seen a
//     pod created just before the delete, so once a MemberReplicaSet is gone
//     its pods are looked for too (by the UID of its controller reference, see deleteLeftoverPods) and deleted here; the
//     finalizer stays until none is left;
//   - orphan deletion in the hub (the "orphan" finalizer was seen, an earlier
//     leader recorded it, or spec.deletionPolicy is Orphan): each
//     MemberReplicaSet is deleted with orphan propagation, so the member's
//     garbage collector strips the owner reference and the pods keep running,
//     unmanaged.
//
// A member that is registered but unreachable keeps the finalizer, with a
// condition naming it: nothing is decided for a member replicafed cannot see.
//
// A pass records the propagation, picks the members to call, takes one
// deletion step in each, and then either reports what it waits for or
// releases the finalizer.
func (r *Reconciler) finalize(ctx context.Context, frs *v1alpha1.FederatedReplicaSet) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(frs, v1alpha1.FinalizerCascade) {
		return ctrl.Result{}, nil
	}
	if r.Intents != nil {
		r.Intents.Observe(frs)
	}
	d := r.newDeletion(frs)
	r.pickDeletionMembers(d)
	r.waitOnCaches(ctx, d)
	if err := r.deleteInMembers(ctx, d); err != nil {
		return ctrl.Result{}, err
	}
	if len(d.waiting) > 0 || len(d.unreachable) > 0 {
		if err := r.reportDeletionWait(ctx, d); err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: requeueWhileDeleting}, nil
	}
	return ctrl.Result{}, r.releaseFinalizer(ctx, d)
}

// requeueWhileDeleting is how often a blocked deletion is retried.
const requeueWhileDeleting = 5 * time.Second

// deletion is one pass of the deletion protocol over frs.
type deletion struct {
	frs *v1alpha1.FederatedReplicaSet
	// orphan: the pods stay (deletionOrphans); policy is the propagation
	// the MemberReplicaSets are deleted with.
	orphan bool
	policy metav1.DeletionPropagation
	now    time.Time
	// names are the members that may hold something of frs: those with a
	// committed target and every engaged one.
	names map[string]bool
	// members are those of names the pass calls.
	members []*registry.Member
	// waiting are the members where deletion is under way; unreachable
	// those that cannot be called or did not answer.
	waiting, unreachable []string
}

// newDeletion starts a deletion pass over frs.
func (r *Reconciler) newDeletion(frs *v1alpha1.FederatedReplicaSet) *deletion {
	d := &deletion{frs: frs, now: r.Clock.Now(), policy: metav1.DeletePropagationForeground}
	d.orphan = deletionOrphans(frs, r.Intents != nil && r.Intents.Orphan(frs.UID))
	if d.orphan {
		d.policy = metav1.DeletePropagationOrphan
	}
	return d
}

// pickDeletionMembers lists the members that may hold something of the
// object and sorts them into those to call and those to wait for.
func (r *Reconciler) pickDeletionMembers(d *deletion) {
	d.names = map[string]bool{}
	if prev, _, ok := r.Targets.Targets(refOf(d.frs)); ok {
		for n := range prev {
			d.names[n] = true
		}
	}
	for _, m := range r.Registry.Members() {
		d.names[m.Name] = true
	}
	for name := range d.names {
		m, ok := r.Registry.Get(name)
		switch {
		case !ok:
			// Not registered any more: there is no member to clean.
		case r.isUnreachable(name) || r.stalls.stalled(m, d.now):
			// Unreachable, or it did not answer lately: waiting on it
			// again would hold every other object's reconcile too.
			d.unreachable = append(d.unreachable, name)
		default:
			d.members = append(d.members, m)
		}
	}
}

// deleteInMembers takes one deletion step in each member of d.members:
// it reads each one's MemberReplicaSet, records their UIDs and the
// deletion's propagation on the hub object (one write, before any delete,
// so a new leader continues the same way even if this replica forgets),
// then deletes (finalizeMember).
// Every member call is bounded (a member that does not answer in time is
// waited for like an unreachable one) and runs beside the others'.
func (r *Reconciler) deleteInMembers(ctx context.Context, d *deletion) error {
	log := ctrl.LoggerFrom(ctx).WithValues("frs", klog.KObj(d.frs))
	// Calls the pass gives up on may outlive it: they get their own copy.
	snap := d.frs.DeepCopy()
	found := boundedRead(ctx, &r.stalls, d.members, r.finalizeTimeout(), d.now, func(ctx context.Context, m *registry.Member) ownedMRS {
		return r.memberReplicaSet(ctx, snap, m)
	})
	if err := r.recordOwners(ctx, d.frs, ownersToRecord(found), d.policy); err != nil {
		return err
	}
	var act []*registry.Member
	for _, m := range d.members {
		got, ok := found[m]
		switch {
		case !ok:
			d.unreachable = append(d.unreachable, m.Name)
		case got.err != nil:
			d.unreachable = append(d.unreachable, m.Name)
			log.V(1).Info("Cannot read MemberReplicaSet while deleting", "cluster", m.Name, "reason", got.err.Error())
		default:
			act = append(act, m)
		}
	}
	owned := recordedOwners(d.frs)
	steps := boundedRead(ctx, &r.stalls, act, r.finalizeTimeout(), d.now, func(ctx context.Context, m *registry.Member) stepResult {
		state, err := r.finalizeMember(ctx, snap, m, found[m].mrs, owned[m.Name], d.policy, d.orphan)
		return stepResult{state, err}
	})
	for _, m := range act {
		got, ok := steps[m]
		switch {
		case !ok:
			d.unreachable = append(d.unreachable, m.Name)
		case got.err != nil:
			d.unreachable = append(d.unreachable, m.Name)
			log.V(1).Info("Cannot finish deleting in member", "cluster", m.Name, "reason", got.err.Error())
		case got.state == memberWaiting:
			d.waiting = append(d.waiting, m.Name)
		}
	}
	return nil
}

// ownersToRecord are the UIDs of the MemberReplicaSets about to be
// deleted, by member: those found and not yet being deleted.
func ownersToRecord(found map[*registry.Member]ownedMRS) map[string]types.UID {
	owners := map[string]types.UID{}
	for m, got := range found {
		if got.err == nil && got.mrs != nil && got.mrs.DeletionTimestamp == nil {
			owners[m.Name] = got.mrs.UID
		}
	}
	return owners
}

// reportDeletionWait sets the Deleting condition naming the members the
// deletion waits for (written only when it changes).
func (r *Reconciler) reportDeletionWait(ctx context.Context, d *deletion) error {
	patch := client.MergeFrom(d.frs.DeepCopy())
	if meta.SetStatusCondition(&d.frs.Status.Conditions, metav1.Condition{
		Type: ConditionDeleting, Status: metav1.ConditionTrue, Reason: "WaitingForMembers",
		Message: deletionWaitMessage(d.waiting, d.unreachable), ObservedGeneration: d.frs.Generation,
	}) {
		if err := r.Hub.Status().Patch(ctx, d.frs, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("writing deletion condition: %w", err)
		}
	}
	return nil
}

// deletionWaitMessage says which members a deletion waits for, in name
// order so that the condition does not change with map order.
func deletionWaitMessage(waiting, unreachable []string) string {
	var parts []string
	if len(unreachable) > 0 {
		parts = append(parts, "waiting for unreachable members: "+strings.Join(slices.Sorted(slices.Values(unreachable)), ", "))
	}
	if len(waiting) > 0 {
		parts = append(parts, "waiting for deletion in: "+strings.Join(slices.Sorted(slices.Values(waiting)), ", "))
	}
	return strings.Join(parts, "; ")
}

// releaseFinalizer ends the deletion once nothing of the object is left in
// any member: its targets, expectations and everything kept for it are
// forgotten, then the finalizer goes.
func (r *Reconciler) releaseFinalizer(ctx context.Context, d *deletion) error {
	frs := d.frs
	if err := r.Targets.DeleteTargets(ctx, refOf(frs)); err != nil {
		return fmt.Errorf("forgetting targets of %s: %w", klog.KObj(frs), err)
	}
	if r.Rollouts != nil {
		if rec, ok := r.Rollouts.Rollout(refOf(frs)); ok {
			for name := range d.names {
				for _, obj := range rolloutObjects(rec) {
					r.Expectations.Delete(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: obj})
				}
			}
		}
		if err := r.Rollouts.DeleteRollout(ctx, refOf(frs)); err != nil {
			return fmt.Errorf("forgetting the rollout of %s: %w", klog.KObj(frs), err)
		}
	}
	for name := range d.names {
		r.Expectations.Delete(fedref.MemberObject{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
	}
	r.forget(frs.Namespace, frs.Name)
	if r.Intents != nil {
		r.Intents.Forget(frs.UID)
	}
	patch := client.MergeFrom(frs.DeepCopy())
	controllerutil.RemoveFinalizer(frs, v1alpha1.FinalizerCascade)
	if err := r.Hub.Patch(ctx, frs, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("removing finalizer from %s: %w", klog.KObj(frs), err)
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deletion finished in every member", "frs", klog.KObj(frs), "orphan", d.orphan)
	return nil
}

// finalizeTimeout bounds each round of member calls of one deletion pass
// (live reads, then deletes; twice MemberTimeout, as they go to the API
// server rather than a cache): a member that does not answer in time is
// waited for as an unreachable one, and left alone for a while (stalls).
func (r *Reconciler) finalizeTimeout() time.Duration { return 2 * r.memberTimeout() }

// memberState is how far a deletion got in one member.
type memberState int

const (
	// memberDone: nothing of the object is left there (or it is not ours).
	memberDone memberState = iota
	// memberWaiting: its MemberReplicaSet or pods are still being deleted.
	memberWaiting
)

// ownedMRS is a member's MemberReplicaSet of the object being deleted: nil
// when there is none of it (none at all, no CRD, or one of an older object
// of the same name), err when it could not be read.
type ownedMRS struct {
	mrs *v1alpha1.MemberReplicaSet
	err error
}

// stepResult is the outcome of one deletion step in one member.
type stepResult struct {
	state memberState
	err   error
}

// isUnreachable reports whether the member's health says it is unreachable.
func (r *Reconciler) isUnreachable(name string) bool {
	st, ok := r.Health.State(name)
	return ok && st.Health == v1alpha1.ClusterUnreachable
}

// memberReplicaSet reads frs's MemberReplicaSet in m from the member's API
// server (not its cache: deletion decides on what is there now).
func (r *Reconciler) memberReplicaSet(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, m *registry.Member) ownedMRS {
	mrs := &v1alpha1.MemberReplicaSet{}
	err := m.Cluster.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: frs.Namespace, Name: frs.Name}, mrs)
	switch {
	case meta.IsNoMatchError(err), apierrors.IsNotFound(err):
		// No MemberReplicaSet CRD (nothing of ours can run there), or none.
		return ownedMRS{}
	case err != nil:
		return ownedMRS{err: fmt.Errorf("reading MemberReplicaSet: %w", err)}
	case mrs.Spec.Hub.UID != "" && mrs.Spec.Hub.UID != frs.UID:
		// A MemberReplicaSet of an older object with the same name: not ours.
		return ownedMRS{}
	}
	return ownedMRS{mrs: mrs}
}

// finalizeMember takes one deletion step in member m: delete the object's
// MemberReplicaSet mrs (its UID already recorded on the hub object), or,
// once it is gone, the pods that outlived it, known by owner, the UID of the
// MemberReplicaSet replicafed deleted there (empty when none was).
func (r *Reconciler) finalizeMember(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, m *registry.Member, mrs *v1alpha1.MemberReplicaSet, owner types.UID, policy metav1.DeletionPropagation, orphan bool) (memberState, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("frs", klog.KObj(frs), "cluster", m.Name)
	if isRolling(frs, r.loadRollout(frs)) {
		// A rollout's revisions go first, the object's own one after.
		if left, err := r.deleteRevisionObjects(ctx, frs, m.Cluster.GetClient(), m.Cluster.GetAPIReader(), policy); err != nil {
			return memberDone, err
		} else if left > 0 {
			return memberWaiting, nil
		}
	}
	if mrs != nil {
		if mrs.DeletionTimestamp == nil {
			err := m.Cluster.GetClient().Delete(ctx, mrs, client.PropagationPolicy(policy),
				client.Preconditions{UID: &mrs.UID})
			if err != nil && !apierrors.IsNotFound(err) {
				return memberDone, fmt.Errorf("deleting MemberReplicaSet %s: %w", klog.KObj(mrs), err)
			}
			log.V(1).Info("MemberReplicaSet deleted", "propagation", policy)
			r.event(frs, corev1.EventTypeNormal, "MemberDeleted", "Delete",
				"cluster %s: deleting MemberReplicaSet (%s propagation)", m.Name, policy)
		}
		return memberWaiting, nil
	}
	if orphan || owner == "" {
		// Orphaned pods stay. Without a MemberReplicaSet replicafed deleted
		// there, no pod of this object can be left: pods that only look
		// like ours (same owner name) are not ours to wait for.
		return memberDone, nil
	}
	left, err := r.deleteLeftoverPods(ctx, frs, owner, m.Cluster.GetClient(), m.Cluster.GetAPIReader())
	if err != nil {
		return memberDone, fmt.Errorf("clearing pods left after the MemberReplicaSet: %w", err)
	}
	if left > 0 {
		log.V(1).Info("Pods outlived their MemberReplicaSet; deleting them", "pods", left)
		return memberWaiting, nil
	}
	return memberDone, nil
}

// AnnotationMemberOwners records, on a FederatedReplicaSet being deleted,
// the UID of each member's MemberReplicaSet replicafed deleted (JSON, member
// name to UID): pods that outlive it are recognised by that UID in their
// controller reference, so a pod someone else made with the same owner name
// is neither deleted nor waited for. It is written before the delete, so a
// new leader knows it too.
const AnnotationMemberOwners = "replicafed.io/member-owners"

// recordedOwners reads AnnotationMemberOwners (empty when absent or unreadable).
func recordedOwners(frs *v1alpha1.FederatedReplicaSet) map[string]types.UID {
	out := map[string]types.UID{}
	if v := frs.Annotations[AnnotationMemberOwners]; v != "" {
		_ = json.Unmarshal([]byte(v), &out) // unreadable: nothing recorded
	}
	return out
}

// recordOwners adds owners (member name to MemberReplicaSet UID) to
// AnnotationMemberOwners on frs and records the deletion's propagation
// (AnnotationPropagation), in one write when anything is new.
func (r *Reconciler) recordOwners(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, owners map[string]types.UID, policy metav1.DeletionPropagation) error {
	all := recordedOwners(frs)
	changed := frs.Annotations[AnnotationPropagation] != string(policy)
	for member, uid := range owners {
		if all[member] != uid {
			all[member], changed = uid, true
		}
	}
	if !changed {
		return nil
	}
	patch := client.MergeFrom(frs.DeepCopy())
	if frs.Annotations == nil {
		frs.Annotations = map[string]string{}
	}
	frs.Annotations[AnnotationPropagation] = string(policy)
	if len(all) > 0 {
		data, err := json.Marshal(all)
		if err != nil {
			return fmt.Errorf("encoding member owners: %w", err)
		}
		frs.Annotations[AnnotationMemberOwners] = string(data)
	}
	if err := r.Hub.Patch(ctx, frs, patch); err != nil {
		return fmt.Errorf("recording the deletion's propagation and MemberReplicaSets on %s: %w", klog.KObj(frs), err)
	}
	return nil
}

// deletionOrphans says whether deleting frs leaves its pods running: the
// delete asked for it (the "orphan" finalizer, seen now, on the event path,
// or recorded by an earlier leader in the annotation), or, when no replica
// saw what the delete asked for, spec.deletionPolicy says Orphan.
func deletionOrphans(frs *v1alpha1.FederatedReplicaSet, seenOrphan bool) bool {
	return seenOrphan ||
		controllerutil.ContainsFinalizer(frs, metav1.FinalizerOrphanDependents) ||
		frs.Annotations[AnnotationPropagation] == string(metav1.DeletePropagationOrphan) ||
		frs.Spec.DeletionPolicy == v1alpha1.DeletionPolicyOrphan
}

// deleteLeftoverPods finds, with a quorum list, the pods in the member that
// belong to frs's MemberReplicaSet although it is gone, deletes them (UID
// precondition) and returns how many still exist, terminating ones included.
//
// A pod belongs to it when it matches frs's selector and its controller
// reference carries owner, the UID of the MemberReplicaSet replicafed
// deleted there (AnnotationMemberOwners): a name can be forged by whoever
// may create pods in the member, the UID of an object that no longer exists
// cannot be taken by a new one. Every such reference dangles, so the
// member's own garbage collector would delete the pod too, just later.
func (r *Reconciler) deleteLeftoverPods(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, owner types.UID, w client.Writer, rd client.Reader) (int, error) {
	sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector)
	if err != nil || sel.Empty() {
		return 0, nil //nolint:nilerr // an invalid selector never created pods
	}
	pods := &corev1.PodList{}
	if err := rd.List(ctx, pods, client.InNamespace(frs.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return 0, fmt.Errorf("listing pods of %s: %w", klog.KObj(frs), err)
	}
	left := 0
	for i := range pods.Items {
		p := &pods.Items[i]
		ref := metav1.GetControllerOf(p)
		if ref == nil || ref.UID != owner || ref.Kind != "MemberReplicaSet" ||
			!strings.HasPrefix(ref.APIVersion, v1alpha1.GroupVersion.Group+"/") {
			continue
		}
		left++
		if p.DeletionTimestamp != nil {
			continue
		}
		if err := w.Delete(ctx, p, client.Preconditions{UID: &p.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return left, fmt.Errorf("deleting pod %s: %w", klog.KObj(p), err)
		}
	}
	return left, nil
}
