package history

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/rollout"
)

func rev(name string, n int64) rollout.Revision {
	return rollout.Revision{Name: name, Number: n}
}

func TestStale(t *testing.T) {
	revs := []rollout.Revision{rev("w-5", 5), rev("w-1", 1), rev("w-3", 3), rev("w-2", 2), rev("w-4", 4)}
	cases := []struct {
		name  string
		live  []string
		limit int32
		want  []string
	}{
		{name: "under the limit", live: []string{"w-5"}, limit: 10},
		{name: "exactly the limit", live: []string{"w-5"}, limit: 4},
		{name: "oldest numbers first", live: []string{"w-5"}, limit: 2, want: []string{"w-1", "w-2"}},
		{name: "live revisions never pruned", live: []string{"w-1", "w-5"}, limit: 1, want: []string{"w-2", "w-3"}},
		{name: "limit zero keeps live only", live: []string{"w-4", "w-5"}, limit: 0, want: []string{"w-1", "w-2", "w-3"}},
		{name: "negative limit read as zero", live: []string{"w-1", "w-2", "w-3", "w-4", "w-5"}, limit: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			live := map[string]bool{}
			for _, n := range tc.live {
				live[n] = true
			}
			if diff := cmp.Diff(tc.want, Stale(revs, live, tc.limit)); diff != "" {
				t.Errorf("Stale (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildDecodeRoundTrip(t *testing.T) {
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID("u1")}}
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web:2"}}},
	}
	in := rollout.Revision{Name: "web-bc2", Hash: "bc2", Number: 3, Template: tmpl}
	cr, err := Build(frs, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := cr.Labels[v1alpha1.LabelFederatedName]; got != "web" {
		t.Errorf("label %s = %q, want web", v1alpha1.LabelFederatedName, got)
	}
	if ref := metav1.GetControllerOf(cr); ref == nil || ref.UID != "u1" || ref.Kind != "FederatedReplicaSet" {
		t.Errorf("controller reference = %+v, want the FederatedReplicaSet u1", ref)
	}
	out, err := Decode(cr)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, out); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := Build(frs, rollout.Revision{Name: "web-x"}); err == nil {
		t.Error("Build of a revision without a template succeeded, want an error")
	}
}
