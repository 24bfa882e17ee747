package worker

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

// observe runs, until ctx ends, for a member this replica does not own
// (sharding): no engine, no pod informer, only the MemberReplicaSet
// informer, whose status changes reach Options.MemberStatusChanged (the
// leader's hub reads such a member from those statuses). It returns when
// ctx ends; a failure to watch is logged and ends it early, since the hub
// still reads the statuses at its resyncs.
func (m *Manager) observe(ctx context.Context, name string, cl cluster.Cluster) {
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", name)
	if err := m.watchStatuses(ctx, name, cl); err != nil && ctx.Err() == nil {
		log.Error(err, "Observing the MemberReplicaSets of a member not owned here")
		return
	}
	log.V(2).Info("Member observed, not owned here")
	<-ctx.Done()
}

// watchStatuses adds the MemberReplicaSet status handler and removes it
// when ctx ends.
func (m *Manager) watchStatuses(ctx context.Context, name string, cl cluster.Cluster) error {
	changed := m.o.MemberStatusChanged
	if changed == nil {
		return nil
	}
	inf, err := cl.GetCache().GetInformer(ctx, &v1alpha1.MemberReplicaSet{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("getting MemberReplicaSet informer of %s: %w", name, err)
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
		old, ok1 := oldObj.(*v1alpha1.MemberReplicaSet)
		cur, ok2 := newObj.(*v1alpha1.MemberReplicaSet)
		if ok1 && ok2 && statusChanged(old, cur) {
			changed(fedref.MemberObject{Cluster: name, Namespace: cur.Namespace, Name: cur.Name}, cur.Spec.Hub)
		}
	}})
	if err != nil {
		return fmt.Errorf("watching MemberReplicaSet statuses of %s: %w", name, err)
	}
	go func() {
		<-ctx.Done()
		_ = inf.RemoveEventHandler(reg)
	}()
	return nil
}

// statusChanged reports whether an update changed a MemberReplicaSet's
// status (not a periodic resync, not a spec or metadata change alone).
func statusChanged(old, cur *v1alpha1.MemberReplicaSet) bool {
	return cur.ResourceVersion != old.ResourceVersion && !apiequality.Semantic.DeepEqual(cur.Status, old.Status)
}
