package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/metrics"
)

var (
	now    = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	nn     = types.NamespacedName{Namespace: "ns", Name: "web"}
	lbls   = map[string]string{"app": "web"}
	hubRef = v1alpha1.HubReference{Namespace: "hub-ns", Name: "web", UID: "hub-uid", Generation: 1}
)

type staticSource map[fedref.MemberObject]*Workload

func (s staticSource) Workload(k fedref.MemberObject) (*Workload, bool) { w, ok := s[k]; return w, ok }

func workload(target int32) *Workload {
	return &Workload{
		Key: fedref.MemberObject{Cluster: "m1", Namespace: nn.Namespace, Name: nn.Name}, Target: target,
		Selector: &metav1.LabelSelector{MatchLabels: lbls},
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: lbls, Annotations: map[string]string{"a": "b"}, Finalizers: []string{"f/x"}},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		},
		Hub: hubRef,
	}
}

func mrsFor(w *Workload) *v1alpha1.MemberReplicaSet {
	return &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: nn.Name, UID: "mrs-uid", Generation: 1},
		Spec:       ownerSpec(w),
	}
}

func ownedPod(mrs *v1alpha1.MemberReplicaSet, name string) *corev1.Pod {
	p := NewPod(mrs, &workload(0).Template, name)
	p.Finalizers = nil
	p.UID = types.UID(name + "-uid")
	p.Spec.NodeName = "n1"
	p.Status.Phase = corev1.PodRunning
	return p
}

// counters records API calls the engine makes.
type counters struct {
	creates, deletes, patches, statusUpdates, liveGets atomic.Int32
	// liveLists counts the quorum lists (the live reader's List).
	liveLists atomic.Int32
}

type harness struct {
	t      *testing.T
	cl     client.WithWatch
	store  *expectations.Memory
	src    staticSource
	rec    *events.FakeRecorder
	n      *counters
	eng    *Engine
	mrs    *v1alpha1.MemberReplicaSet
	report []MemberStatus
	mu     sync.Mutex
	clock  *clocktesting.FakePassiveClock
}

type hopts struct {
	objs    []client.Object
	funcs   interceptor.Funcs
	live    client.Reader
	burst   int
	gate    Gate
	store   expectations.Store
	noOwner bool
	deps    DependencyChecker
	// incomplete is Options.ViewIncomplete.
	incomplete func() error
	// podsByController is Options.PodsByController.
	podsByController func(namespace, controller string) ([]*corev1.Pod, bool)
	// busy is Options.Busy.
	busy func() bool
	// podStoreRV is Options.PodStoreRV.
	podStoreRV func() string
}

func newHarness(t *testing.T, w *Workload, o hopts) *harness {
	t.Helper()
	s := kubescheme.Must()
	h := &harness{t: t, n: &counters{}, src: staticSource{}, rec: events.NewFakeRecorder(1000), clock: clocktesting.NewFakePassiveClock(now)}
	objs := o.objs
	if w != nil {
		h.src[w.Key] = w
		if !o.noOwner {
			h.mrs = mrsFor(w)
			objs = append([]client.Object{h.mrs.DeepCopy()}, objs...)
		}
	}
	f := o.funcs
	inner := f
	f.Create = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		// The fake ignores contexts; a real client fails on a cancelled one.
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, ok := obj.(*corev1.Pod); ok {
			h.n.creates.Add(1)
		}
		if inner.Create != nil {
			return inner.Create(ctx, c, obj, opts...)
		}
		return c.Create(ctx, obj, opts...)
	}
	f.Delete = func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		h.n.deletes.Add(1)
		if inner.Delete != nil {
			return inner.Delete(ctx, c, obj, opts...)
		}
		return c.Delete(ctx, obj, opts...)
	}
	f.Patch = func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
		h.n.patches.Add(1)
		if inner.Patch != nil {
			return inner.Patch(ctx, c, obj, p, opts...)
		}
		return c.Patch(ctx, obj, p, opts...)
	}
	f.SubResourceUpdate = func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
		h.n.statusUpdates.Add(1)
		if inner.SubResourceUpdate != nil {
			return inner.SubResourceUpdate(ctx, c, sub, obj, opts...)
		}
		return c.SubResource(sub).Update(ctx, obj, opts...)
	}
	h.cl = fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&corev1.Pod{}, PodControllerIndex, PodControllerIndexFunc).
		WithStatusSubresource(&v1alpha1.MemberReplicaSet{}).WithInterceptorFuncs(f).Build()
	live := o.live
	if live == nil {
		live = countingReader{h.cl, &h.n.liveGets, &h.n.liveLists}
	}
	h.store = expectations.NewMemory(0, clocktesting.NewFakeClock(now))
	var st expectations.Store = h.store
	if o.store != nil {
		st = o.store
	}
	h.eng = New(Options{
		Cluster: "m1", Client: h.cl, APIReader: live, Store: st, Source: h.src,
		Sink: StatusSinkFunc(func(_ context.Context, _ fedref.MemberObject, ms MemberStatus) {
			h.mu.Lock()
			h.report = append(h.report, ms)
			h.mu.Unlock()
		}),
		Gate: o.gate, Recorder: h.rec, BurstReplicas: o.burst, Clock: h.clock,
		Dependencies: o.deps, ViewIncomplete: o.incomplete, PodsByController: o.podsByController,
		Busy: o.busy, PodStoreRV: o.podStoreRV,
	})
	return h
}

type countingReader struct {
	client.Reader
	n, lists *atomic.Int32
}

func (r countingReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	if r.lists != nil {
		r.lists.Add(1)
	}
	return r.Reader.List(ctx, l, opts...)
}

func (r countingReader) Get(ctx context.Context, k client.ObjectKey, o client.Object, opts ...client.GetOption) error {
	r.n.Add(1)
	return r.Reader.Get(ctx, k, o, opts...)
}

func (h *harness) sync() (Result, error) {
	h.t.Helper()
	return h.eng.Sync(context.Background(), nn)
}

func (h *harness) pods() []corev1.Pod {
	var l corev1.PodList
	if err := h.cl.List(context.Background(), &l, client.InNamespace("ns")); err != nil {
		h.t.Fatal(err)
	}
	return l.Items
}

func (h *harness) owner() *v1alpha1.MemberReplicaSet {
	m := &v1alpha1.MemberReplicaSet{}
	if err := h.cl.Get(context.Background(), nn, m); err != nil {
		h.t.Fatal(err)
	}
	return m
}

func (h *harness) events() []string {
	var out []string
	for {
		select {
		case e := <-h.rec.Events:
			out = append(out, e)
		default:
			return out
		}
	}
}

func (h *harness) key() fedref.MemberObject { return h.eng.Key(nn) }

// observeCreations plays the informer: settle one creation per live pod.
func (h *harness) observeAll() {
	for _, p := range h.pods() {
		h.store.CreationObserved(h.key(), p.Name)
		if p.DeletionTimestamp != nil {
			h.store.DeletionObserved(h.key(), p.Name)
		}
	}
}

func TestSyncDoesNothing(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b")}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load()+h.n.deletes.Load()+h.n.patches.Load() != 0 {
		t.Fatalf("creates=%d deletes=%d patches=%d", h.n.creates.Load(), h.n.deletes.Load(), h.n.patches.Load())
	}
	st := h.owner().Status
	if st.Replicas != 2 || st.ObservedGeneration != 1 {
		t.Fatalf("status = %+v", st)
	}
	// A second sync writes nothing: status unchanged.
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.statusUpdates.Load() != 1 {
		t.Fatalf("status updates = %d, want 1", h.n.statusUpdates.Load())
	}
	if len(h.report) != 2 || h.report[1].Replicas != 2 || h.report[1].Target != 2 || h.report[1].Hub != hubRef {
		t.Fatalf("reports = %+v", h.report)
	}
}

func TestSyncCreatesOwnerThenPods(t *testing.T) {
	w := workload(3)
	h := newHarness(t, w, hopts{noOwner: true})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	m := h.owner()
	if m.Spec.Replicas != 3 || m.Spec.Hub != hubRef || m.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue || m.Annotations[v1alpha1.AnnotationHubUID] != "hub-uid" {
		t.Fatalf("owner = %+v", m)
	}
	if h.n.creates.Load() != 0 {
		t.Fatal("pods must wait for the owner to be in the cache")
	}
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	pods := h.pods()
	if len(pods) != 3 {
		t.Fatalf("pods = %d, want 3", len(pods))
	}
	p := pods[0]
	ref := metav1.GetControllerOf(&p)
	if ref == nil || ref.UID != m.UID || ref.Kind != "MemberReplicaSet" || !*ref.BlockOwnerDeletion ||
		p.Annotations["a"] != "b" || len(p.Finalizers) != 1 || !strings.HasPrefix(p.Name, "web-") || p.Spec.Containers[0].Image != "img" {
		t.Fatalf("pod = %+v", p.ObjectMeta)
	}
	// One event for the sync's three creates, naming them.
	ev := h.events()
	if len(ev) != 1 || !strings.Contains(ev[0], "SuccessfulCreate Created 3 pods: ") {
		t.Fatalf("events = %v", ev)
	}
	for _, p := range pods {
		if !strings.Contains(ev[0], p.Name) {
			t.Fatalf("event %q does not name pod %s", ev[0], p.Name)
		}
	}
	// Target change updates the owner spec and bumps generation.
	w.Target = 1
	h.observeAll()
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	// Status is computed from the pods seen before the deletes, as upstream;
	// the next sync reflects them (a count-only change, so once the status
	// pacing interval has passed).
	h.clock.SetTime(now.Add(StatusInterval))
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	m = h.owner()
	// The template's finalizer keeps deleted pods around as terminating.
	var live, terminating int
	for _, p := range h.pods() {
		if p.DeletionTimestamp == nil {
			live++
		} else {
			terminating++
		}
	}
	if m.Spec.Replicas != 1 || live != 1 || terminating != 2 || m.Status.Replicas != 1 || *m.Status.TerminatingReplicas != 2 {
		t.Fatalf("after scale down: replicas=%d live=%d terminating=%d status=%+v", m.Spec.Replicas, live, terminating, m.Status)
	}
}

// TestSyncCreateFailures mirrors TestSyncReplicaSetCreateFailures and the
// quota example: 100 needed, 10 allowed → 1+2+4+8 = 15 calls, expectations 10.
func TestSyncCreateFailures(t *testing.T) {
	var allowed atomic.Int32
	allowed.Store(10)
	w := workload(100)
	h := newHarness(t, w, hopts{funcs: interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if _, ok := obj.(*corev1.Pod); ok && allowed.Add(-1) < 0 {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("exceeded quota"))
		}
		return c.Create(ctx, obj, opts...)
	}}})
	okBefore := testutil.ToFloat64(metrics.PodOperations.WithLabelValues("m1", "create", "success"))
	failBefore := testutil.ToFloat64(metrics.PodOperations.WithLabelValues("m1", "create", "failure"))
	_, err := h.sync()
	if err == nil {
		t.Fatal("want an error for requeue")
	}
	// The counters follow the calls: 10 created, 5 refused.
	if d := testutil.ToFloat64(metrics.PodOperations.WithLabelValues("m1", "create", "success")) - okBefore; d != 10 {
		t.Fatalf("create success counter grew by %v, want 10", d)
	}
	if d := testutil.ToFloat64(metrics.PodOperations.WithLabelValues("m1", "create", "failure")) - failBefore; d != 5 {
		t.Fatalf("create failure counter grew by %v, want 5", d)
	}
	if h.n.creates.Load() != 15 || len(h.pods()) != 10 {
		t.Fatalf("calls=%d pods=%d, want 15 and 10", h.n.creates.Load(), len(h.pods()))
	}
	if add, _, _ := h.store.Counts(h.key()); add != 10 {
		t.Fatalf("expected creations = %d, want 10", add)
	}
	h.observeAll()
	if !h.store.Satisfied(h.key()) {
		t.Fatal("expectations must settle once the 10 pods are observed")
	}
	c := replicastatus.FindCondition(h.owner().Status.Conditions, replicastatus.ConditionReplicaFailure)
	if c == nil || c.Reason != replicastatus.ReasonFailedCreate || !strings.Contains(c.Message, "exceeded quota") {
		t.Fatalf("condition = %+v", c)
	}
	var failed int
	for _, e := range h.events() {
		if strings.Contains(e, "FailedCreate") {
			failed++
		}
	}
	if failed != 5 {
		t.Fatalf("FailedCreate events = %d, want 5", failed)
	}
}

// TestSyncBurst mirrors TestControllerBurstReplicas: each sync creates or
// deletes at most burst, and sleeps until every expected event arrived.
func TestSyncBurst(t *testing.T) {
	for _, c := range []struct{ burst, from, to int }{{5, 0, 30}, {5, 30, 12}, {3, 0, 2}, {3, 10, 2}} {
		t.Run(fmt.Sprintf("burst%d_%dto%d", c.burst, c.from, c.to), func(t *testing.T) {
			w := workload(int32(c.to))
			m := mrsFor(w)
			var objs []client.Object
			for i := 0; i < c.from; i++ {
				objs = append(objs, ownedPod(m, fmt.Sprintf("p%02d", i)))
			}
			h := newHarness(t, w, hopts{objs: objs, burst: c.burst})
			for syncs := 0; len(h.pods()) != c.to; syncs++ {
				before := len(h.pods())
				var beforeNames []string
				for _, p := range h.pods() {
					beforeNames = append(beforeNames, p.Name)
				}
				if _, err := h.sync(); err != nil {
					t.Fatal(err)
				}
				step := len(h.pods()) - before
				if step > c.burst || -step > c.burst || step == 0 {
					t.Fatalf("sync %d moved %d pods (burst %d)", syncs, step, c.burst)
				}
				// Asleep until all expectations are observed.
				if _, err := h.sync(); err != nil {
					t.Fatal(err)
				}
				if len(h.pods()) != before+step {
					t.Fatal("synced with outstanding expectations")
				}
				// Deletions are counted once even if observed twice.
				h.observeAll()
				now := map[string]bool{}
				for _, p := range h.pods() {
					now[p.Name] = true
				}
				for _, name := range beforeNames {
					if !now[name] {
						h.store.DeletionObserved(h.key(), name)
						h.store.DeletionObserved(h.key(), name)
					}
				}
				if !h.store.Satisfied(h.key()) {
					t.Fatal("expectations did not settle")
				}
			}
		})
	}
}

// TestSyncDormancy mirrors TestSyncReplicaSetDormancy.
func TestSyncDormancy(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	var fail atomic.Bool
	h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a")}, funcs: interceptor.Funcs{Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
		if fail.Load() {
			return errors.New("boom")
		}
		return c.Create(ctx, obj, opts...)
	}}})
	if _, err := h.store.ExpectCreations(context.Background(), h.key(), expectations.CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 0 || h.n.statusUpdates.Load() != 1 {
		t.Fatalf("dormant: creates=%d statusUpdates=%d", h.n.creates.Load(), h.n.statusUpdates.Load())
	}
	h.store.CreationObserved(h.key(), "")
	fail.Store(true)
	if _, err := h.sync(); err == nil {
		t.Fatal("failed create must error")
	}
	if h.n.creates.Load() != 1 || !h.store.Satisfied(h.key()) {
		t.Fatal("failed create must lower expectations so the next sync retries")
	}
	fail.Store(false)
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 2 || len(h.pods()) != 2 || h.n.statusUpdates.Load() != 3 {
		t.Fatalf("creates=%d pods=%d statusUpdates=%d", h.n.creates.Load(), len(h.pods()), h.n.statusUpdates.Load())
	}
}

// TestSyncExpectationsBeforeList mirrors TestRSSyncExpectations: a creation
// observed while pods are listed must not lead to a create in this sync.
func TestSyncExpectationsBeforeList(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	var h *harness
	var armed atomic.Bool
	h = newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a")}, funcs: interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
		if armed.Load() {
			h.store.CreationObserved(h.key(), "")
		}
		return c.List(ctx, l, opts...)
	}}})
	if _, err := h.store.ExpectCreations(context.Background(), h.key(), expectations.CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	// The first sync of the term verifies the cache against a quorum list
	// (and creates nothing: a creation is outstanding).
	if _, err := h.sync(); err != nil || h.n.creates.Load() != 0 {
		t.Fatalf("first sync: %v, %d creates", err, h.n.creates.Load())
	}
	armed.Store(true)
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 0 {
		t.Fatal("expectations must be read before listing")
	}
}

// TestSyncOwnerGone mirrors TestDeleteControllerAndExpectations.
func TestSyncOwnerGone(t *testing.T) {
	h := newHarness(t, nil, hopts{})
	if _, err := h.store.ExpectCreations(context.Background(), h.key(), expectations.CreateIntent{Count: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := h.store.Counts(h.key()); ok {
		t.Fatal("expectations must be dropped when the owner and workload are gone")
	}
	if h.n.creates.Load() != 0 {
		t.Fatal("no workload: no pods")
	}
}

func TestSyncClaimRules(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "other", UID: "o", Labels: lbls,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: "x", Controller: new(bool)}}}}
	*other.OwnerReferences[0].Controller = true
	orphan := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orphan", UID: "orphan", Labels: lbls}}
	boom := errors.New("patch refused")
	deleting := metav1.NewTime(now)

	t.Run("other controller untouched", func(t *testing.T) {
		h := newHarness(t, w, hopts{objs: []client.Object{other.DeepCopy()}})
		if _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
		if h.n.patches.Load() != 0 || h.n.creates.Load() != 2 {
			t.Fatalf("patches=%d creates=%d", h.n.patches.Load(), h.n.creates.Load())
		}
		var p corev1.Pod
		_ = h.cl.Get(context.Background(), client.ObjectKeyFromObject(other), &p)
		if metav1.GetControllerOf(&p).UID != "x" {
			t.Fatal("foreign pod modified")
		}
	})
	t.Run("patch fails", func(t *testing.T) {
		o2 := orphan.DeepCopy()
		o2.Name, o2.UID = "orphan2", "orphan2"
		h := newHarness(t, w, hopts{objs: []client.Object{orphan.DeepCopy(), o2}, funcs: interceptor.Funcs{Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			return boom
		}}})
		if _, err := h.sync(); !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		if h.n.patches.Load() != 2 || h.n.creates.Load() != 0 || h.n.statusUpdates.Load() != 0 {
			t.Fatalf("patches=%d creates=%d status=%d", h.n.patches.Load(), h.n.creates.Load(), h.n.statusUpdates.Load())
		}
	})
	t.Run("hub deleting", func(t *testing.T) {
		wd := workload(2)
		wd.Deleting = true
		h := newHarness(t, wd, hopts{objs: []client.Object{orphan.DeepCopy()}})
		if _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
		if h.n.patches.Load() != 0 || h.n.creates.Load() != 0 {
			t.Fatalf("patches=%d creates=%d", h.n.patches.Load(), h.n.creates.Load())
		}
	})
	t.Run("live owner deleting", func(t *testing.T) {
		liveM := m.DeepCopy()
		liveM.DeletionTimestamp = &deleting
		liveM.Finalizers = []string{"x"}
		live := fake.NewClientBuilder().WithScheme(h0Scheme()).WithObjects(liveM, orphan.DeepCopy()).Build()
		h := newHarness(t, w, hopts{objs: []client.Object{orphan.DeepCopy()}, live: live})
		_, err := h.sync()
		if err == nil || !strings.Contains(err.Error(), "has just been deleted") {
			t.Fatalf("err = %v", err)
		}
		if h.n.patches.Load() != 0 || h.n.creates.Load() != 0 {
			t.Fatalf("patches=%d creates=%d", h.n.patches.Load(), h.n.creates.Load())
		}
	})
	t.Run("orphan adopted and counted", func(t *testing.T) {
		h := newHarness(t, w, hopts{objs: []client.Object{orphan.DeepCopy()}})
		if _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
		if h.n.patches.Load() != 1 || h.n.creates.Load() != 1 || h.n.liveGets.Load() != 1 {
			t.Fatalf("patches=%d creates=%d liveGets=%d", h.n.patches.Load(), h.n.creates.Load(), h.n.liveGets.Load())
		}
	})
}

func h0Scheme() *runtime.Scheme { return kubescheme.Must() }

func TestSyncBadTemplate(t *testing.T) {
	for name, mutate := range map[string]func(*Workload){
		"no labels":    func(w *Workload) { w.Template.Labels = nil },
		"wrong labels": func(w *Workload) { w.Template.Labels = map[string]string{"app": "other"} },
	} {
		t.Run(name, func(t *testing.T) {
			w := workload(2)
			mutate(w)
			h := newHarness(t, w, hopts{})
			if _, err := h.sync(); err == nil {
				t.Fatal("want error for requeue")
			}
			if h.n.creates.Load() != 0 {
				t.Fatal("no create call expected")
			}
			ev := h.events()
			if len(ev) != 1 || !strings.Contains(ev[0], "Warning FailedCreate") {
				t.Fatalf("events = %v", ev)
			}
			c := replicastatus.FindCondition(h.owner().Status.Conditions, replicastatus.ConditionReplicaFailure)
			if c == nil || c.Reason != replicastatus.ReasonFailedCreate {
				t.Fatalf("condition = %+v", c)
			}
			if !h.store.Satisfied(h.key()) {
				t.Fatal("no expectations for refused creates")
			}
		})
	}
}

func TestSyncNamespaceTerminating(t *testing.T) {
	w := workload(2)
	h := newHarness(t, w, hopts{funcs: interceptor.Funcs{Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
		err := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "", errors.New("namespace is terminating"))
		err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: corev1.NamespaceTerminatingCause}}
		return err
	}}})
	if _, err := h.sync(); err != nil {
		t.Fatalf("namespace terminating is success: %v", err)
	}
	if ev := h.events(); len(ev) != 0 || h.n.creates.Load() != 2 {
		t.Fatalf("events=%v creates=%d", ev, h.n.creates.Load())
	}
	if add, _, _ := h.store.Counts(h.key()); add != 2 {
		t.Fatalf("expectations not lowered: add=%d want 2", add)
	}
}

// namingStore reserves deterministic names, as the raft store will.
type namingStore struct {
	*expectations.Memory
	failed []string
}

func (s *namingStore) ExpectCreations(ctx context.Context, k fedref.MemberObject, in expectations.CreateIntent) ([]string, error) {
	names, err := s.Memory.ExpectCreations(ctx, k, in)
	for i := range names {
		names[i] = fmt.Sprintf("%s%d", in.Prefix, i)
	}
	return names, err
}

func (s *namingStore) CreationFailed(k fedref.MemberObject, name string) {
	s.failed = append(s.failed, name)
	s.Memory.CreationFailed(k, name)
}

func TestSyncNamedCreates(t *testing.T) {
	w := workload(3)
	m := mrsFor(w)
	existing := ownedPod(m, "web-0")
	existing.Labels = map[string]string{"not": "matching"} // exists but not ours any more
	existing.OwnerReferences = nil
	ns := &namingStore{Memory: expectations.NewMemory(0, nil)}
	h := newHarness(t, w, hopts{objs: []client.Object{existing}, store: ns})
	if _, err := h.sync(); err != nil {
		t.Fatalf("AlreadyExists on a reserved name is success: %v", err)
	}
	if h.n.creates.Load() != 3 || len(ns.failed) != 0 {
		t.Fatalf("creates=%d failed=%v", h.n.creates.Load(), ns.failed)
	}
	if add, _, _ := ns.Counts(h.key()); add != 3 {
		t.Fatalf("add = %d", add)
	}
}

func TestSyncDeletes(t *testing.T) {
	w := workload(1)
	m := mrsFor(w)
	a, b, c := ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")
	b.Spec.NodeName = "" // unscheduled: deleted first
	b.Status.Phase = corev1.PodPending
	var mu sync.Mutex
	var opts []*client.DeleteOptions
	h := newHarness(t, w, hopts{objs: []client.Object{a, b, c}, funcs: interceptor.Funcs{Delete: func(ctx context.Context, cl client.WithWatch, obj client.Object, o ...client.DeleteOption) error {
		do := &client.DeleteOptions{}
		do.ApplyOptions(o)
		mu.Lock()
		opts = append(opts, do)
		mu.Unlock()
		switch obj.GetName() {
		case "a", "b":
			return cl.Delete(ctx, obj, o...)
		}
		return errors.New("refused")
	}}})
	// Which of a/c goes second is decided by UID tie-break; make c lose.
	_, err := h.sync()
	for _, do := range opts {
		if do.Preconditions == nil || do.Preconditions.UID == nil || string(*do.Preconditions.UID) == "" {
			t.Fatalf("delete without UID precondition: %+v", do)
		}
	}
	if h.n.deletes.Load() != 2 {
		t.Fatalf("deletes = %d", h.n.deletes.Load())
	}
	left := h.pods()
	if len(left) < 1 || len(left) > 2 {
		t.Fatalf("pods left = %d", len(left))
	}
	if err != nil && !strings.Contains(err.Error(), "unable to delete pods") {
		t.Fatalf("err = %v", err)
	}
	_, del, _ := h.store.Counts(h.key())
	if err != nil && del != 1 || err == nil && del != 2 {
		t.Fatalf("del expectations = %d (err %v)", del, err)
	}
	var found bool
	for _, p := range left {
		if p.Name == "b" {
			found = true
		}
	}
	if found {
		t.Fatal("unscheduled pod must be deleted first")
	}
}

func TestSyncDeleteGonePodsAreQuiet(t *testing.T) {
	w := workload(0)
	m := mrsFor(w)
	h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b")}, funcs: interceptor.Funcs{Delete: func(_ context.Context, _ client.WithWatch, obj client.Object, _ ...client.DeleteOption) error {
		if obj.GetName() == "a" {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "a")
		}
		return apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "b", errors.New("uid precondition"))
	}}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if ev := h.events(); len(ev) != 0 {
		t.Fatalf("events = %v", ev)
	}
	if !h.store.Satisfied(h.key()) {
		t.Fatal("failed deletes must settle their expectations")
	}
}

// TestDeleteOutcomes: a delete refused by the API server (or never sent)
// settles its expectation; one whose outcome is unknown (a timeout, a 5xx,
// a call cancelled by a handover) keeps it, so no other victim is chosen
// while this one may still go.
func TestDeleteOutcomes(t *testing.T) {
	tests := []struct {
		name      string
		err       error
		satisfied bool
	}{
		{name: "forbidden", err: apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "a", errors.New("no")), satisfied: true},
		{name: "not sent", err: fmt.Errorf("fenced: %w", ErrNotSent), satisfied: true},
		{name: "server timeout", err: apierrors.NewServerTimeout(schema.GroupResource{Resource: "pods"}, "delete", 1)},
		{name: "internal error", err: apierrors.NewInternalError(errors.New("etcd"))},
		{name: "cancelled", err: context.Canceled},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(0)
			m := mrsFor(w)
			h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a")}, funcs: interceptor.Funcs{Delete: func(context.Context, client.WithWatch, client.Object, ...client.DeleteOption) error {
				return tc.err
			}}})
			if _, err := h.sync(); err == nil {
				t.Fatal("want the delete error")
			}
			if got := h.store.Satisfied(h.key()); got != tc.satisfied {
				t.Fatalf("satisfied after a %s delete = %t, want %t", tc.name, got, tc.satisfied)
			}
		})
	}
}

// TestSyncStatusUpdateFailure mirrors TestControllerUpdateStatusWithFailure.
func TestSyncStatusUpdateFailure(t *testing.T) {
	w := workload(0)
	h := newHarness(t, w, hopts{funcs: interceptor.Funcs{SubResourceUpdate: func(context.Context, client.Client, string, client.Object, ...client.SubResourceUpdateOption) error {
		return errors.New("status refused")
	}}})
	if _, err := h.sync(); err == nil {
		t.Fatal("want error")
	}
	if h.n.statusUpdates.Load() != 2 || h.n.liveGets.Load() != 1 {
		t.Fatalf("status updates=%d live gets=%d, want 2 and 1", h.n.statusUpdates.Load(), h.n.liveGets.Load())
	}
}

type closedGate struct{}

func (closedGate) Enter() (context.Context, uint64, func(), bool) { return nil, 0, nil, false }

func TestSyncGateClosed(t *testing.T) {
	w := workload(3)
	h := newHarness(t, w, hopts{gate: closedGate{}, noOwner: true})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	var l v1alpha1.MemberReplicaSetList
	_ = h.cl.List(context.Background(), &l)
	if len(l.Items) != 0 || h.n.creates.Load() != 0 {
		t.Fatal("closed gate must prevent every write")
	}
}

func TestSyncGateCancelStopsWrites(t *testing.T) {
	w := workload(3)
	gctx, cancel := context.WithCancel(context.Background())
	cancel()
	h := newHarness(t, w, hopts{gate: ctxGate{gctx}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if len(h.pods()) != 0 || h.n.statusUpdates.Load() != 0 {
		t.Fatal("no pod may be created")
	}
}

type ctxGate struct{ ctx context.Context }

func (g ctxGate) Enter() (context.Context, uint64, func(), bool) { return g.ctx, 1, func() {}, true }

// TestSyncAvailabilityRequeue mirrors TestReplicaSetAvailabilityCheck.
func TestSyncAvailabilityRequeue(t *testing.T) {
	w := workload(4)
	w.MinReadySeconds = 5
	m := mrsFor(w)
	var objs []client.Object
	for i, ago := range []time.Duration{0, 2 * time.Second, 4 * time.Second} {
		p := ownedPod(m, fmt.Sprintf("r%d", i))
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-ago))}}
		objs = append(objs, p)
	}
	pending := ownedPod(m, "pending")
	pending.Status.Phase = corev1.PodPending
	objs = append(objs, pending)
	h := newHarness(t, w, hopts{objs: objs})
	res, err := h.sync()
	if err != nil {
		t.Fatal(err)
	}
	st := h.owner().Status
	if st.ReadyReplicas != 3 || st.AvailableReplicas != 0 {
		t.Fatalf("status = %+v", st)
	}
	// metav1.Time keeps whole seconds, hence 4s instead of upstream's 4.3s.
	if res.RequeueAfter != time.Second {
		t.Fatalf("requeue = %v", res.RequeueAfter)
	}
}

func TestNewPodNaming(t *testing.T) {
	m := mrsFor(workload(1))
	if p := NewPod(m, &workload(1).Template, ""); p.GenerateName != "web-" || p.Name != "" || p.Namespace != "ns" {
		t.Fatalf("generated: %+v", p.ObjectMeta)
	}
	if p := NewPod(m, &workload(1).Template, "web-7"); p.Name != "web-7" || p.GenerateName != "" {
		t.Fatalf("named: %+v", p.ObjectMeta)
	}
	tmpl := workload(1).Template
	p := NewPod(m, &tmpl, "")
	p.Labels["x"] = "y"
	p.Spec.Containers[0].Image = "changed"
	if tmpl.Labels["x"] != "" || tmpl.Spec.Containers[0].Image != "img" {
		t.Fatal("pod must not share maps or slices with the template")
	}
	if got := PodControllerIndexFunc(p); got[0] != "mrs-uid" {
		t.Fatalf("index = %v", got)
	}
	if got := PodControllerIndexFunc(&corev1.Pod{}); got[0] != OrphanIndexValue {
		t.Fatalf("orphan index = %v", got)
	}
	_ = claim.Kind
}

// TestSyncStatusFromOwnWrite: a sync that starts before the cache shows the
// engine's last status write works from that write, so it neither rewrites
// the same status nor runs into a 409 (and a live read) on a stale resource
// version. Once the cache shows another writer's version, the cache wins.
func TestSyncStatusFromOwnWrite(t *testing.T) {
	w := workload(2)
	m := mrsFor(w)
	var stale atomic.Pointer[v1alpha1.MemberReplicaSet]
	h := newHarness(t, w, hopts{
		objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b")},
		funcs: interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, k client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if s, ok := obj.(*v1alpha1.MemberReplicaSet); ok && stale.Load() != nil {
				stale.Load().DeepCopyInto(s)
				return nil
			}
			return c.Get(ctx, k, obj, opts...)
		}},
	})
	// The cache stays at the version before the first status write.
	stale.Store(h.owner())
	live := func() v1alpha1.MemberReplicaSetStatus {
		t.Helper()
		s := stale.Swap(nil)
		defer stale.Store(s)
		return h.owner().Status
	}
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if got := live(); got.Replicas != 2 || got.ReadyReplicas != 0 {
		t.Fatalf("status after first sync = %+v", got)
	}

	// Nothing changed: nothing to write, although the cache shows no status.
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if u, g := h.n.statusUpdates.Load(), h.n.liveGets.Load(); u != 1 || g != 0 {
		t.Fatalf("unchanged sync on a lagging cache: status updates=%d live gets=%d, want 1 and 0", u, g)
	}

	// A pod becomes Ready: one write (once the status pacing interval has
	// passed), on the version the first write made.
	h.setReady("a")
	h.clock.SetTime(now.Add(StatusInterval))
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if u, g := h.n.statusUpdates.Load(), h.n.liveGets.Load(); u != 2 || g != 0 {
		t.Fatalf("changed sync on a lagging cache: status updates=%d live gets=%d, want 2 and 0", u, g)
	}
	if got := live(); got.Replicas != 2 || got.ReadyReplicas != 1 {
		t.Fatalf("status after the pod became Ready = %+v", got)
	}
	if r := h.report[len(h.report)-1]; r.ReadyReplicas != 1 {
		t.Fatalf("last report = %+v, want ReadyReplicas 1", r)
	}

	// Another writer changes the object: the cache's version wins and the
	// remembered write is dropped.
	stale.Store(nil)
	cur := h.owner()
	cur.Labels = map[string]string{"other": "writer"}
	if err := h.cl.Update(context.Background(), cur); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if u := h.n.statusUpdates.Load(); u != 2 {
		t.Fatalf("status updates = %d after another writer's change, want 2", u)
	}
	if _, ok := h.eng.written.m[h.key()]; ok {
		t.Fatal("remembered write kept after the cache showed another version")
	}
}

// setReady marks the named pods Ready (a minute ago) without counting the
// pod status writes as the engine's.
func (h *harness) setReady(names ...string) {
	h.t.Helper()
	for _, name := range names {
		p := &corev1.Pod{}
		if err := h.cl.Get(context.Background(), types.NamespacedName{Namespace: "ns", Name: name}, p); err != nil {
			h.t.Fatal(err)
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Minute))}}
		if err := h.cl.Status().Update(context.Background(), p); err != nil {
			h.t.Fatal(err)
		}
		h.n.statusUpdates.Add(-1)
	}
}

// TestSyncPacesCountOnlyStatus: counts in flux are written at most once per
// StatusInterval (the report carries them at once); a new generation, a
// condition or settled pods are written at once.
func TestSyncPacesCountOnlyStatus(t *testing.T) {
	w := workload(3)
	m := mrsFor(w)
	h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")}})
	step := func(what string, wantWrites int32, wantReady int32) Result {
		t.Helper()
		res, err := h.sync()
		if err != nil {
			t.Fatal(err)
		}
		if got := h.n.statusUpdates.Load(); got != wantWrites {
			t.Fatalf("%s: status writes = %d, want %d", what, got, wantWrites)
		}
		if r := h.report[len(h.report)-1]; r.ReadyReplicas != wantReady || r.Replicas != 3 || r.ObservedGeneration != m.Generation {
			t.Fatalf("%s: report = %+v, want 3 replicas, %d ready, generation %d", what, r, wantReady, m.Generation)
		}
		return res
	}
	step("first sync (generation not observed)", 1, 0)

	h.setReady("a")
	res := step("one pod ready within the interval", 1, 1)
	if res.RequeueAfter <= 0 || res.RequeueAfter > StatusInterval {
		t.Fatalf("paced write: RequeueAfter = %v, want (0, %v]", res.RequeueAfter, StatusInterval)
	}
	if st := h.owner().Status; st.ReadyReplicas != 0 {
		t.Fatalf("paced write happened: status %+v", st)
	}

	h.clock.SetTime(now.Add(StatusInterval))
	step("after the interval", 2, 1)
	if st := h.owner().Status; st.ReadyReplicas != 1 {
		t.Fatalf("status after the interval = %+v, want 1 ready", st)
	}

	h.setReady("b", "c")
	step("all ready within the interval (settled)", 3, 3)
	if st := h.owner().Status; st.ReadyReplicas != 3 || st.AvailableReplicas != 3 {
		t.Fatalf("settled status = %+v, want 3 ready and available", st)
	}
}

// TestSyncDefersStatusWhileBusy: while the member's rate limit is busy
// with the syncs' own requests, a status write that is due waits for a
// lull (AwaitLull), MaxStatusDeferral at most; the report carries the
// counts at once.
func TestSyncDefersStatusWhileBusy(t *testing.T) {
	tests := []struct {
		name string
		// busyLater is Busy's answer at the second sync, later after the
		// first (which is always busy).
		busyLater  bool
		later      time.Duration
		wantWrites int32
	}{
		{name: "idle again: written", busyLater: false, later: StatusInterval, wantWrites: 1},
		{name: "still busy within the bound: waits", busyLater: true, later: DefaultMaxStatusDeferral - time.Second, wantWrites: 0},
		{name: "still busy at the bound: written", busyLater: true, later: DefaultMaxStatusDeferral, wantWrites: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workload(3)
			m := mrsFor(w)
			var busy atomic.Bool
			busy.Store(true)
			h := newHarness(t, w, hopts{busy: busy.Load, objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b"), ownedPod(m, "c")}})
			res, err := h.sync()
			if err != nil {
				t.Fatal(err)
			}
			if got := h.n.statusUpdates.Load(); got != 0 {
				t.Fatalf("status writes while busy = %d, want 0", got)
			}
			if !res.AwaitLull || res.RequeueAfter != DefaultMaxStatusDeferral {
				t.Fatalf("deferred write: %+v, want AwaitLull and RequeueAfter %v (the bound)", res, DefaultMaxStatusDeferral)
			}
			if r := h.report[len(h.report)-1]; r.Replicas != 3 || r.ObservedGeneration != m.Generation {
				t.Fatalf("report while deferred = %+v, want 3 replicas of generation %d", r, m.Generation)
			}
			busy.Store(tt.busyLater)
			h.clock.SetTime(now.Add(tt.later))
			res, err = h.sync()
			if err != nil {
				t.Fatal(err)
			}
			if got := h.n.statusUpdates.Load(); got != tt.wantWrites {
				t.Fatalf("status writes = %d, want %d", got, tt.wantWrites)
			}
			if res.AwaitLull != (tt.wantWrites == 0) {
				t.Fatalf("AwaitLull = %v after %d status writes", res.AwaitLull, tt.wantWrites)
			}
			if st := h.owner().Status; tt.wantWrites == 1 && (st.Replicas != 3 || st.ObservedGeneration != m.Generation) {
				t.Fatalf("status = %+v, want 3 replicas of generation %d", st, m.Generation)
			}
		})
	}
}

// TestSyncRequestsGoFirst: a sync's requests are marked to take the
// member's rate limit before background requests (clientlimit.First).
func TestSyncRequestsGoFirst(t *testing.T) {
	var unmarked atomic.Int32
	h := newHarness(t, workload(2), hopts{funcs: interceptor.Funcs{
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			if !clientlimit.IsFirst(ctx) {
				unmarked.Add(1)
			}
			return c.Create(ctx, obj, opts...)
		},
	}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.creates.Load() != 2 {
		t.Fatalf("creates = %d, want 2", h.n.creates.Load())
	}
	if n := unmarked.Load(); n != 0 {
		t.Errorf("%d creates not marked to go first", n)
	}
}

// TestSyncStatusWriteGoesFirst: a sync's status write is marked like its
// other requests: unmarked, it would queue in the lane events use and hold
// up the worker, a Patience at a time, while it has pods to create.
func TestSyncStatusWriteGoesFirst(t *testing.T) {
	var unmarked atomic.Int32
	w := workload(2)
	m := mrsFor(w)
	h := newHarness(t, w, hopts{objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b")}, funcs: interceptor.Funcs{
		SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, opts ...client.SubResourceUpdateOption) error {
			if !clientlimit.IsFirst(ctx) {
				unmarked.Add(1)
			}
			return c.SubResource(sub).Update(ctx, obj, opts...)
		},
	}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if h.n.statusUpdates.Load() == 0 {
		t.Fatal("no status write to look at")
	}
	if n := unmarked.Load(); n != 0 {
		t.Errorf("%d status writes not marked to go first", n)
	}
}

// TestSyncHoldsNewGenerationWhilePodsAppear: the status of a new generation
// whose pods the sync just created waits up to GenerationHold for them to
// settle, so a small MemberReplicaSet writes its status once; the reports
// carry the generation and counts at once, and a generation that does not
// settle is written when the hold ends.
func TestSyncHoldsNewGenerationWhilePodsAppear(t *testing.T) {
	tests := []struct {
		name string
		// ready makes the pods Ready before the second sync.
		ready bool
		// later is how far the clock moves before the second sync.
		later time.Duration
		// wantWrites are the status writes after the second sync.
		wantWrites int32
	}{
		{name: "pods settle within the hold: one write", ready: true, later: time.Second, wantWrites: 1},
		{name: "pods in flux within the hold: no write yet", ready: false, later: time.Second, wantWrites: 0},
		{name: "hold over: written unsettled", ready: false, later: GenerationHold, wantWrites: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := workload(3)
			h := newHarness(t, w, hopts{})
			res, err := h.sync()
			if err != nil {
				t.Fatal(err)
			}
			if h.n.creates.Load() != 3 {
				t.Fatalf("creates = %d, want 3", h.n.creates.Load())
			}
			if got := h.n.statusUpdates.Load(); got != 0 {
				t.Fatalf("status writes after creating the pods = %d, want 0 (held)", got)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > GenerationHold {
				t.Fatalf("RequeueAfter = %v, want (0, %v]", res.RequeueAfter, GenerationHold)
			}
			if r := h.report[len(h.report)-1]; r.ObservedGeneration != h.owner().Generation {
				t.Fatalf("report = %+v, want observed generation %d", r, h.owner().Generation)
			}
			h.observeAll()
			var names []string
			for _, p := range h.pods() {
				names = append(names, p.Name)
			}
			if tt.ready {
				h.setReady(names...)
			}
			h.clock.SetTime(now.Add(tt.later))
			if _, err := h.sync(); err != nil {
				t.Fatal(err)
			}
			if got := h.n.statusUpdates.Load(); got != tt.wantWrites {
				t.Fatalf("status writes = %d, want %d", got, tt.wantWrites)
			}
			r := h.report[len(h.report)-1]
			if r.Replicas != 3 || r.ObservedGeneration != h.owner().Generation || (tt.ready && r.ReadyReplicas != 3) {
				t.Fatalf("report = %+v, want 3 replicas of generation %d", r, h.owner().Generation)
			}
			if tt.wantWrites == 1 {
				if st := h.owner().Status; st.Replicas != 3 || st.ObservedGeneration != h.owner().Generation {
					t.Fatalf("status = %+v", st)
				}
			}
		})
	}
}

// TestReportCarriesTheTerm: the hub enqueues a FederatedReplicaSet for the
// first report of each term even when its counts repeat an earlier term's
// (hub.Reports), so each report names the term its sync ran in.
func TestReportCarriesTheTerm(t *testing.T) {
	h := newHarness(t, workload(2), hopts{gate: &termGate{term: 7}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.report) == 0 || h.report[len(h.report)-1].Term != 7 {
		t.Fatalf("reports = %+v, want the last in term 7", h.report)
	}
}
