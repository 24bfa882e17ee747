package hub

import (
	"context"
	"fmt"
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

// TestCapacityCountsUnboundPodsOnce: a member's capacity for the planner is
// its current pods plus the free room capacity.Estimate finds, and the
// estimate subtracts only pods bound to a node. Pods just created and not
// yet bound are then counted as current AND their room as free, so a plan
// made in that moment places more on the member than fits.
//
// Member a (one 8-cpu node, pods of 2 cpu: room for 4) runs its target 4:
// two pods bound, two just created and unbound. Member b has not created
// its 2 pods yet. The plan should stay a:4 b:2; it becomes a:6 b:0.
func TestCapacityCountsUnboundPodsOnce(t *testing.T) {
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
	e := newEnv(t, true, hubObj, healthy("a", "b"), map[string][]client.Object{"a": pods}, nil)
	ref := fedref.FRS{Namespace: "default", Name: "web"}
	if err := e.targets.SetTargets(context.Background(), ref, 3, map[string]int32{"a": 4, "b": 2}); err != nil {
		t.Fatal(err)
	}
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: 4, Replicas: 4, FullyLabeledReplicas: 4, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "b", Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: 2, ReportedAt: now})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	tg, _, _ := e.targets.Targets(ref)
	if tg["a"] != 4 || tg["b"] != 2 {
		t.Fatalf("targets = %v, want a:4 b:2 (a has room for 4 pods of 2 cpu; 2 of its 4 are not bound yet)", tg)
	}
}
