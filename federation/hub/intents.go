package hub

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// AnnotationPropagation records, on a FederatedReplicaSet being deleted, the
// propagation its deletion asked for, so every replica (and a later leader)
// knows it after the hub's garbage collector has removed the "orphan"
// finalizer that was its only trace.
const AnnotationPropagation = "replicafed.io/deletion-propagation"

// DeletionIntents remembers which FederatedReplicaSets were deleted with
// orphan propagation. The API server marks such a deletion only with the
// "orphan" finalizer, and the hub's garbage collector removes that finalizer
// almost at once (a FederatedReplicaSet has no dependents in the hub), often
// before a reconcile reads the object. The informer still delivers the update
// that carried it, so Observe, called from the event path, catches it.
type DeletionIntents struct {
	orphan sync.Map // types.UID -> types.NamespacedName
}

// Observe records an orphan deletion seen on obj.
func (d *DeletionIntents) Observe(obj client.Object) {
	if obj == nil || obj.GetDeletionTimestamp() == nil {
		return
	}
	if controllerutil.ContainsFinalizer(obj, metav1.FinalizerOrphanDependents) ||
		obj.GetAnnotations()[AnnotationPropagation] == string(metav1.DeletePropagationOrphan) {
		d.orphan.Store(obj.GetUID(), types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetName()})
	}
}

// Orphan reports whether the object with uid was deleted with orphan propagation.
func (d *DeletionIntents) Orphan(uid types.UID) bool {
	_, ok := d.orphan.Load(uid)
	return ok
}

// Forget drops what is known about uid.
func (d *DeletionIntents) Forget(uid types.UID) { d.orphan.Delete(uid) }

// ForgetObject drops what is known about every object called
// namespace/name, once it is gone (its finalizer may never have run: an
// object deleted before the hub added it).
func (d *DeletionIntents) ForgetObject(namespace, name string) {
	want := types.NamespacedName{Namespace: namespace, Name: name}
	d.orphan.Range(func(k, v any) bool {
		if v == want {
			d.orphan.Delete(k)
		}
		return true
	})
}

// len is how many intents are kept (tests).
func (d *DeletionIntents) len() int {
	n := 0
	d.orphan.Range(func(any, any) bool { n++; return true })
	return n
}

// Orphans reports whether deleting frs leaves its pods running, decided as
// the deletion protocol decides it (an orphan delete seen here, the
// recorded annotation or finalizer, else spec.deletionPolicy).
func (d *DeletionIntents) Orphans(frs *v1alpha1.FederatedReplicaSet) bool {
	return deletionOrphans(frs, d.Orphan(frs.UID))
}
