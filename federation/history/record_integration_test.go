package history_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/history"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

func image(frs *v1alpha1.FederatedReplicaSet, img string) rollout.Revision {
	t := frs.Spec.Template.DeepCopy()
	t.Spec.Containers[0].Image = img
	id, err := rollout.Identify(frs.Name, t, 0, nil)
	if err != nil {
		panic(err)
	}
	return id.Revision
}

func names(revs []rollout.Revision) []string {
	var out []string
	for _, r := range revs {
		out = append(out, r.Name)
	}
	return out
}

// Against a real API server: records are created once, renumbered when an
// old template comes back, refused on a name collision, listed for their
// owner only, and pruned oldest first without touching live revisions.
func TestRecordListPrune(t *testing.T) {
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Name: "hub", CRDs: hubCRDs})
	cl, err := client.New(c.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}}); err != nil {
		t.Fatal(err)
	}
	frs := builder.FRS("shop", "web").Obj()
	if err := cl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	other := builder.FRS("shop", "web-other").Obj()
	if err := cl.Create(ctx, other); err != nil {
		t.Fatal(err)
	}

	var revs []rollout.Revision
	for i, img := range []string{"web:1", "web:2", "web:3", "web:4"} {
		r := image(frs, img)
		r.Number = int64(i + 1)
		revs = append(revs, r)
		if err := history.Record(ctx, cl, frs, r); err != nil {
			t.Fatalf("recording %s: %v", r.Name, err)
		}
	}
	// The same record again changes nothing; web:1 coming back as
	// revision 5 renumbers its record.
	if err := history.Record(ctx, cl, frs, revs[1]); err != nil {
		t.Fatalf("recording %s twice: %v", revs[1].Name, err)
	}
	back := revs[0]
	back.Number = 5
	if err := history.Record(ctx, cl, frs, back); err != nil {
		t.Fatalf("renumbering %s: %v", back.Name, err)
	}
	// A record of another FRS is not in web's history.
	if err := history.Record(ctx, cl, other, image(other, "other:1")); err != nil {
		t.Fatal(err)
	}

	got, err := history.List(ctx, cl, frs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{revs[1].Name, revs[2].Name, revs[3].Name, revs[0].Name}
	if diff := cmp.Diff(want, names(got)); diff != "" {
		t.Errorf("List after renumbering (-want +got):\n%s", diff)
	}
	if got[3].Number != 5 || got[3].Template.Spec.Containers[0].Image != "web:1" {
		t.Errorf("renumbered record = number %d image %s, want 5 web:1", got[3].Number, got[3].Template.Spec.Containers[0].Image)
	}

	collide := revs[2]
	collide.Template = revs[3].Template
	if err := history.Record(ctx, cl, frs, collide); !errors.Is(err, history.ErrCollision) {
		t.Errorf("recording another template under %s: err = %v, want ErrCollision", collide.Name, err)
	}

	live := map[string]bool{revs[0].Name: true, revs[1].Name: true}
	n, err := history.Prune(ctx, cl, frs, live, 1)
	if err != nil || n != 1 {
		t.Fatalf("Prune = %d, %v; want 1 deleted", n, err)
	}
	var left appsv1.ControllerRevisionList
	if err := cl.List(ctx, &left, client.InNamespace("shop")); err != nil {
		t.Fatal(err)
	}
	var leftNames []string
	for _, cr := range left.Items {
		leftNames = append(leftNames, cr.Name)
	}
	wantLeft := []string{revs[0].Name, revs[1].Name, revs[3].Name, image(other, "other:1").Name}
	if diff := cmp.Diff(wantLeft, leftNames, sortStrings); diff != "" {
		t.Errorf("records after Prune (-want +got):\n%s", diff)
	}
}
