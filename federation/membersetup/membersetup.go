// Package membersetup prepares a member cluster when it joins: it installs or
// verifies the MemberReplicaSet CRD, then hands the member to the components
// that work in it. A member where the CRD cannot be installed (for example,
// missing permissions) is retried with backoff and reported through OnError,
// and is never handed on half-prepared.
package membersetup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"
)

// EnsureCRDs creates each CRD in the member, or updates it when its spec
// differs, and waits until it is Established.
func EnsureCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building apiextensions client: %w", err)
	}
	api := cs.ApiextensionsV1().CustomResourceDefinitions()
	for _, want := range crds {
		got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := api.Create(ctx, want.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating CRD %s: %w", want.Name, err)
			}
		case err != nil:
			return fmt.Errorf("reading CRD %s: %w", want.Name, err)
		default:
			if !specEqual(got, want) {
				upd := got.DeepCopy()
				upd.Spec = want.Spec
				if _, err := api.Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
					return fmt.Errorf("updating CRD %s: %w", want.Name, err)
				}
			}
		}
		err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := api.Get(ctx, want.Name, metav1.GetOptions{})
			if err != nil {
				return false, nil //nolint:nilerr // keep polling through transient errors
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be Established: %w", want.Name, err)
		}
	}
	return nil
}

func specEqual(a, b *apiextensionsv1.CustomResourceDefinition) bool {
	// Compare the versions' schemas and names only: the API server defaults
	// fields (conversion strategy, ...) that the generated file leaves empty.
	if a.Spec.Group != b.Spec.Group || a.Spec.Names.Kind != b.Spec.Names.Kind || len(a.Spec.Versions) != len(b.Spec.Versions) {
		return false
	}
	for i := range a.Spec.Versions {
		av, bv := a.Spec.Versions[i], b.Spec.Versions[i]
		if av.Name != bv.Name || av.Served != bv.Served || av.Storage != bv.Storage {
			return false
		}
		if (av.Schema == nil) != (bv.Schema == nil) {
			return false
		}
		if av.Schema != nil && !apiequality.Semantic.DeepEqual(av.Schema.OpenAPIV3Schema, bv.Schema.OpenAPIV3Schema) {
			return false
		}
	}
	return true
}

// Preparer is a multicluster.Aware that prepares each member, then engages
// the next components with it.
type Preparer struct {
	// CRDs to install in every member.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// Next are engaged once the member is prepared.
	Next []multicluster.Aware
	// OnError reports a member that cannot be prepared yet (it is retried).
	OnError func(cluster string, err error)
	// OnReady reports a member that was prepared.
	OnReady func(cluster string)
}

var _ multicluster.Aware = &Preparer{}

// Engage implements multicluster.Aware. It returns at once; preparation
// retries with backoff until it succeeds or the member leaves.
func (p *Preparer) Engage(ctx context.Context, name multicluster.ClusterName, cl cluster.Cluster) error {
	log := logr.FromContextOrDiscard(ctx).WithValues("cluster", string(name))
	go func() {
		backoff := wait.Backoff{Duration: time.Second, Factor: 2, Cap: time.Minute, Steps: 1 << 30}
		for {
			err := EnsureCRDs(ctx, cl.GetConfig(), p.CRDs)
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				return
			}
			log.Error(err, "Preparing member cluster failed; will retry")
			if p.OnError != nil {
				p.OnError(string(name), err)
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff.Step()):
			}
		}
		if p.OnReady != nil {
			p.OnReady(string(name))
		}
		var errs []error
		for _, n := range p.Next {
			if err := n.Engage(ctx, name, cl); err != nil {
				errs = append(errs, err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			log.Error(err, "Engaging member cluster failed")
		}
	}()
	return nil
}
