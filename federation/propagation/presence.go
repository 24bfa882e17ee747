package propagation

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/engine"
)

// Presence is the member engine's DependencyChecker: one metadata-only GET
// per dependency, so no Secret data is read and no member-wide informer of
// Secrets or ConfigMaps is started. It runs only when the engine is about
// to create pods. An object counts whoever made it: a copy, or the member's
// own object of that name (which replicafed leaves alone).
type Presence struct {
	// Reader reads the member live (cluster.GetAPIReader()).
	Reader client.Reader
}

var _ engine.DependencyChecker = Presence{}

// Missing implements engine.DependencyChecker.
func (p Presence) Missing(ctx context.Context, namespace string, refs []dependencies.Ref) ([]dependencies.Ref, error) {
	var missing []dependencies.Ref
	for _, r := range refs {
		if err := dependencies.CheckName(r.Name); err != nil {
			// Never looked up: the name could address another namespace.
			return nil, fmt.Errorf("checking %s: %w", r.Kind, err)
		}
		obj := metadataOf(r.Kind)
		err := p.Reader.Get(ctx, types.NamespacedName{Namespace: namespace, Name: r.Name}, obj)
		switch {
		case apierrors.IsNotFound(err):
			missing = append(missing, r)
		case err != nil:
			return nil, fmt.Errorf("checking %s in namespace %s: %w", r, namespace, err)
		}
	}
	return missing, nil
}

// metadataOf returns an empty metadata-only object of kind.
func metadataOf(kind dependencies.Kind) *metav1.PartialObjectMetadata {
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(gvk(kind))
	return obj
}

// metadataListOf returns an empty metadata-only list of kind.
func metadataListOf(kind dependencies.Kind) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(gvk(kind).GroupVersion().WithKind(string(kind) + "List"))
	return l
}
