package memberaccess

import (
	"context"
	"errors"
	"slices"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
)

func TestPlacements(t *testing.T) {
	frs := func(ns, name string, rows ...v1alpha1.ClusterStatus) *v1alpha1.FederatedReplicaSet {
		return builder.FRS(ns, name).ClusterStatus(rows...).Obj()
	}
	objs := []client.Object{
		frs("b", "targeted", v1alpha1.ClusterStatus{Name: "m", Target: 2}),
		frs("a", "leftover", v1alpha1.ClusterStatus{Name: "m", Replicas: 1}), // target 0, pods still there
		frs("a", "drained", v1alpha1.ClusterStatus{Name: "m"}),
		frs("a", "elsewhere", v1alpha1.ClusterStatus{Name: "other", Target: 3}),
		frs("a", "none"),
	}
	c := fake.NewClientBuilder().WithScheme(kubescheme.Must()).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	got, err := Placements(context.Background(), c, "m")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a/leftover", "b/targeted"}; !slices.Equal(got, want) {
		t.Fatalf("Placements = %v, want %v", got, want)
	}

	failing := fake.NewClientBuilder().WithScheme(kubescheme.Must()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("boom")
		},
	}).Build()
	if _, err := Placements(context.Background(), failing, "m"); err == nil {
		t.Fatal("a failed list must not look like an unused member")
	}
}
