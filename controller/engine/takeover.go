package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// quorumListTimeout bounds verify's quorum list of a member's pods.
const quorumListTimeout = 30 * time.Second

// freshness is the (term or ownership epoch, store epoch) a key was last
// verified in.
type freshness struct {
	term, epoch uint64
	// owner is the member ownership epoch behind a FencedGate (term is
	// then 0): the takeover check runs again at each new epoch.
	owner uint64
}

// verified remembers, per key, the term and store epoch in which the key's
// pod cache was last shown to have caught up with a quorum list, and since
// when its expectations have been unsatisfied.
type verified struct {
	mu    sync.Mutex
	m     map[fedref.MemberObject]freshness
	since map[fedref.MemberObject]time.Time
}

// unsatisfiedFor records that key's expectations are unsatisfied at now and
// returns for how long they have been.
func (v *verified) unsatisfiedFor(k fedref.MemberObject, now time.Time) time.Duration {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.since == nil {
		v.since = map[fedref.MemberObject]time.Time{}
	}
	t, ok := v.since[k]
	if !ok {
		v.since[k] = now
		return 0
	}
	return now.Sub(t)
}

// uncertain marks key's expectations as due for a quorum list at its next
// sync, as if they had been unsatisfied for longer than any requeue: a
// write of it ended without an answer (a delete that timed out or was
// cancelled may still land), so no informer event may ever settle it, and
// waiting for the unsatisfied requeue only delays the next pass.
func (v *verified) uncertain(k fedref.MemberObject) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.since == nil {
		v.since = map[fedref.MemberObject]time.Time{}
	}
	v.since[k] = time.Time{} // the zero time: unsatisfied "forever"
}

// satisfied ends the unsatisfied period of key.
func (v *verified) satisfied(k fedref.MemberObject) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.since, k)
}

func (v *verified) is(k fedref.MemberObject, f freshness) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	got, ok := v.m[k]
	return ok && got == f
}

func (v *verified) set(k fedref.MemberObject, f freshness) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.m == nil {
		v.m = map[fedref.MemberObject]freshness{}
	}
	v.m[k] = f
}

func (v *verified) forget(k fedref.MemberObject) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.m, k)
	delete(v.since, k)
}

func (e *Engine) freshness(p permit) freshness {
	f := freshness{term: p.term}
	if p.fenced {
		f.owner = p.fence.Epoch
	}
	if r, ok := e.o.Store.(expectations.Relister); ok {
		f.epoch = r.Epoch()
	}
	return f
}

// verify runs before the first write for key in a leader term or an
// ownership epoch (and again when the store dropped observations). It lists the member's pods with a
// quorum read, lets a term-aware store settle earlier terms' reservations
// from that list (keeping unfulfilled names for this term), and checks that
// the informer cache has caught up with the list. ok is false while the
// cache lags; the caller then writes nothing and retries shortly.
func (e *Engine) verify(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector) (ok bool, err error) {
	log := ctrl.LoggerFrom(ctx)
	// Pods that take part in the sync match the selector (a pod created
	// from the template always does), so the list is narrowed to those.
	var quorum corev1.PodList
	// Bounded: the sync holds a write permit, and a read stuck on a broken
	// connection would hold the key (and a handover draining permits).
	lctx, cancel := context.WithTimeout(ctx, quorumListTimeout)
	defer cancel()
	if err := e.o.APIReader.List(lctx, &quorum, client.InNamespace(mrs.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return false, fmt.Errorf("listing pods with a quorum read: %w", err)
	}
	if r, isTerm := e.o.Store.(expectations.TermReconciler); isTerm {
		listed := make(map[string]expectations.ListedPod, len(quorum.Items))
		for i := range quorum.Items {
			q := &quorum.Items[i]
			listed[q.Name] = expectations.ListedPod{UID: q.UID, Deleting: q.DeletionTimestamp != nil}
		}
		st, err := r.ReconcileReservations(ctx, key, listed)
		if err != nil {
			return false, fmt.Errorf("settling earlier terms' reservations: %w", err)
		}
		if len(st.Completed)+len(st.Held)+len(st.HeldDeletes) > 0 {
			log.V(1).Info("Settled expectations from a quorum list", "completed", len(st.Completed),
				"heldForThisTerm", len(st.Held), "deletesTakenOver", len(st.HeldDeletes))
		}
		if len(st.HeldDeletes) > 0 {
			// A deposed leader chose these pods; its calls may still land.
			// Deleting the same pods (by UID) makes both leaders' deletes
			// one, where choosing other victims would remove both sets.
			if _, err := e.deleteExact(ctx, key, mrs, st.HeldDeletes); err != nil {
				return false, err
			}
		}
	}
	if rv := e.o.PodStoreRV; rv != nil {
		if cmp, err := resourceversion.CompareResourceVersion(rv(), quorum.ResourceVersion); err == nil && cmp >= 0 {
			return true, nil
		}
	}
	// The store's resource version moves only with pod events and
	// bookmarks; when it is behind, compare the pods themselves.
	if why := e.cacheLags(ctx, mrs, selector, &quorum); why != "" {
		log.V(1).Info("Pod cache behind a quorum list, not writing yet", "reason", why)
		return false, nil
	}
	return true, nil
}

// counts reports whether p can count toward mrs's replicas: its selector
// matches p, and p is controlled by mrs or an orphan (a candidate for
// adoption). A controlled pod that no longer matches is released, not
// counted.
func counts(p *corev1.Pod, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector) bool {
	if !selector.Matches(labels.Set(p.Labels)) {
		return false
	}
	ref := metav1.GetControllerOfNoCopy(p)
	return ref == nil || ref.UID == mrs.UID
}

// cacheLags compares the cached pods that take part in mrs's sync with a
// quorum list: every such listed pod must be cached with its UID (and its
// deletion, if any); every such cached pod must be listed, unless the cache
// holds a version newer than the list. It returns why the cache lags, or "".
func (e *Engine) cacheLags(ctx context.Context, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector, quorum *corev1.PodList) string {
	cached, err := e.listPods(ctx, mrs)
	if err != nil {
		return err.Error()
	}
	byName := make(map[string]*corev1.Pod, len(cached))
	for _, p := range cached {
		byName[p.Name] = p
	}
	listed := make(map[string]bool, len(quorum.Items))
	for i := range quorum.Items {
		q := &quorum.Items[i]
		listed[q.Name] = true
		if !counts(q, mrs, selector) {
			continue
		}
		c := byName[q.Name]
		switch {
		case c == nil || c.UID != q.UID:
			return "pod " + q.Name + " not cached"
		case q.DeletionTimestamp != nil && c.DeletionTimestamp == nil:
			return "deletion of pod " + q.Name + " not cached"
		}
	}
	for _, c := range cached {
		if listed[c.Name] || !counts(c, mrs, selector) {
			continue
		}
		if cmp, err := resourceversion.CompareResourceVersion(c.ResourceVersion, quorum.ResourceVersion); err != nil || cmp <= 0 {
			return "pod " + c.Name + " gone but still cached"
		}
	}
	return ""
}
