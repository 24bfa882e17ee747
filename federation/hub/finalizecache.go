package hub

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/registry"
)

// A deletion waits on each member's garbage collector for as long as the
// member's pods take to go (a grace period each, in a real cluster), and
// every report of a pod gone triggers another pass besides the periodic
// one. Each pass read every member's MemberReplicaSet from its API server,
// and once it was gone listed the namespace's pods there, mostly to learn
// that nothing had changed. A pass now asks the member's cache first: while
// it shows the deletion under way there (the MemberReplicaSet whose UID was
// recorded still terminating, or, once it is gone, only terminating pods of
// it left), the member is waited for without a call. Anything else (nothing
// left in the cache, something not yet being deleted, a cache that cannot
// answer) goes to the member's API server, which alone decides that nothing
// is left; and at least every deletionRecheck a pass calls every member,
// so a cache that stopped following its member cannot hold a deletion.

// deletionRecheck is the longest a deletion waits on members' caches alone.
const deletionRecheck = 30 * time.Second

// liveCheck is when a deletion's last pass called every member.
type liveCheck struct {
	uid types.UID
	at  time.Time
}

// waitOnCaches moves the members of d.members whose cache shows the
// deletion still under way to d.waiting, unless the pass is due to call
// every member (the first pass of a deletion, then every deletionRecheck).
// A rolling object's revisions are not looked for in the cache: its passes
// always call.
func (r *Reconciler) waitOnCaches(ctx context.Context, d *deletion) {
	key := d.frs.Namespace + "/" + d.frs.Name
	last, ok := r.liveChecks.Load(key)
	if !ok || last.uid != d.frs.UID || d.now.Sub(last.at) >= deletionRecheck || isRolling(d.frs, r.loadRollout(d.frs)) {
		r.liveChecks.Store(key, liveCheck{uid: d.frs.UID, at: d.now})
		return
	}
	owners := recordedOwners(d.frs)
	call := make([]*registry.Member, 0, len(d.members))
	for _, m := range d.members {
		if r.cacheShowsDeleting(ctx, d, m, owners[m.Name]) {
			d.waiting = append(d.waiting, m.Name)
		} else {
			call = append(call, m)
		}
	}
	d.members = call
}

// cacheShowsDeleting reports whether m's cache shows d's deletion under way
// there: the MemberReplicaSet replicafed deleted (owner, its recorded UID)
// still terminating, or, once it is gone, pods it controlled left, every
// one of them terminating. False whenever a call could change something or
// find the deletion done.
func (r *Reconciler) cacheShowsDeleting(ctx context.Context, d *deletion, m *registry.Member, owner types.UID) bool {
	if owner == "" {
		return false
	}
	c := m.Cluster.GetCache()
	mrs := &v1alpha1.MemberReplicaSet{}
	switch err := c.Get(ctx, client.ObjectKeyFromObject(d.frs), mrs); {
	case err == nil:
		return mrs.UID == owner && mrs.DeletionTimestamp != nil
	case !apierrors.IsNotFound(err):
		return false
	}
	if d.orphan || !r.podsCached(m.Name) {
		return false
	}
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(d.frs.Namespace),
		client.MatchingFields{engine.PodControllerIndex: string(owner)}, client.UnsafeDisableDeepCopy); err != nil {
		return false
	}
	for i := range pods.Items {
		if pods.Items[i].DeletionTimestamp == nil {
			return false
		}
	}
	return len(pods.Items) > 0
}
