package engine

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// memberQuorum is the resource version of one quorum read of the member's
// pods, made in a freshness (term or ownership epoch, store epoch): a pod
// cache at or past it holds every pod an earlier term or owner wrote. One
// read per freshness replaces a list per key for the keys the store holds
// nothing for; under a member's rate limit, a burst of 1,000 new small
// workloads spent 1,000 of its tokens on those lists.
type memberQuorum struct {
	mu    sync.Mutex
	fresh freshness
	rv    string
	// reads shares one read among the syncs that need it at once; each
	// waits only as long as its own context allows (a member that does
	// not answer must not queue every sync behind one read's timeout).
	reads singleflight.Group
}

// resourceVersion returns the quorum resource version read in f, reading
// it with list when none was read in f yet. A failed read is not kept:
// the next caller reads again.
func (q *memberQuorum) resourceVersion(ctx context.Context, f freshness, list func(context.Context) (string, error)) (string, error) {
	q.mu.Lock()
	if q.rv != "" && q.fresh == f {
		rv := q.rv
		q.mu.Unlock()
		return rv, nil
	}
	q.mu.Unlock()
	ch := q.reads.DoChan(fmt.Sprintf("%d/%d/%d", f.term, f.epoch, f.owner), func() (any, error) {
		rv, err := list(ctx)
		if err != nil {
			return "", err
		}
		q.mu.Lock()
		q.fresh, q.rv = f, rv
		q.mu.Unlock()
		return rv, nil
	})
	select {
	case r := <-ch:
		rv, _ := r.Val.(string)
		return rv, r.Err
	case <-ctx.Done():
		return "", fmt.Errorf("waiting for the member's quorum read: %w", ctx.Err())
	}
}

// listMemberRV reads the member's current resource version with a quorum
// list of one pod's metadata.
func (e *Engine) listMemberRV(ctx context.Context) (string, error) {
	lctx, cancel := context.WithTimeout(ctx, quorumListTimeout)
	defer cancel()
	var l metav1.PartialObjectMetadataList
	l.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
	if err := e.o.APIReader.List(lctx, &l, client.Limit(1)); err != nil {
		return "", fmt.Errorf("reading the member's resource version with a quorum list: %w", err)
	}
	if l.ResourceVersion == "" {
		return "", fmt.Errorf("reading the member's resource version with a quorum list: the list has none")
	}
	return l.ResourceVersion, nil
}

// coveredByMember reports whether key may skip its own quorum list in f:
// the store would settle nothing for it (expectations.QuietReconciler),
// so no earlier term's or owner's write for it can still land, and the
// pod cache has caught up with the member's quorum read of f, so it holds
// every pod written for key before. false means "list the key's pods", not
// that the cache lags.
func (e *Engine) coveredByMember(ctx context.Context, key fedref.MemberObject, f freshness) (bool, error) {
	q, ok := e.o.Store.(expectations.QuietReconciler)
	if !ok || e.o.PodStoreRV == nil || !q.Quiet(ctx, key) {
		return false, nil
	}
	cached := e.o.PodStoreRV()
	if cached == "" {
		return false, nil
	}
	rv, err := e.quorum.resourceVersion(ctx, f, e.listMemberRV)
	if err != nil {
		return false, err
	}
	cmp, err := resourceversion.CompareResourceVersion(cached, rv)
	if err != nil || cmp < 0 {
		ctrl.LoggerFrom(ctx).V(4).Info("Pod cache behind the member's quorum read, listing the key's pods", "cached", cached, "quorum", rv)
		return false, nil
	}
	return true, nil
}
