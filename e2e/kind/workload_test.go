package kind

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
)

// both places on the two members with equal weights.
var both = v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{
	{Name: memberA, Weight: ptr.To[int32](1)}, {Name: memberB, Weight: ptr.To[int32](1)},
}}

// TestPlacementAndScale: a clusterSelector on the labels the members joined
// with puts every replica in the one region; equal weights split them, and
// scaling up and down keeps the split, every pod a Ready container.
func TestPlacementAndScale(t *testing.T) {
	e := newEnv(t, "kind-placement")
	e.create(frsSpec{name: "eu-only", replicas: 3, placement: v1alpha1.Placement{
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
	}})
	e.waitSplit("eu-only", split{memberA: 3})

	const name = "spread"
	e.create(frsSpec{name: name, replicas: 4, placement: both})
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	e.scale(name, 8)
	e.waitSplit(name, split{memberA: 4, memberB: 4})
	e.scale(name, 2)
	e.waitSplit(name, split{memberA: 1, memberB: 1})
}

// TestDeletion: deleting a FederatedReplicaSet with background propagation
// removes its pods and MemberReplicaSets from every member before the hub
// object goes; with orphan propagation the hub object and the
// MemberReplicaSets go and the very same pods keep running.
func TestDeletion(t *testing.T) {
	e := newEnv(t, "kind-deletion")
	ctx := context.Background()

	cascade := e.create(frsSpec{name: "cascade", replicas: 4, placement: both})
	e.waitSplit("cascade", split{memberA: 2, memberB: 2})
	if err := e.k.HubClient.Delete(ctx, cascade, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	start := time.Now()
	e.poll("cascade gone from the hub", func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.k.HubClient.Get(ctx, client.ObjectKeyFromObject(cascade), &v1alpha1.FederatedReplicaSet{})), nil
	})
	logf(t, "background deletion of 4 pods over 2 members took %s", time.Since(start).Round(100*time.Millisecond))
	for _, m := range e.members() {
		pods, err := e.pods(ctx, m, "cascade")
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 0 {
			t.Errorf("%s still has %d pods after the hub object is gone", m, len(pods))
		}
		err = e.k.MemberClients[m].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "cascade"}, &v1alpha1.MemberReplicaSet{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: MemberReplicaSet still there after the hub object is gone (err %v)", m, err)
		}
	}

	orphan := e.create(frsSpec{name: "orphan", replicas: 4, placement: both})
	e.waitSplit("orphan", split{memberA: 2, memberB: 2})
	t.Cleanup(func() {
		for _, m := range e.members() {
			pods, _ := e.pods(context.Background(), m, "orphan")
			for i := range pods {
				_ = e.k.MemberClients[m].Delete(context.Background(), &pods[i])
			}
		}
	})
	before := map[string]bool{}
	for _, m := range e.members() {
		pods, err := e.pods(ctx, m, "orphan")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			before[string(p.UID)] = true
		}
	}
	if err := e.k.HubClient.Delete(ctx, orphan, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("deleting with orphan propagation: %v", err)
	}
	e.poll("orphan and its MemberReplicaSets gone", func(ctx context.Context) (bool, error) {
		if !apierrors.IsNotFound(e.k.HubClient.Get(ctx, client.ObjectKeyFromObject(orphan), &v1alpha1.FederatedReplicaSet{})) {
			return false, nil
		}
		for _, m := range e.members() {
			err := e.k.MemberClients[m].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "orphan"}, &v1alpha1.MemberReplicaSet{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	after := 0
	for _, m := range e.members() {
		pods, err := e.pods(ctx, m, "orphan")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if !before[string(p.UID)] || !podstate.IsActive(&p) || !podstate.IsReady(&p) {
				t.Errorf("%s: pod %s (%s) after orphan deletion; want only the pods from before, running", m, p.Name, p.UID)
				continue
			}
			if c := metav1.GetControllerOf(&p); c != nil {
				t.Errorf("%s: orphaned pod %s still has controller %s/%s", m, p.Name, c.Kind, c.Name)
			}
			after++
		}
	}
	if after != len(before) {
		t.Errorf("%d of the %d pods still run after orphan deletion; want all", after, len(before))
	}
}
