package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
)

// podWatch counts the pods of one namespace in every member as they appear
// and become Ready, and remembers when the counts first reached the goal.
type podWatch struct {
	goal  int
	start time.Time

	mu        sync.Mutex
	seen      map[types.UID]string // pod -> member
	ready     map[types.UID]bool
	perMember map[string]int
	created   time.Duration
	allReady  time.Duration
	done      chan struct{}
	cancel    context.CancelFunc
}

// watchPods starts informers on namespace ns in every member and returns
// once they have synced.
func watchPods(ctx context.Context, members map[string]*rest.Config, ns string, goal int) (*podWatch, error) {
	ctx, cancel := context.WithCancel(ctx)
	w := &podWatch{goal: goal, seen: map[types.UID]string{}, ready: map[types.UID]bool{}, perMember: map[string]int{},
		done: make(chan struct{}), cancel: cancel}
	var synced []toolscache.InformerSynced
	for name, cfg := range members {
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("client of %s: %w", name, err)
		}
		f := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(ns))
		inf := f.Core().V1().Pods().Informer()
		// Only what is counted is kept: 10,000 full pods per run would
		// make the benchmark itself a noticeable load.
		if err := inf.SetTransform(slimPod); err != nil {
			cancel()
			return nil, fmt.Errorf("pod transform of %s: %w", name, err)
		}
		reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { w.observe(name, obj) },
			UpdateFunc: func(_, obj any) { w.observe(name, obj) },
		})
		if err != nil {
			cancel()
			return nil, fmt.Errorf("pod handler of %s: %w", name, err)
		}
		synced = append(synced, reg.HasSynced)
		f.Start(ctx.Done())
	}
	if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
		cancel()
		return nil, fmt.Errorf("pod watches did not sync: %w", ctx.Err())
	}
	return w, nil
}

func slimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID,
		ResourceVersion: p.ResourceVersion, DeletionTimestamp: p.DeletionTimestamp}}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			out.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// begin sets the time the run started; counts before it are kept.
func (w *podWatch) begin(t time.Time) {
	w.mu.Lock()
	w.start = t
	w.mu.Unlock()
}

func (w *podWatch) observe(member string, obj any) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.DeletionTimestamp != nil {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.seen[p.UID]; !ok {
		w.seen[p.UID] = member
		w.perMember[member]++
		if len(w.seen) == w.goal && w.created == 0 {
			w.created = now.Sub(w.start)
		}
	}
	if !w.ready[p.UID] && podReady(p) {
		w.ready[p.UID] = true
		if len(w.ready) == w.goal && w.allReady == 0 {
			w.allReady = now.Sub(w.start)
			close(w.done)
		}
	}
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// wait blocks until every pod is Ready or timeout passes.
func (w *podWatch) wait(ctx context.Context, timeout time.Duration) error {
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(timeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		return fmt.Errorf("after %s: %d of %d pods exist, %d Ready", timeout, len(w.seen), w.goal, len(w.ready))
	}
}

// result returns the two times and the pods each member got.
func (w *podWatch) result() (created, ready time.Duration, perMember map[string]int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for k, v := range w.perMember {
		out[k] = v
	}
	return w.created, w.allReady, out
}

// progress is a one-line state for logs.
func (w *podWatch) progress() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d/%d created, %d Ready", len(w.seen), w.goal, len(w.ready))
}

func (w *podWatch) stop() { w.cancel() }
