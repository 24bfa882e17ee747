package e2e

import (
	"context"
	"os"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
)

func TestSmoke(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := fleet.New(ctx, fleet.Options{Members: []string{"member-a", "member-b", "member-c"}, Log: t.Logf})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Stop()
	raw, err := os.ReadFile("../examples/frontend.yaml")
	if err != nil {
		t.Fatal(err)
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := yaml.UnmarshalStrict(raw, frs); err != nil {
		t.Fatal(err)
	}
	if err := f.HubClient.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 60; i++ {
		time.Sleep(2 * time.Second)
		got := &v1alpha1.FederatedReplicaSet{}
		if err := f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		t.Logf("status: replicas=%d ready=%d clusters=%+v", got.Status.Replicas, got.Status.ReadyReplicas, got.Status.Clusters)
		if got.Status.ReadyReplicas == 8 {
			return
		}
	}
	for _, r := range f.Replicas {
		t.Logf("--- %s ---\n%s", r.ID, r.LogTail(6000))
	}
	t.Fatal("not ready")
}
