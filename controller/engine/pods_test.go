package engine

import (
	"context"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// TestListPodsByController: with Options.PodsByController the sync reads
// the pods it returns (owned and orphans) and lists nothing by field
// through the client; when it cannot answer, the client list is used.
// Either way the sync sees the same pods: two owned, one orphan adopted,
// nothing created.
func TestListPodsByController(t *testing.T) {
	w := workload(3)
	m := mrsFor(w)
	owned := []*corev1.Pod{ownedPod(m, "a"), ownedPod(m, "b")}
	orphan := ownedPod(m, "o")
	orphan.OwnerReferences = nil
	for _, available := range []bool{true, false} {
		var fieldLists atomic.Int32
		var asked int
		var h *harness
		h = newHarness(t, w, hopts{
			objs: []client.Object{owned[0].DeepCopy(), owned[1].DeepCopy(), orphan.DeepCopy()},
			funcs: interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, opts ...client.ListOption) error {
				lo := (&client.ListOptions{}).ApplyOptions(opts)
				if _, ok := l.(*corev1.PodList); ok && lo.FieldSelector != nil {
					fieldLists.Add(1)
				}
				return c.List(ctx, l, opts...)
			}},
			podsByController: func(ns, v string) ([]*corev1.Pod, bool) {
				asked++
				if !available || ns != "ns" {
					return nil, available
				}
				// The index holds what the client holds (the cache
				// agrees with a quorum list).
				var l corev1.PodList
				if err := h.cl.List(context.Background(), &l); err != nil {
					t.Fatal(err)
				}
				var out []*corev1.Pod
				for i := range l.Items {
					if PodControllerIndexFunc(&l.Items[i])[0] == v {
						out = append(out, &l.Items[i])
					}
				}
				return out, true
			},
		})
		if _, err := h.sync(); err != nil {
			t.Fatal(err)
		}
		if asked == 0 {
			t.Fatalf("available=%v: PodsByController was not asked", available)
		}
		// Without the index each listing (the term's check and the sync)
		// is two field lists: owned pods and orphans.
		if got := fieldLists.Load(); (got == 0) != available {
			t.Errorf("available=%v: %d pod lists by field through the client", available, got)
		}
		if c, p := h.n.creates.Load(), h.n.patches.Load(); c != 0 || p != 1 {
			t.Errorf("available=%v: creates=%d adoption patches=%d, want 0 and 1", available, c, p)
		}
	}
}
