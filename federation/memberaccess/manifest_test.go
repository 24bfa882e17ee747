package memberaccess

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/crds"
)

const repoRoot = "../.."

// TestGeneratedFilesCurrent fails when the committed manifests or the member
// chart's ClusterRole template differ from Rules: run `make generate`.
func TestGeneratedFilesCurrent(t *testing.T) {
	files, err := GeneratedFiles()
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range files {
		got, err := os.ReadFile(filepath.Join(repoRoot, path))
		if err != nil {
			t.Fatalf("%s: %v (run `make generate`)", path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s is stale: run `make generate` and commit", path)
		}
	}
	crd, err := os.ReadFile(filepath.Join(repoRoot, "api/crds", crds.MemberReplicaSetFile))
	if err != nil {
		t.Fatal(err)
	}
	chartCRD, err := os.ReadFile(filepath.Join(repoRoot, ChartCRDFile))
	if err != nil || !bytes.Equal(crd, chartCRD) {
		t.Errorf("%s differs from api/crds (err %v): run `make generate`", ChartCRDFile, err)
	}
}

// TestManifestDecodes checks the committed manifest is the ClusterRole Rules
// describes, once decoded.
func TestManifestDecodes(t *testing.T) {
	for _, tc := range []struct {
		file string
		o    RoleOptions
	}{{ManifestFile, RoleOptions{CreateNamespaces: true}}, {ManifestNoNamespacesFile, RoleOptions{}},
		{ManifestDependenciesFile, RoleOptions{CreateNamespaces: true, PropagateDependencies: true}}} {
		raw, err := os.ReadFile(filepath.Join(repoRoot, tc.file))
		if err != nil {
			t.Fatal(err)
		}
		var cr rbacv1.ClusterRole
		if err := yaml.UnmarshalStrict(raw, &cr); err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		if cr.Kind != "ClusterRole" || cr.Name != ClusterRoleName || !equalRules(cr.Rules, Rules(tc.o)) {
			t.Errorf("%s: %s %s rules %+v; want Rules(%+v)", tc.file, cr.Kind, cr.Name, cr.Rules, tc.o)
		}
	}
}

func TestRules(t *testing.T) {
	with, without := Rules(RoleOptions{CreateNamespaces: true}), Rules(RoleOptions{})
	if len(with) != len(without)+1 || !equalRules(with[:len(without)], without) {
		t.Fatalf("CreateNamespaces must add exactly one rule, last")
	}
	deps := Rules(RoleOptions{CreateNamespaces: true, PropagateDependencies: true})
	if len(deps) != len(with)+1 || !equalRules(deps[:len(with)], with) || !equalRules(deps[len(with):], []rbacv1.PolicyRule{DependenciesRule()}) {
		t.Fatalf("PropagateDependencies must add exactly DependenciesRule, last")
	}
	if d := DependenciesRule(); !slices.Equal(d.Verbs, []string{"get", "list", "create", "update", "delete"}) ||
		!slices.Equal(d.Resources, []string{"configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims"}) ||
		!slices.Equal(d.APIGroups, []string{""}) || len(d.ResourceNames) != 0 {
		// No watch (no member informer of Secrets), no patch, nothing else.
		t.Errorf("DependenciesRule = %+v", d)
	}
	for _, r := range with {
		// Without PropagateDependencies the role never reads Secrets; it
		// never escalates, never uses wildcards, but for the resources of
		// the read-only metrics APIs, whose paths name any described
		// resource or external metric (as upstream's HPA controller role).
		metricsRead := slices.Equal(r.APIGroups, []string{"custom.metrics.k8s.io", "external.metrics.k8s.io"}) &&
			slices.Equal(r.Verbs, []string{"get", "list"}) && len(r.ResourceNames) == 0
		for _, list := range [][]string{r.APIGroups, r.Resources, r.Verbs, r.ResourceNames} {
			if slices.Contains(list, "*") && !(metricsRead && slices.Equal(list, r.Resources)) {
				t.Errorf("wildcard in %+v", r)
			}
		}
		if slices.Contains(r.Resources, "secrets") || slices.Contains(r.Verbs, "escalate") || slices.Contains(r.Verbs, "bind") || slices.Contains(r.Verbs, "impersonate") {
			t.Errorf("rule %+v grants too much", r)
		}
		if slices.Contains(r.Resources, "customresourcedefinitions") &&
			(!slices.Equal(r.ResourceNames, []string{"memberreplicasets.replicafed.io"}) || slices.Contains(r.Verbs, "create")) {
			t.Errorf("CRD rule %+v: want get/update on the MemberReplicaSet CRD by name only", r)
		}
		if slices.Contains(r.Resources, "namespaces") && !slices.Equal(r.Verbs, []string{"create"}) {
			t.Errorf("namespace rule %+v: want create only", r)
		}
	}
	if memberCRDName != "memberreplicasets.replicafed.io" {
		t.Errorf("memberCRDName = %q", memberCRDName)
	}
}
