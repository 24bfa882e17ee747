package worker

import (
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/claim"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

func mrs(name string, uid types.UID, sel map[string]string, minReady int32) *v1alpha1.MemberReplicaSet {
	return &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: uid},
		Spec:       v1alpha1.MemberReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: sel}, MinReadySeconds: minReady},
	}
}

func pod(name, rv string, lbls map[string]string, owner *v1alpha1.MemberReplicaSet) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv, Labels: lbls}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{claim.OwnerRef(owner)}
	}
	return p
}

type fixture struct {
	h     *handlers
	store *expectations.Memory
	queue workqueue.TypedRateLimitingInterface[types.NamespacedName]
}

func newFixture(t *testing.T, owners ...*v1alpha1.MemberReplicaSet) *fixture {
	s := kubescheme.Must()
	objs := make([]client.Object, len(owners))
	for i, o := range owners {
		objs[i] = o
	}
	cl := fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).Build()
	st := expectations.NewMemory(0, nil)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	t.Cleanup(q.ShutDown)
	w := &Worker{name: "m1", reader: cl, queue: q, o: Options{Store: st}}
	return &fixture{h: &handlers{w: w, log: klog.Background()}, store: st, queue: q}
}

func (f *fixture) drain() []string {
	var out []string
	for f.queue.Len() > 0 {
		k, _ := f.queue.Get()
		out = append(out, k.Name)
		f.queue.Done(k)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) key(name string) fedref.MemberObject {
	return fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: name}
}

func eq(a, b []string) bool { return fmt.Sprint(a) == fmt.Sprint(b) }

var (
	blue  = map[string]string{"color": "blue"}
	green = map[string]string{"color": "green"}
)

func TestAddPod(t *testing.T) {
	a, b := mrs("a", "ua", blue, 0), mrs("b", "ub", blue, 0)
	f := newFixture(t, a, b)
	if _, err := f.store.ExpectCreations(t.Context(), f.key("a"), expectations.CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	// Owned: only the owner, and the creation is observed (TestOverlappingRSs).
	f.h.addPod(pod("p", "1", blue, a))
	if got := f.drain(); !eq(got, []string{"a"}) || !f.store.Satisfied(f.key("a")) {
		t.Fatalf("owned add: queue %v satisfied %v", got, f.store.Satisfied(f.key("a")))
	}
	// Orphan: every matching owner; no labels: none.
	f.h.addPod(pod("o", "1", blue, nil))
	if got := f.drain(); !eq(got, []string{"a", "b"}) {
		t.Fatalf("orphan add: %v", got)
	}
	f.h.addPod(pod("o2", "1", nil, nil))
	if got := f.drain(); len(got) != 0 {
		t.Fatalf("unlabelled orphan: %v", got)
	}
	// Owner ref to an unknown UID: ignored.
	stale := mrs("a", "old", blue, 0)
	f.h.addPod(pod("s", "1", blue, stale))
	if got := f.drain(); len(got) != 0 {
		t.Fatalf("stale ref: %v", got)
	}
}

// TestDeletionTimestamp mirrors upstream's: add and update with a
// DeletionTimestamp count as one deletion; later events change nothing.
func TestDeletionTimestamp(t *testing.T) {
	a := mrs("a", "ua", blue, 0)
	f := newFixture(t, a)
	if err := f.store.ExpectDeletions(t.Context(), f.key("a"), []expectations.PodRef{{Name: "p"}, {Name: "q"}}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	p := pod("p", "1", blue, a)
	p.DeletionTimestamp = &now
	f.h.addPod(p)
	if _, del, _ := f.store.Counts(f.key("a")); del != 1 {
		t.Fatalf("del = %d after add with deletionTimestamp", del)
	}
	// Update of q to terminating, with a label change: old and new seen once.
	q0 := pod("q", "1", blue, a)
	q1 := pod("q", "2", green, a)
	q1.DeletionTimestamp = &now
	f.h.updatePod(q0, q1)
	f.h.deletePod(q1)
	f.h.deletePod(toolscache.DeletedFinalStateUnknown{Key: "ns/q", Obj: q1})
	if _, del, _ := f.store.Counts(f.key("a")); del != 0 {
		t.Fatalf("del = %d, want 0", del)
	}
	if got := f.drain(); !eq(got, []string{"a"}) {
		t.Fatalf("queue = %v", got)
	}
}

// TestUpdatePod mirrors TestUpdatePods.
func TestUpdatePod(t *testing.T) {
	a, b := mrs("a", "ua", blue, 0), mrs("b", "ub", green, 7)
	cases := []struct {
		name     string
		old, cur *corev1.Pod
		want     []string
	}{
		{name: "same RV ignored", old: pod("p", "1", blue, a), cur: pod("p", "1", green, b)},
		{name: "owned label change: owner only", old: pod("p", "1", blue, a), cur: pod("p", "2", green, a), want: []string{"a"}},
		{name: "controller changed: old and new", old: pod("p", "1", blue, a), cur: pod("p", "2", green, b), want: []string{"a", "b"}},
		{name: "released with labels matching another", old: pod("p", "1", blue, a), cur: pod("p", "2", green, nil), want: []string{"a", "b"}},
		{name: "orphan label change", old: pod("p", "1", blue, nil), cur: pod("p", "2", green, nil), want: []string{"b"}},
		{name: "orphan status change only", old: pod("p", "1", blue, nil), cur: pod("p", "2", blue, nil)},
		{name: "became ready with minReady", old: pod("p", "1", green, b), cur: func() *corev1.Pod {
			p := pod("p", "2", green, b)
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
			return p
		}(), want: []string{"b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, a, b)
			f.h.updatePod(c.old, c.cur)
			if got := f.drain(); !eq(got, c.want) {
				t.Fatalf("queue = %v, want %v", got, c.want)
			}
		})
	}
}

// TestDeletePodTombstone mirrors TestDeleteFinalStateUnknown.
func TestDeletePodTombstone(t *testing.T) {
	a := mrs("a", "ua", blue, 0)
	f := newFixture(t, a)
	f.h.deletePod(toolscache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod("p", "1", blue, a)})
	if got := f.drain(); !eq(got, []string{"a"}) {
		t.Fatalf("queue = %v", got)
	}
	f.h.deletePod(pod("orphan", "1", blue, nil))
	if got := f.drain(); len(got) != 0 {
		t.Fatalf("orphan delete must be ignored: %v", got)
	}
}

// TestOwnerEvents covers owner delete (expectations dropped) and recreation
// seen as an update (TestExpectationsOnRecreate).
func TestOwnerEvents(t *testing.T) {
	a := mrs("a", "ua", blue, 0)
	f := newFixture(t, a)
	for _, ev := range []func(){
		func() { f.h.deleteOwner(toolscache.DeletedFinalStateUnknown{Key: "ns/a", Obj: a}) },
		func() { f.h.updateOwner(a, mrs("a", "new", blue, 0)) },
	} {
		if _, err := f.store.ExpectCreations(t.Context(), f.key("a"), expectations.CreateIntent{Count: 2}); err != nil {
			t.Fatal(err)
		}
		ev()
		if _, _, ok := f.store.Counts(f.key("a")); ok {
			t.Fatal("expectations must be dropped")
		}
		if got := f.drain(); !eq(got, []string{"a"}) {
			t.Fatalf("queue = %v", got)
		}
	}
	f.h.addOwner(a)
	f.h.updateOwner(a, a)
	if got := f.drain(); !eq(got, []string{"a"}) {
		t.Fatalf("queue = %v", got)
	}
}
