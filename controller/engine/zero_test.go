package engine

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// orphanPod is an active pod of the template without a controller.
func orphanPod(name string, l map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: nn.Namespace, Name: name, UID: types.UID("uid-" + name), Labels: l},
		Spec:       corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "img"}}},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning},
	}
}

// TestSyncTargetZero: a member whose target is zero gets no
// MemberReplicaSet unless an orphan of the namespace matches the selector;
// it reports zero to the hub either way, and an existing one is kept.
func TestSyncTargetZero(t *testing.T) {
	for _, tc := range []struct {
		name      string
		objs      []client.Object
		noOwner   bool
		wantOwner bool
	}{
		{name: "nothing in the member", noOwner: true},
		{name: "an orphan of another app", noOwner: true, objs: []client.Object{orphanPod("x", map[string]string{"app": "other"})}},
		{name: "a matching orphan", noOwner: true, objs: []client.Object{orphanPod("x", lbls)}, wantOwner: true},
		{name: "an existing owner is kept", wantOwner: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(0)
			h := newHarness(t, w, hopts{noOwner: tc.noOwner, objs: tc.objs})
			if _, err := h.sync(); err != nil {
				t.Fatal(err)
			}
			err := h.cl.Get(t.Context(), nn, &v1alpha1.MemberReplicaSet{})
			if gotOwner := err == nil; gotOwner != tc.wantOwner || (err != nil && !apierrors.IsNotFound(err)) {
				t.Fatalf("MemberReplicaSet exists %v (%v), want %v", gotOwner, err, tc.wantOwner)
			}
			if !tc.noOwner {
				return
			}
			if tc.wantOwner {
				// The next sync adopts the orphan and deletes it, as a
				// ReplicaSet of zero replicas does.
				if _, err := h.sync(); err != nil {
					t.Fatal(err)
				}
				if h.n.deletes.Load() != 1 {
					t.Fatalf("deletes = %d, want the orphan's", h.n.deletes.Load())
				}
				return
			}
			if len(h.report) != 1 || h.report[0].Target != 0 || h.report[0].Replicas != 0 || h.report[0].Hub != hubRef || !h.report[0].ReportedAt.Equal(now) {
				t.Fatalf("reports = %+v, want one report of zero", h.report)
			}
			if n := h.n.creates.Load() + h.n.patches.Load() + h.n.statusUpdates.Load(); n != 0 {
				t.Fatalf("%d member writes for a target of zero", n)
			}
		})
	}
}
