package worker

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
)

// How the pod bound works. A member cache built with CacheOptionsFor(max)
// wraps the ListerWatcher of its pod informer: from a list (or the initial
// events of a watch list) at most max pods pass, and a watch passes an added
// pod only while fewer than max are admitted. Pods that did not pass are
// counted, not kept (the point is to bound memory); a pod deleted that was
// never admitted lowers that count. Updates of pods not admitted are dropped,
// so the informer's store never holds more than max pods. While any pod is
// left out, the member's view is incomplete: the worker's engine neither
// creates nor deletes pods there nor writes anything (see
// engine.Options.ViewIncomplete), and reports why through its status sink,
// so the hub shows it. The view is complete again when the pods left out are
// gone, or when a relist finds at most max.

// PodBound is the admission state of one member's pod informer.
type PodBound struct {
	max int

	mu       sync.Mutex
	admitted map[string]struct{}
	left     int
	notify   func(cached, left int)
}

func newPodBound(max int) *PodBound {
	return &PodBound{max: max, admitted: map[string]struct{}{}}
}

// Max is the most pods the informer keeps.
func (b *PodBound) Max() int { return b.max }

// Counts returns the pods cached and the pods left out.
func (b *PodBound) Counts() (cached, left int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.admitted), b.left
}

// Incomplete returns an error saying why the cache misses pods, or nil when
// it holds every pod of the member.
func (b *PodBound) Incomplete() error {
	cached, left := b.Counts()
	if left == 0 {
		return nil
	}
	return fmt.Errorf("the member's pod cache is full: %d pods cached (maximum %d), %d more not cached; "+
		"no pods are created or deleted in this member until it has at most %d pods or the maximum is raised", cached, b.max, left, b.max)
}

// setNotify sets the function called after every change of the counts
// (outside the lock); nil stops the calls.
func (b *PodBound) setNotify(f func(cached, left int)) {
	b.mu.Lock()
	b.notify = f
	b.mu.Unlock()
}

func (b *PodBound) changed() {
	b.mu.Lock()
	f, cached, left := b.notify, len(b.admitted), b.left
	b.mu.Unlock()
	if f != nil {
		f(cached, left)
	}
}

// reset starts a new list: nothing admitted, nothing left out.
func (b *PodBound) reset() {
	b.mu.Lock()
	clear(b.admitted)
	b.left = 0
	b.mu.Unlock()
}

// admit decides whether the added object may enter the store.
func (b *PodBound) admit(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.admitted[key]; ok {
		return true
	}
	if len(b.admitted) >= b.max {
		b.left++
		return false
	}
	b.admitted[key] = struct{}{}
	return true
}

// known reports whether key was admitted (updates of others are dropped).
func (b *PodBound) known(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	_, ok := b.admitted[key]
	return ok
}

// forget records the deletion of key; false when it was never admitted.
func (b *PodBound) forget(key string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.admitted[key]; ok {
		delete(b.admitted, key)
		return true
	}
	if b.left > 0 {
		b.left--
	}
	return false
}

func objectKey(obj runtime.Object) (string, bool) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", false
	}
	return m.GetNamespace() + "/" + m.GetName(), true
}

// filter is the watch filter: it admits, drops and forgets as the package
// comment says.
func (b *PodBound) filter(ev watch.Event) (watch.Event, bool) {
	key, ok := objectKey(ev.Object)
	if !ok {
		return ev, true
	}
	keep := true
	switch ev.Type {
	case watch.Added:
		keep = b.admit(key)
	case watch.Modified:
		keep = b.known(key)
	case watch.Deleted:
		keep = b.forget(key)
	default:
		// Bookmarks and errors pass.
		return ev, true
	}
	b.changed()
	return ev, keep
}

// boundedLW wraps a pod ListerWatcher.
type boundedLW struct {
	inner toolscache.ListerWatcherWithContext
	b     *PodBound
}

var _ toolscache.ListerWatcher = (*boundedLW)(nil)
var _ toolscache.ListerWatcherWithContext = (*boundedLW)(nil)

func (l *boundedLW) List(opts metav1.ListOptions) (runtime.Object, error) {
	return l.ListWithContext(context.Background(), opts)
}

func (l *boundedLW) Watch(opts metav1.ListOptions) (watch.Interface, error) {
	return l.WatchWithContext(context.Background(), opts)
}

// ListWithContext lists and keeps the first max items.
func (l *boundedLW) ListWithContext(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	list, err := l.inner.ListWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	items, err := meta.ExtractListWithAlloc(list)
	if err != nil {
		return nil, fmt.Errorf("reading the pod list: %w", err)
	}
	l.b.reset()
	kept := items[:0]
	for _, it := range items {
		if key, ok := objectKey(it); !ok || l.b.admit(key) {
			kept = append(kept, it)
		}
	}
	if len(kept) < len(items) {
		if err := meta.SetList(list, kept); err != nil {
			return nil, fmt.Errorf("bounding the pod list: %w", err)
		}
	}
	l.b.changed()
	return list, nil
}

// WatchWithContext filters the watch; a watch that starts with initial
// events (a watch list) is a new list.
func (l *boundedLW) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		l.b.reset()
		l.b.changed()
	}
	w, err := l.inner.WatchWithContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, l.b.filter), nil
}

// boundedInformer is the pod informer of a bounded member cache; the
// worker finds its PodBound through it.
type boundedInformer struct {
	toolscache.SharedIndexInformer
	bound *PodBound
}

// podBoundOf returns the bound of a member's pod informer, nil when the
// cache was built without one.
func podBoundOf(inf any) *PodBound {
	if b, ok := inf.(*boundedInformer); ok {
		return b.bound
	}
	return nil
}

// CacheOptionsFor is CacheOptions with at most maxCachedPods pods kept in
// the member's pod informer (0 means no bound). The workers of such
// members must be given the same Options.MaxCachedPods: a worker refuses to
// start on a cache whose bound differs.
func CacheOptionsFor(maxCachedPods int) func(*cluster.Options) {
	return func(o *cluster.Options) {
		CacheOptions(o)
		if maxCachedPods <= 0 {
			return
		}
		o.Cache.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			if _, ok := obj.(*corev1.Pod); !ok {
				return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
			}
			b := newPodBound(maxCachedPods)
			blw := &boundedLW{inner: toolscache.ToListerWatcherWithContext(lw), b: b}
			return &boundedInformer{SharedIndexInformer: toolscache.NewSharedIndexInformer(blw, obj, resync, idx), bound: b}
		}
	}
}
