package hub

import (
	"context"
	"fmt"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
)

// TestCapacityCountsUnboundPodsOnce: member a (one 8-cpu node, pods of 2
// cpu: room for 4) runs its target 4: two pods bound, two just created and
// not bound yet. Member b has not created its 2 pods. The plan must stay
// a:4 b:2 whatever a's report says of the new pods:
//   - reported: the report counts them, and the room they will take must not
//     also count as free (before the fix: a:6 b:0);
//   - not yet reported: the counters already take their room, and adding
//     the room left to the stale report would give a only 2 (a:2 b:4; in
//     the e2e fleet this made CostOrdered flap).
func TestCapacityCountsUnboundPodsOnce(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reported int32
	}{
		{"new pods reported", 4},
		{"report lags the cache", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hubObj, pods := costOrderedOnePodsOfTwoCPU(t)
			e := newEnv(t, true, hubObj, healthy("a", "b"), map[string][]client.Object{"a": pods}, nil)
			ref := fedref.FRS{Namespace: "default", Name: "web"}
			if err := e.targets.SetTargets(context.Background(), ref, 3, map[string]int32{"a": 4, "b": 2}); err != nil {
				t.Fatal(err)
			}
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
				engine.MemberStatus{Target: 4, Replicas: tc.reported, FullyLabeledReplicas: tc.reported, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "b", Namespace: "default", Name: "web"},
				engine.MemberStatus{Target: 2, ReportedAt: now})
			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			tg, _, _ := e.targets.Targets(ref)
			if tg["a"] != 4 || tg["b"] != 2 {
				t.Fatalf("targets = %v, want a:4 b:2 (a has room for 4 pods of 2 cpu; 2 of its 4 are not bound yet)", tg)
			}
		})
	}
}

func TestRoomBeyondReport(t *testing.T) {
	for _, tc := range []struct {
		name                string
		free, own, reported int32
		want                int32
	}{
		{"report and cache agree", 2, 4, 4, 2},
		{"report lags the cache", 0, 4, 2, 2},
		{"report ahead of the cache", 2, 2, 4, 0},
		{"own pods unknown", 3, -1, 4, 3},
		{"unlimited room stays unlimited", math.MaxInt32, 5, 1, math.MaxInt32},
		{"never negative", 0, 0, 3, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := roomBeyondReport(tc.free, tc.own, tc.reported); got != tc.want {
				t.Errorf("roomBeyondReport(%d, %d, %d) = %d, want %d", tc.free, tc.own, tc.reported, got, tc.want)
			}
		})
	}
}

// costOrderedOnePodsOfTwoCPU is an FRS of 6 pods of 2 cpu, CostOrdered over
// a (filled first) and b, and member a's pods: two bound and running, two
// created and not bound yet. a's one 8-cpu node has room for 4.
func costOrderedOnePodsOfTwoCPU(t *testing.T) (*v1alpha1.FederatedReplicaSet, []client.Object) {
	t.Helper()
	hubObj := frs(6, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Template.Spec.Containers = []corev1.Container{{Name: "app", Image: "x",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}}
		f.Spec.Placement = v1alpha1.Placement{Strategy: v1alpha1.StrategyCostOrdered, Clusters: []v1alpha1.ClusterPreference{
			{Name: "a", Weight: ptr.To[int32](1), DeletionCost: ptr.To[int32](300)},
			{Name: "b", Weight: ptr.To[int32](1), DeletionCost: ptr.To[int32](100)},
		}}
	})
	var pods []client.Object
	for i := range 4 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("web-%d", i), Labels: map[string]string{"app": "web"}},
			Spec:       hubObj.Spec.Template.Spec,
			Status:     corev1.PodStatus{Phase: corev1.PodPending},
		}
		if i < 2 {
			p.Spec.NodeName = "a-n1"
			p.Status.Phase = corev1.PodRunning
		}
		pods = append(pods, p)
	}
	return hubObj, pods
}
