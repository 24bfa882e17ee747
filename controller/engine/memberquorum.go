package engine

import (
	"context"
	"fmt"
	"sync"

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
}

// resourceVersion returns the quorum resource version read in f, reading
// it with list when none was read in f yet. Concurrent callers in f wait
// for one read.
func (q *memberQuorum) resourceVersion(ctx context.Context, f freshness, list func(context.Context) (string, error)) (string, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.rv != "" && q.fresh == f {
		return q.rv, nil
	}
	rv, err := list(ctx)
	if err != nil {
		return "", err
	}
	q.fresh, q.rv = f, rv
	return rv, nil
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
