package worker

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
)

// stubLW serves a fixed list and a fake watch.
type stubLW struct {
	list []corev1.Pod
	w    *watch.FakeWatcher
}

func (s *stubLW) ListWithContext(context.Context, metav1.ListOptions) (runtime.Object, error) {
	return &corev1.PodList{Items: append([]corev1.Pod(nil), s.list...)}, nil
}

func (s *stubLW) WatchWithContext(context.Context, metav1.ListOptions) (watch.Interface, error) {
	s.w = watch.NewFakeWithChanSize(16, false)
	return s.w, nil
}

func boundPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
}

func pods(n int) []corev1.Pod {
	out := make([]corev1.Pod, n)
	for i := range out {
		out[i] = *boundPod(fmt.Sprintf("p%d", i))
	}
	return out
}

func TestPodBoundList(t *testing.T) {
	for _, tc := range []struct {
		n, max, kept, left int
	}{
		{0, 3, 0, 0}, {3, 3, 3, 0}, {5, 3, 3, 2},
	} {
		t.Run(fmt.Sprintf("%d pods, max %d", tc.n, tc.max), func(t *testing.T) {
			b := newPodBound(tc.max)
			lw := &boundedLW{inner: &stubLW{list: pods(tc.n)}, b: b}
			obj, err := lw.ListWithContext(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := len(obj.(*corev1.PodList).Items); got != tc.kept {
				t.Fatalf("list kept %d pods, want %d", got, tc.kept)
			}
			cached, left := b.Counts()
			if cached != tc.kept || left != tc.left {
				t.Fatalf("counts = %d cached, %d left; want %d, %d", cached, left, tc.kept, tc.left)
			}
			if err := b.Incomplete(); (err != nil) != (tc.left > 0) {
				t.Fatalf("Incomplete = %v with %d left", err, tc.left)
			}
		})
	}
}

func TestPodBoundWatch(t *testing.T) {
	b := newPodBound(2)
	inner := &stubLW{list: pods(2)}
	lw := &boundedLW{inner: inner, b: b}
	if _, err := lw.ListWithContext(context.Background(), metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{ResourceVersion: "1"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var notified []string
	b.setNotify(func(cached, left int) { notified = append(notified, fmt.Sprintf("%d/%d", cached, left)) })

	// Each step sends one event on the inner watch and, when it passes,
	// reads it from the filtered one; a dropped event is followed by a
	// bookmark, which always passes, so what comes out next is decisive.
	step := func(typ watch.EventType, name string, pass bool, cached, left int) {
		t.Helper()
		inner.w.Action(typ, boundPod(name))
		inner.w.Action(watch.Bookmark, &corev1.Pod{})
		ev := <-w.ResultChan()
		if got := ev.Type != watch.Bookmark; got != pass {
			t.Fatalf("%s %s passed = %v, want %v", typ, name, got, pass)
		}
		if pass {
			<-w.ResultChan() // the bookmark
		}
		if c, l := b.Counts(); c != cached || l != left {
			t.Fatalf("after %s %s: %d cached, %d left; want %d, %d", typ, name, c, l, cached, left)
		}
	}
	step(watch.Added, "x", false, 2, 1)    // full: left out
	step(watch.Modified, "x", false, 2, 1) // never admitted: its updates too
	step(watch.Modified, "p0", true, 2, 1)
	if err := b.Incomplete(); err == nil || !strings.Contains(err.Error(), "maximum 2") {
		t.Fatalf("Incomplete = %v", err)
	}
	step(watch.Deleted, "p0", true, 1, 1) // room again, but x is still missing
	step(watch.Added, "y", true, 2, 1)
	step(watch.Deleted, "x", false, 2, 0) // the pod left out is gone: complete
	if err := b.Incomplete(); err != nil {
		t.Fatalf("Incomplete = %v after the pod left out was deleted", err)
	}
	if len(notified) == 0 || notified[len(notified)-1] != "2/0" {
		t.Fatalf("notifications %v, want the last to be 2/0", notified)
	}

	// A watch list starts over.
	w2, err := lw.WatchWithContext(context.Background(), metav1.ListOptions{SendInitialEvents: ptr.To(true)})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if c, l := b.Counts(); c != 0 || l != 0 {
		t.Fatalf("after a new watch list: %d cached, %d left", c, l)
	}
}
