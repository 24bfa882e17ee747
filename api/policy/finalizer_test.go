package policy_test

import (
	"context"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/test/hubpolicy"
)

func TestFinalizerPolicyDecodes(t *testing.T) {
	pol, bind, err := policy.Finalizer()
	if err != nil {
		t.Fatal(err)
	}
	if pol.Name != policy.FinalizerPolicyName {
		t.Errorf("policy named %q, want FinalizerPolicyName %q", pol.Name, policy.FinalizerPolicyName)
	}
	if bind.Spec.PolicyName != pol.Name || len(pol.Spec.Mutations) != 1 {
		t.Fatalf("binding %q for policy %q with %d mutations", bind.Spec.PolicyName, pol.Name, len(pol.Spec.Mutations))
	}
}

// TestFinalizerPolicyOnRealHub checks on a real kube-apiserver that the
// policy adds the cascade finalizer on create and keeps it through updates,
// keeps other finalizers, and lets a deletion release it.
func TestFinalizerPolicyOnRealHub(t *testing.T) {
	ctx, cl := startHub(t)
	// Written before the policy: it stays without the finalizer (the
	// controller adds it) and stays writable.
	before := frs("before-policy")
	if err := cl.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	installFinalizerPolicy(ctx, t, cl)

	t.Run("create", func(t *testing.T) {
		obj := frs("created")
		obj.Finalizers = []string{"example.com/keep"}
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		wantFinalizers(t, obj.Finalizers, "example.com/keep", v1alpha1.FinalizerCascade)
	})
	t.Run("update that drops it", func(t *testing.T) {
		obj := &v1alpha1.FederatedReplicaSet{}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "created"}, obj); err != nil {
			t.Fatal(err)
		}
		obj.Finalizers = nil
		if err := cl.Update(ctx, obj); err != nil {
			t.Fatal(err)
		}
		wantFinalizers(t, obj.Finalizers, v1alpha1.FinalizerCascade)
	})
	t.Run("object from before the policy, updated", func(t *testing.T) {
		patch := []byte(`{"metadata":{"labels":{"touched":"yes"}}}`)
		if err := cl.Patch(ctx, before, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatal(err)
		}
		wantFinalizers(t, before.Finalizers, v1alpha1.FinalizerCascade)
	})
	t.Run("deletion releases it", func(t *testing.T) {
		obj := frs("deleted")
		if err := cl.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
		if err := cl.Delete(ctx, obj); err != nil {
			t.Fatal(err)
		}
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if err := cl.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch)); err != nil {
			t.Fatalf("releasing the finalizer of a deleted object: %v", err)
		}
		err := cl.Get(ctx, client.ObjectKeyFromObject(obj), &v1alpha1.FederatedReplicaSet{})
		if !apierrors.IsNotFound(err) {
			t.Fatalf("object still there after its finalizer was released (err %v, finalizers %v)", err, obj.Finalizers)
		}
	})
}

// installFinalizerPolicy installs the policy and waits until the API server
// applies it (policies reach the admission plugin through an informer).
func installFinalizerPolicy(ctx context.Context, t *testing.T, cl client.Client) {
	t.Helper()
	pol, bind, err := policy.Finalizer()
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Create(ctx, pol); err != nil {
		t.Fatalf("creating policy: %v", err)
	}
	if err := cl.Create(ctx, bind); err != nil {
		t.Fatalf("creating binding: %v", err)
	}
	if err := hubpolicy.WaitFinalizer(ctx, cl, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func wantFinalizers(t *testing.T, got []string, want ...string) {
	t.Helper()
	if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(want))) {
		t.Fatalf("finalizers %v, want %v", got, want)
	}
}
