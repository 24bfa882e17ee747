package capacity

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// fakeInformer holds the handlers added to it and the objects added to
// it (replayed to a new handler, as an informer's initial list); the test
// delivers events and decides when they count as synced.
type fakeInformer struct {
	cache.Informer
	mu       sync.Mutex
	handlers map[*fakeRegistration]toolscache.ResourceEventHandler
	objs     []any
	synced   atomic.Bool
}

type fakeRegistration struct {
	toolscache.ResourceEventHandlerRegistration
	inf *fakeInformer
}

func (r *fakeRegistration) HasSynced() bool { return r.inf.synced.Load() }

func (f *fakeInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reg := &fakeRegistration{inf: f}
	f.handlers[reg] = h
	for _, obj := range f.objs {
		h.OnAdd(obj, true)
	}
	return reg, nil
}

func (f *fakeInformer) RemoveEventHandler(reg toolscache.ResourceEventHandlerRegistration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.handlers, reg.(*fakeRegistration))
	return nil
}

func (f *fakeInformer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.handlers)
}

// add keeps obj and delivers its add to every handler.
func (f *fakeInformer) add(obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.objs = append(f.objs, obj)
	for _, h := range f.handlers {
		h.OnAdd(obj, true)
	}
}

// fakeInformers is a member cache of fake informers, one per kind, made
// on first request (as a real cache starts one).
type fakeInformers struct {
	cache.Cache
	mu    sync.Mutex
	kinds map[string]*fakeInformer
}

func (f *fakeInformers) GetInformer(_ context.Context, obj client.Object, _ ...cache.InformerGetOption) (cache.Informer, error) {
	return f.informer(fmt.Sprintf("%T", obj), true), nil
}

// informer returns the kind's informer, made if create, else nil.
func (f *fakeInformers) informer(kind string, create bool) *fakeInformer {
	f.mu.Lock()
	defer f.mu.Unlock()
	inf := f.kinds[kind]
	if inf == nil && create {
		inf = &fakeInformer{handlers: map[*fakeRegistration]toolscache.ResourceEventHandler{}}
		f.kinds[kind] = inf
	}
	return inf
}

type fakeMember struct {
	cluster.Cluster
	cache *fakeInformers
}

func (f fakeMember) GetCache() cache.Cache { return f.cache }

// TestTrackerSwitchesCounting follows a member through a loss and a gain of
// its ownership: usage-fed without ever asking for a pod informer, then
// pod-fed, then usage-fed again from the recorded usage, each engagement's
// handlers removed when its context ends.
func TestTrackerSwitchesCounting(t *testing.T) {
	ctx := t.Context()
	member := fakeMember{cache: &fakeInformers{kinds: map[string]*fakeInformer{}}}
	tr := NewTracker()
	tr.SyncTimeout = 10 * time.Millisecond // waits only where the test knows the answer is no
	tmpl := template("1", "")
	n1 := node("n1", "8", "16Gi", 110)
	u := Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 3, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("5")}}}}
	ask := func(what string, want int32, wantOK bool) {
		t.Helper()
		if got, ok := tr.Free(ctx, "m", tmpl); got != want || ok != wantOK {
			t.Fatalf("%s: Free = %d, %v; want %d, %v", what, got, ok, want, wantOK)
		}
	}

	lost, endLost := context.WithCancel(ctx)
	if err := tr.EngageNodes(lost, "m", member); err != nil {
		t.Fatal(err)
	}
	nodes := member.cache.informer("*v1.Node", false)
	nodes.add(&n1)
	ask("nodes not synced", 0, false)
	nodes.synced.Store(true)
	ask("no usage yet", 0, false)
	if err := tr.SetUsage("m", u); err != nil {
		t.Fatal(err)
	}
	ask("usage-fed", 3, true)
	if member.cache.informer("*v1.Pod", false) != nil {
		t.Fatal("a usage-fed engagement asked for the pod informer")
	}

	gained, endGained := context.WithCancel(ctx)
	if err := tr.Engage(gained, "m", member); err != nil {
		t.Fatal(err)
	}
	pods := member.cache.informer("*v1.Pod", false)
	p := pod("n1", "2", "1Gi", corev1.PodRunning)
	pods.add(&p)
	pods.synced.Store(true)
	ask("pod-fed", 6, true)
	endLost()
	poll(t, "the lost engagement's node handler removed", func() bool { return nodes.count() == 1 })
	ask("pod-fed after the usage-fed engagement ended", 6, true)

	again, endAgain := context.WithCancel(ctx)
	if err := tr.EngageNodes(again, "m", member); err != nil {
		t.Fatal(err)
	}
	ask("usage-fed again, from the recorded usage", 3, true)
	endGained()
	poll(t, "the pod handler removed", func() bool { return pods.count() == 0 && nodes.count() == 1 })
	endAgain()
	poll(t, "the member forgotten", func() bool { _, ok := tr.Summary("m"); return !ok && nodes.count() == 0 })
}

// TestTrackerUsageConcurrently runs publications, estimates and
// re-engagements at once (for the race detector); every answer is one of
// the published usages' answers.
func TestTrackerUsageConcurrently(t *testing.T) {
	ctx := t.Context()
	member := fakeMember{cache: &fakeInformers{kinds: map[string]*fakeInformer{}}}
	tr := NewTracker()
	tmpl := template("1", "")
	if err := tr.EngageNodes(ctx, "m", member); err != nil {
		t.Fatal(err)
	}
	nodes := member.cache.informer("*v1.Node", false)
	n1 := node("n1", "8", "16Gi", 110)
	nodes.add(&n1)
	nodes.synced.Store(true)
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := range 200 {
			cpu := resource.NewQuantity(int64(i%8), resource.DecimalSI)
			if err := tr.SetUsage("m", Usage{Nodes: map[string]NodeUsage{"n1": {Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: *cpu}}}}); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 20 {
			if err := tr.EngageNodes(ctx, "m", member); err != nil {
				t.Error(err)
			}
		}
	})
	wg.Go(func() {
		for range 200 {
			if free, ok := tr.Free(ctx, "m", tmpl); ok && (free < 1 || free > 8) {
				t.Errorf("Free = %d, not an answer of any published usage", free)
			}
			tr.Summary("m")
		}
	})
	wg.Wait()
}

// poll waits for cond, checking every 10 ms, up to a generous bound.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 30 s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
