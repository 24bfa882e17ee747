// Package hubpolicy waits for a hub's admission policies to take effect.
// The finalizer policy mutates with the object's schema, which the API
// server learns from its own OpenAPI a few seconds after a CRD is first
// established; until then a create it matches is refused as unavailable
// (failurePolicy does not cover that), so a fixture that installs the CRD
// and the policy waits here before anyone creates FederatedReplicaSets.
package hubpolicy

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/test/builder"
)

// WaitFinalizer returns once the hub's finalizer policy adds the cascade
// finalizer to a (dry-run) FederatedReplicaSet created in namespace
// "default", or at once when the hub has no such policy. It gives up
// after timeout, with the last answer.
func WaitFinalizer(ctx context.Context, c client.Client, timeout time.Duration) error {
	err := c.Get(ctx, client.ObjectKey{Name: policy.FinalizerPolicyName}, &admissionregistrationv1.MutatingAdmissionPolicy{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the finalizer policy: %w", err)
	}
	last := "no answer yet"
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		finalizers, err := Probe(ctx, c)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = fmt.Sprintf("created without the finalizer: %v", finalizers)
		return slices.Contains(finalizers, v1alpha1.FinalizerCascade), nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the finalizer policy to apply: %w (last: %s)", err, last)
	}
	return nil
}

// Probe dry-run creates a FederatedReplicaSet in namespace "default" once
// and returns the finalizers the hub's admission gave it. Nothing is
// stored, so callers may probe as often as they like.
func Probe(ctx context.Context, c client.Client) ([]string, error) {
	probe := builder.FRS("default", "finalizer-policy-probe").Obj()
	if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
		return nil, fmt.Errorf("dry-run create of a FederatedReplicaSet: %w", err)
	}
	return probe.Finalizers, nil
}
