package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

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

type plugin struct {
	t          *testing.T
	kubeconfig string
}

// run runs the plugin as kubectl would and returns what it printed.
func (p plugin) run(args ...string) (string, error) {
	var out bytes.Buffer
	root := newRoot(&out)
	root.SetErr(&out)
	root.SetArgs(append(args, "--kubeconfig", p.kubeconfig, "-n", "shop"))
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func (p plugin) must(want string, args ...string) {
	p.t.Helper()
	out, err := p.run(args...)
	if err != nil {
		p.t.Fatalf("kubectl replicafed %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if !strings.Contains(out, want) {
		p.t.Fatalf("kubectl replicafed %s printed %q, want it to contain %q", strings.Join(args, " "), out, want)
	}
}

func rollingFRS() *v1alpha1.FederatedReplicaSet {
	return builder.FRS("shop", "web").Replicas(3).Clusters("member-a", "member-b").Edit(func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Template.Spec.Containers[0].Image = "web:2"
		f.Spec.UpdateStrategy = &v1alpha1.UpdateStrategy{
			Type:   v1alpha1.UpdateRolling,
			Stages: []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{"member-a"}, Promotion: v1alpha1.PromotionManual}, {Name: "rest"}},
		}
	}).Obj()
}

// Every command of the plugin against a real API server: history lists the
// kept revisions, promote sets the annotation for the waiting stage, pause
// and resume flip spec.updateStrategy.paused, undo restores the previous
// template and then a named one.
func TestPluginCommands(t *testing.T) {
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
	frs := rollingFRS()
	if err := cl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	for i, img := range []string{"web:1", "web:2"} {
		tm := frs.Spec.Template.DeepCopy()
		tm.Spec.Containers[0].Image = img
		id, err := rollout.Identify(frs.Name, tm, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		id.Revision.Number = int64(i + 1)
		if err := history.Record(ctx, cl, frs, id.Revision); err != nil {
			t.Fatal(err)
		}
	}
	frs.Status.Rollout = &v1alpha1.RolloutStatus{Phase: v1alpha1.PhaseAwaitingPromotion, StageName: "canary"}
	if err := cl.Status().Update(ctx, frs); err != nil {
		t.Fatal(err)
	}
	p := plugin{t: t, kubeconfig: c.Kubeconfig}

	p.must("web:2", "history", "web")
	p.must(`stage "canary" promoted`, "promote", "web")
	p.must("web paused", "pause", "web")
	p.must("already paused", "pause", "web")
	got := get(ctx, t, cl)
	if got.Annotations[v1alpha1.AnnotationPromote] != "canary" || !got.Spec.UpdateStrategy.Paused {
		t.Fatalf("after promote and pause: annotation %q paused %t, want canary true", got.Annotations[v1alpha1.AnnotationPromote], got.Spec.UpdateStrategy.Paused)
	}
	p.must("web resumed", "resume", "web")
	p.must("rolled back to revision 1", "undo", "web")
	if img := get(ctx, t, cl).Spec.Template.Spec.Containers[0].Image; img != "web:1" {
		t.Fatalf("after undo the image is %s, want web:1", img)
	}
	p.must("rolled back to revision 2", "undo", "web", "--to-revision", "2")
	got = get(ctx, t, cl)
	if got.Spec.Template.Spec.Containers[0].Image != "web:2" || got.Spec.UpdateStrategy.Paused {
		t.Fatalf("after undo --to-revision 2 and resume: image %s paused %t, want web:2 false", got.Spec.Template.Spec.Containers[0].Image, got.Spec.UpdateStrategy.Paused)
	}
	if out, err := p.run("undo", "web", "--to-revision", "7"); err == nil || !strings.Contains(err.Error(), "kept: 1, 2") {
		t.Errorf("undo to a missing revision: err = %v (%s), want one naming the kept revisions", err, out)
	}
	if out, err := p.run("promote", "web", "eu"); err == nil || !strings.Contains(err.Error(), `no stage "eu"`) {
		t.Errorf("promote of an unknown stage: err = %v (%s), want no stage \"eu\"", err, out)
	}
	if out, err := p.run("pause", "missing"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("pause of a missing object: err = %v (%s), want not found", err, out)
	}
}

func get(ctx context.Context, t *testing.T, cl client.Client) *v1alpha1.FederatedReplicaSet {
	t.Helper()
	var f v1alpha1.FederatedReplicaSet
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "shop", Name: "web"}, &f); err != nil {
		t.Fatal(err)
	}
	return &f
}
