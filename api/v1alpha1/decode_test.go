package v1alpha1_test

import (
	"context"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// permissiveCRD is the FederatedReplicaSet CRD with a schema that admits
// anything, standing for an older or hand-edited CRD without today's rules.
func permissiveCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := crds.Load(crds.FederatedReplicaSetFile)
	if err != nil {
		t.Fatal(err)
	}
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
			Type: "object", XPreserveUnknownFields: ptr.To(true),
		}}
	}
	return crd
}

// An object the current schema would refuse, stored through a permissive
// CRD, decodes into the typed API with its neighbours: a typed List and a
// typed informer both see every object, and Validate names what is wrong
// with the bad one.
func TestBadObjectDecodesBesideGoodOnes(t *testing.T) {
	hub := testcluster.Start(t, testcluster.Options{Name: "permissive-hub", CRDs: []*apiextensionsv1.CustomResourceDefinition{permissiveCRD(t)}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	scheme := kubescheme.Must()
	c, err := client.New(hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string, spec map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": v1alpha1.GroupVersion.String(), "kind": "FederatedReplicaSet",
			"metadata": map[string]any{"name": name, "namespace": "default"},
			"spec":     spec,
		}}
		if err := c.Create(ctx, u); err != nil {
			t.Fatalf("creating %s through the permissive CRD: %v", name, err)
		}
	}
	spec := func(failover map[string]any) map[string]any {
		return map[string]any{
			"replicas": int64(2),
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx"}}},
			},
			"failover": failover,
		}
	}
	create("good", spec(map[string]any{"unreachableGracePeriod": "90s"}))
	create("days", spec(map[string]any{"unreachableGracePeriod": "3d", "unschedulableThreshold": int64(60)}))
	lower := spec(map[string]any{})
	lower["placement"] = map[string]any{"clusterSelector": map[string]any{
		"matchExpressions": []any{map[string]any{"key": "region", "operator": "in", "values": []any{"eu"}}}}}
	create(strings.Repeat("x", 69), lower)

	want := map[string][]string{
		"good":                  nil,
		"days":                  {"spec.failover.unreachableGracePeriod", "spec.failover.unschedulableThreshold"},
		strings.Repeat("x", 69): {"metadata.name", "spec.placement.clusterSelector.matchExpressions[0].operator"},
	}
	check := func(how string, items []v1alpha1.FederatedReplicaSet) {
		t.Helper()
		if len(items) != len(want) {
			t.Fatalf("%s: %d objects, want %d", how, len(items), len(want))
		}
		for i := range items {
			f := &items[i]
			var fields []string
			for _, e := range f.Validate() {
				fields = append(fields, e.Field)
			}
			if strings.Join(fields, " ") != strings.Join(want[f.Name], " ") {
				t.Errorf("%s: %s: Validate reports %v, want %v", how, f.Name, f.Validate().ToAggregate(), want[f.Name])
			}
		}
	}

	var list v1alpha1.FederatedReplicaSetList
	if err := c.List(ctx, &list, client.InNamespace("default")); err != nil {
		t.Fatalf("typed List: %v", err)
	}
	check("List", list.Items)

	// The hub reads FederatedReplicaSets through a typed informer; its
	// initial list must not fail on the bad objects either.
	informers, err := cache.New(hub.Config, cache.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	cctx, stop := context.WithCancel(ctx)
	defer stop()
	if _, err := informers.GetInformer(cctx, &v1alpha1.FederatedReplicaSet{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = informers.Start(cctx) }()
	if !informers.WaitForCacheSync(cctx) {
		t.Fatal("typed informer never synced")
	}
	var cached v1alpha1.FederatedReplicaSetList
	if err := informers.List(ctx, &cached); err != nil {
		t.Fatalf("informer List: %v", err)
	}
	check("informer", cached.Items)

	// A typed update of the bad object (as the hub adds its finalizer)
	// writes the bad value back unchanged.
	days := &v1alpha1.FederatedReplicaSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "days"}, days); err != nil {
		t.Fatal(err)
	}
	days.Finalizers = append(days.Finalizers, v1alpha1.FinalizerCascade)
	if err := c.Update(ctx, days); err != nil {
		t.Fatalf("typed update: %v", err)
	}
	raw := &unstructured.Unstructured{}
	raw.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FederatedReplicaSet"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "days"}, raw); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(raw.Object, "spec", "failover", "unreachableGracePeriod"); v != "3d" {
		t.Fatalf("unreachableGracePeriod after a typed update = %q, want 3d", v)
	}
}

// The CRD's rule on Duration fields and DurationPattern (which Check uses)
// must admit the same strings.
func TestDurationPatternInCRD(t *testing.T) {
	crd, err := crds.Load(crds.FederatedReplicaSetFile)
	if err != nil {
		t.Fatal(err)
	}
	failover := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["failover"]
	for _, name := range []string{"unreachableGracePeriod", "unschedulableThreshold"} {
		p := failover.Properties[name]
		if p.MaxLength == nil || *p.MaxLength != 64 {
			t.Errorf("%s: maxLength %v, want 64", name, p.MaxLength)
		}
		var rules []string
		for _, r := range p.XValidations {
			rules = append(rules, r.Rule)
		}
		if len(rules) != 2 || rules[0] != "self.matches('"+v1alpha1.DurationPattern+"')" ||
			!strings.Contains(rules[1], v1alpha1.DurationPattern) || !strings.Contains(rules[1], "duration('720h')") || v1alpha1.MaxFailoverDuration != 720*time.Hour {
			t.Errorf("%s: rules %q do not use DurationPattern and the 720h maximum", name, rules)
		}
	}
}
