package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// termGate is an open gate whose term the test moves.
type termGate struct {
	mu   sync.Mutex
	term uint64
}

func (g *termGate) Enter() (context.Context, uint64, func(), bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return context.Background(), g.term, func() {}, true
}

// termStore names creations, records how each one was settled and every
// reconcile it was asked for.
type termStore struct {
	*expectations.Memory
	mu         sync.Mutex
	failed     []string
	unknown    []string
	reconciled []map[string]expectations.ListedPod
	terms      []uint64
	// heldDeletes is returned (and expected) by the next reconcile.
	heldDeletes []expectations.PodRef
}

func (s *termStore) ExpectCreations(ctx context.Context, k fedref.MemberObject, in expectations.CreateIntent) ([]string, error) {
	names, err := s.Memory.ExpectCreations(ctx, k, in)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", in.Prefix, i)
	}
	return names, err
}

func (s *termStore) CreationFailed(k fedref.MemberObject, name string) {
	s.mu.Lock()
	s.failed = append(s.failed, name)
	s.mu.Unlock()
	s.Memory.CreationFailed(k, name)
}

func (s *termStore) CreationUnknown(k fedref.MemberObject, name string) {
	s.mu.Lock()
	s.unknown = append(s.unknown, name)
	s.mu.Unlock()
	s.Memory.CreationUnknown(k, name)
}

func (s *termStore) ReconcileReservations(ctx context.Context, k fedref.MemberObject, listed map[string]expectations.ListedPod) (expectations.Settlement, error) {
	term, _ := expectations.TermFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reconciled = append(s.reconciled, listed)
	s.terms = append(s.terms, term)
	held := s.heldDeletes
	s.heldDeletes = nil
	if len(held) > 0 {
		if err := s.Memory.ExpectDeletions(ctx, k, held); err != nil {
			return expectations.Settlement{}, err
		}
	}
	return expectations.Settlement{HeldDeletes: held}, nil
}

// TestTakeoverDeletesTheDeposedLeadersVictims: a scale-down 3 -> 2 was
// interrupted; the deposed leader had chosen the ready pod b. The new
// leader deletes exactly b, not the pod its own ranking prefers (a or c,
// not ready), so a late delete of b from the deposed leader removes nothing
// more.
func TestTakeoverDeletesTheDeposedLeadersVictims(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	a, b, c := ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")
	b.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	st := &termStore{Memory: expectations.NewMemory(0, nil), heldDeletes: []expectations.PodRef{{Name: "b", UID: b.UID}}}
	h := newHarness(t, w, hopts{objs: []client.Object{a, b, c}, store: st, gate: &termGate{term: 3}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, p := range h.pods() {
		left = append(left, p.Name)
	}
	if h.n.deletes.Load() != 1 || !slices.Equal(left, []string{"a", "c"}) {
		t.Fatalf("%d deletes, pods left %v; want exactly b deleted", h.n.deletes.Load(), left)
	}
	if st.reconciled[0]["b"].UID != b.UID {
		t.Fatalf("quorum list passed to the store: %+v", st.reconciled[0])
	}
	// The delete is observed: nothing more to do at 2 pods.
	h.observeAll()
	st.DeletionObserved(h.key(), "b")
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.deletes.Load() != 1 || h.n.creates.Load() != 0 {
		t.Fatalf("after the observed delete: %d deletes, %d creates", h.n.deletes.Load(), h.n.creates.Load())
	}
}

// TestCreateOutcomes: only a create the API server refused releases its
// name; a create whose outcome is unknown keeps it, and a create never sent
// (slow start stopped first) releases it.
func TestCreateOutcomes(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantFailed  int
		wantUnknown int
	}{
		{name: "forbidden", err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "x", errors.New("quota")), wantFailed: 1},
		{name: "invalid", err: apierrors.NewBadRequest("bad"), wantFailed: 1},
		{name: "too many requests", err: apierrors.NewTooManyRequests("slow down", 1), wantFailed: 1},
		{name: "server timeout", err: apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "create", 1), wantUnknown: 1},
		{name: "timeout", err: apierrors.NewTimeoutError("slow", 1), wantUnknown: 1},
		{name: "internal error", err: apierrors.NewInternalError(errors.New("etcd")), wantUnknown: 1},
		{name: "deadline", err: context.DeadlineExceeded, wantUnknown: 1},
		{name: "transport", err: io.ErrUnexpectedEOF, wantUnknown: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &termStore{Memory: expectations.NewMemory(0, nil)}
			// Target 3: slow start sends one create; it fails, the other two are never sent.
			h := newHarness(t, workload(3), hopts{store: st, funcs: interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
				return tc.err
			}}})
			if _, err := h.sync(); err == nil {
				t.Fatal("want the create error")
			}
			if len(st.unknown) != tc.wantUnknown || len(st.failed) != tc.wantFailed+2 {
				t.Fatalf("unknown %v failed %v; want %d unknown and %d failed (2 never sent)", st.unknown, st.failed, tc.wantUnknown, tc.wantFailed+2)
			}
		})
	}
}

// TestFirstWriteOfATermWaitsForTheCache: before its first write for a key
// in a term, the engine settles the store from a quorum list and writes
// nothing while the cache lacks a pod that list has.
func TestFirstWriteOfATermWaitsForTheCache(t *testing.T) {
	w := workload(3)
	m := mrsFor(w)
	a, b := ownedPod(m, "a"), ownedPod(m, "b")
	// The member has a and b; the cache has only a.
	live := fake.NewClientBuilder().WithScheme(h0Scheme()).WithObjects(m.DeepCopy(), a.DeepCopy(), b.DeepCopy()).Build()
	st := &termStore{Memory: expectations.NewMemory(0, nil)}
	gate := &termGate{term: 7}
	h := newHarness(t, w, hopts{objs: []client.Object{a.DeepCopy()}, store: st, gate: gate, live: live})
	res, err := h.sync()
	if err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 0 || res.RequeueAfter != cacheLagRequeue {
		t.Fatalf("lagging cache: %d creates, requeue %v", h.n.creates.Load(), res.RequeueAfter)
	}
	if len(st.reconciled) != 1 || len(st.reconciled[0]) != 2 || st.terms[0] != 7 {
		t.Fatalf("reconciled %v in terms %v, want one quorum list of 2 pods in term 7", st.reconciled, st.terms)
	}
	// The cache catches up: one create, to 3.
	if err := h.cl.Create(context.Background(), b.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	h.n.creates.Store(0)
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 1 {
		t.Fatalf("%d creates after the cache caught up, want 1", h.n.creates.Load())
	}
	// Same term: no new quorum list. A new term: one more.
	h.observeAll()
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	gate.mu.Lock()
	gate.term = 8
	gate.mu.Unlock()
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if len(st.reconciled) != 3 || st.terms[2] != 8 {
		t.Fatalf("reconciles in terms %v, want [7 7 8]", st.terms)
	}
}

// TestCacheLags covers both directions of the pod comparison.
func TestCacheLags(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	sel := mustSelector(t, w)
	mk := func(name, rv string) *corev1.Pod {
		p := ownedPod(m, name)
		p.ResourceVersion = rv
		return p
	}
	tests := []struct {
		name   string
		cached []client.Object
		listed []corev1.Pod
		listRV string
		lags   bool
	}{
		{name: "same pods", cached: []client.Object{mk("a", "5")}, listed: []corev1.Pod{*mk("a", "5")}, listRV: "10"},
		{name: "listed pod not cached", listed: []corev1.Pod{*mk("a", "5")}, listRV: "10", lags: true},
		{name: "deleted pod still cached", cached: []client.Object{mk("a", "5")}, listRV: "10", lags: true},
		{name: "cached pod newer than the list", cached: []client.Object{mk("a", "11")}, listRV: "10"},
		{name: "foreign pod ignored", listed: []corev1.Pod{func() corev1.Pod { p := mk("x", "5"); p.OwnerReferences[0].UID = "other"; return *p }()}, listRV: "10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, w, hopts{objs: tc.cached})
			q := &corev1.PodList{Items: tc.listed}
			q.ResourceVersion = tc.listRV
			if got := h.eng.cacheLags(context.Background(), m, sel, q) != ""; got != tc.lags {
				t.Fatalf("lags = %v, want %v", got, tc.lags)
			}
		})
	}
}

// TestUnsatisfiedKeyRequeues: a key waiting for observations is synced
// again within UnsatisfiedRequeue, not only on the next event.
func TestUnsatisfiedKeyRequeues(t *testing.T) {
	h := newHarness(t, workload(2), hopts{})
	if _, err := h.store.ExpectCreations(context.Background(), h.key(), expectations.CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := h.sync()
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > DefaultUnsatisfiedRequeue {
		t.Fatalf("requeue %v, want (0, %v]", res.RequeueAfter, DefaultUnsatisfiedRequeue)
	}
}

func mustSelector(t *testing.T, w *Workload) labels.Selector {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(w.Selector)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestUncertainDeleteSettlesAtNextSync: a delete that ended without an
// answer (a timeout) may still land, so its expectation stays; the next
// sync settles the key from a quorum list at once instead of waiting for
// the unsatisfied requeue (a member owner whose lease lapsed mid-delete
// otherwise waited that long after it could write again). A sync after a
// delete that failed for sure lists nothing.
func TestUncertainDeleteSettlesAtNextSync(t *testing.T) {
	for _, tc := range []struct {
		name      string
		deleteErr error
		wantList  bool
	}{
		{"timed out", fmt.Errorf("deleting: %w", context.DeadlineExceeded), true},
		{"refused", apierrors.NewForbidden(corev1.Resource("pods"), "p", errors.New("no")), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(1)
			m := mrsFor(w)
			fail := true
			h := newHarness(t, w, hopts{
				objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")},
				funcs: interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
					if fail {
						return tc.deleteErr
					}
					return c.Delete(ctx, obj, opts...)
				}},
			})
			h.observeAll()
			if _, err := h.sync(); err == nil {
				t.Fatal("the first sync's deletes failed, want its error")
			}
			if h.n.deletes.Load() != 2 {
				t.Fatalf("%d deletes, want 2", h.n.deletes.Load())
			}
			fail = false
			before := h.n.liveLists.Load()
			_, _ = h.sync()
			if listed := h.n.liveLists.Load() > before; listed != tc.wantList {
				t.Fatalf("quorum list at the next sync: %v, want %v", listed, tc.wantList)
			}
		})
	}
}
