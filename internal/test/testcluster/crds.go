package testcluster

import (
	"context"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// InstallCRDs creates the CRDs (or leaves existing ones) and waits until each
// is Established, so clients can use the new resources at once.
func InstallCRDs(ctx context.Context, cfg *rest.Config, crds []*apiextensionsv1.CustomResourceDefinition) error {
	cs, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building apiextensions client: %w", err)
	}
	for _, crd := range crds {
		if _, err := cs.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd.DeepCopy(), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range crds {
		name := crd.Name
		err := waitFor(ctx, nil, "CRD "+name+" Established", func(ctx context.Context) error {
			got, err := cs.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range got.Status.Conditions {
				if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
					return nil
				}
			}
			return fmt.Errorf("not Established yet")
		})
		if err != nil {
			return err
		}
	}
	// Established is not yet discoverable: a client built right after
	// (its REST mapper reads discovery) failed with "no matches" on a
	// loaded machine. Wait until discovery serves every version.
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building discovery client: %w", err)
	}
	for _, crd := range crds {
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			gv, plural := crd.Spec.Group+"/"+v.Name, crd.Spec.Names.Plural
			err := waitFor(ctx, nil, "discovery of "+plural+"."+gv, func(context.Context) error {
				// The whole document, as a REST mapper reads it
				// (aggregated discovery), not only the group's endpoint.
				_, lists, err := dc.ServerGroupsAndResources()
				if err != nil {
					return err
				}
				for _, l := range lists {
					if l.GroupVersion != gv {
						continue
					}
					for _, r := range l.APIResources {
						if r.Name == plural {
							return nil
						}
					}
				}
				return fmt.Errorf("%s not in discovery yet", plural)
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}
