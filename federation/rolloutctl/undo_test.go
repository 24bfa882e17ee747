package rolloutctl

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/history"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

// TestUndoRetriesAConflict: a conflict from a write that left the template
// alone (the hub writing status) is tried again and the undo lands; one
// from another template change is not overwritten.
func TestUndoRetriesAConflict(t *testing.T) {
	for _, tc := range []struct {
		name string
		// meanwhile runs before the first patch is refused as a conflict.
		meanwhile func(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet) error
		wantErr   error
		wantImage string
	}{
		{"status written meanwhile", func(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet) error {
			frs.Status.ObservedGeneration++
			return c.Status().Update(ctx, frs)
		}, nil, "web:1"},
		{"template changed meanwhile", func(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet) error {
			frs.Spec.Template = *tmpl("web:3")
			return c.Update(ctx, frs)
		}, ErrTemplateChanged, "web:3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			frs := frsWith(v1alpha1.UpdateRolling, nil)
			frs.UID = "u1"
			frs.Spec.Template = *tmpl("web:2")
			scheme, err := kubescheme.New()
			if err != nil {
				t.Fatal(err)
			}
			base := fake.NewClientBuilder().WithScheme(scheme).WithObjects(frs).WithStatusSubresource(frs).Build()
			for i, image := range []string{"web:1", "web:2"} {
				rev := rollout.Revision{Name: "web-" + image[4:], Hash: image[4:], Number: int64(i + 1), Template: tmpl(image)}
				if err := history.Record(ctx, base, frs, rev); err != nil {
					t.Fatal(err)
				}
			}
			patches := 0
			c := interceptor.NewClient(base, interceptor.Funcs{
				Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if patches++; patches == 1 {
						cur := &v1alpha1.FederatedReplicaSet{}
						if err := cl.Get(ctx, client.ObjectKeyFromObject(obj), cur); err != nil {
							return err
						}
						if err := tc.meanwhile(ctx, cl, cur); err != nil {
							return err
						}
						return apierrors.NewConflict(schema.GroupResource{Group: "replicafed.io", Resource: "federatedreplicasets"}, obj.GetName(), errors.New("modified"))
					}
					return cl.Patch(ctx, obj, patch, opts...)
				},
			})
			key := types.NamespacedName{Namespace: frs.Namespace, Name: frs.Name}
			_, err = Undo(ctx, c, key, 0)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("Undo error = %v, want %v", err, tc.wantErr)
			}
			got := &v1alpha1.FederatedReplicaSet{}
			if err := base.Get(ctx, key, got); err != nil {
				t.Fatal(err)
			}
			if image := got.Spec.Template.Spec.Containers[0].Image; image != tc.wantImage {
				t.Errorf("template image %s, want %s", image, tc.wantImage)
			}
		})
	}
}
