package builder

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// What FRS builds is valid as the CRD schema states, whatever the options.
func TestFRSIsValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    *FRSBuilder
	}{
		{"plain", FRS("default", "web")},
		{"placement", FRS("ns", "api").Replicas(5).Clusters("a", "b").
			ClusterSelector(&metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}).
			Strategy(v1alpha1.StrategyAvailableCapacity).
			Toleration(v1alpha1.ClusterToleration{Key: "k", Operator: v1alpha1.TolerationExists}).
			MoveBudget(intstr.FromInt32(1), intstr.FromString("10%")).
			Failover(v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(0)})},
		{"orphan", FRS("ns", "o").DeletionPolicy(v1alpha1.DeletionPolicyOrphan).PropagateDependencies()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := tc.b.Obj().Validate(); len(errs) > 0 {
				t.Fatalf("built object is invalid: %v", errs)
			}
		})
	}
}

// Obj hands out copies: changing one does not change the builder or the
// next object.
func TestFRSObjIsACopy(t *testing.T) {
	b := FRS("default", "web").Annotation("a", "1")
	first := b.Obj()
	first.Annotations["a"] = "changed"
	first.Spec.Template.Labels["app"] = "changed"
	if diff := cmp.Diff(FRS("default", "web").Annotation("a", "1").Obj(), b.Obj()); diff != "" {
		t.Fatalf("builder changed through an object it returned (-want +got):\n%s", diff)
	}
}

func TestFRSClusterStatusSums(t *testing.T) {
	got := FRS("default", "web").ClusterStatus(
		v1alpha1.ClusterStatus{Name: "a", Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1},
		v1alpha1.ClusterStatus{Name: "b", Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4},
	).Obj().Status
	want := [3]int32{7, 6, 5}
	if have := [3]int32{got.Replicas, got.ReadyReplicas, got.AvailableReplicas}; have != want {
		t.Fatalf("totals (replicas, ready, available) = %v, want %v", have, want)
	}
}
