package engine

import (
	"errors"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// While the member's pod cache misses pods, a sync writes nothing to the
// member, whatever the partial view suggests, and reports why.
func TestIncompleteViewWritesNothing(t *testing.T) {
	full := errors.New("the member's pod cache is full")
	for _, tc := range []struct {
		name    string
		target  int32
		pods    int
		noOwner bool
	}{
		{"would create", 3, 1, false},
		{"would delete", 0, 2, false},
		{"would create the owner", 2, 0, true},
		{"would change the owner's target", 5, 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(tc.target)
			m := mrsFor(workload(2)) // the owner as last written: target 2
			var objs []client.Object
			if !tc.noOwner {
				objs = append(objs, m)
			}
			for i := range tc.pods {
				objs = append(objs, ownedPod(m, string(rune('a'+i))))
			}
			h := newHarness(t, w, hopts{objs: objs, noOwner: true, incomplete: func() error { return full }})
			res, err := h.sync()
			if err != nil {
				t.Fatal(err)
			}
			if n := h.n.creates.Load() + h.n.deletes.Load() + h.n.patches.Load() + h.n.statusUpdates.Load(); n != 0 {
				t.Fatalf("%d writes (creates %d, deletes %d, patches %d, status %d)", n,
					h.n.creates.Load(), h.n.deletes.Load(), h.n.patches.Load(), h.n.statusUpdates.Load())
			}
			if res.RequeueAfter != IncompleteRequeue {
				t.Errorf("requeue after %v, want %v", res.RequeueAfter, IncompleteRequeue)
			}
			if len(h.report) != 1 {
				t.Fatalf("%d reports, want 1", len(h.report))
			}
			rf := h.report[0].ReplicaFailure
			if rf == nil || rf.Reason != ReasonPodCacheIncomplete || rf.Message != full.Error() {
				t.Fatalf("ReplicaFailure = %+v", rf)
			}
			if want := m.Spec.Replicas; !tc.noOwner && h.report[0].Target != want {
				t.Errorf("reported target %d, want the owner's %d", h.report[0].Target, want)
			}
			if h.report[0].Hub.Name != w.Hub.Name {
				t.Errorf("report for hub object %+v, want %+v", h.report[0].Hub, w.Hub)
			}
		})
	}
}
