package memberaccess

import (
	"bytes"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/crds"
)

// Generated files, relative to the repository root. `make generate` writes
// them (hack/memberrbac) and tests check they match Rules.
const (
	ManifestFile              = "deploy/member/clusterrole.yaml"
	ManifestNoNamespacesFile  = "deploy/member/clusterrole-no-namespaces.yaml"
	ManifestDependenciesFile  = "deploy/member/clusterrole-propagate-dependencies.yaml"
	ChartClusterRoleTemplate  = "charts/replicafed-member/templates/clusterrole.yaml"
	generatedHeader           = "# Generated from federation/memberaccess.Rules by `make generate`; do not edit.\n"
	chartGeneratedHeaderLines = "{{- /* Generated from federation/memberaccess.Rules by `make generate`; do not edit. */}}\n"
)

// Manifest renders the member ClusterRole as a YAML document.
func Manifest(o RoleOptions) ([]byte, error) {
	body, err := yaml.Marshal(ClusterRole(o))
	if err != nil {
		return nil, fmt.Errorf("rendering member ClusterRole: %w", err)
	}
	desc := fmt.Sprintf("# The ClusterRole replicafed needs in a member cluster (controller.createNamespaces: %t).\n", o.CreateNamespaces)
	if o.PropagateDependencies {
		desc = fmt.Sprintf("# The ClusterRole replicafed needs in a member cluster (controller.createNamespaces: %t), with the\n", o.CreateNamespaces) +
			"# dependency rule for FederatedReplicaSets with spec.propagateDependencies.\n"
	}
	return append([]byte(generatedHeader+desc), body...), nil
}

// ChartTemplate renders the replicafed-member chart's ClusterRole template:
// the same rules, with the namespace rule under .Values.createNamespaces.
func ChartTemplate() ([]byte, error) {
	base, err := yaml.Marshal(Rules(RoleOptions{}))
	if err != nil {
		return nil, fmt.Errorf("rendering member ClusterRole rules: %w", err)
	}
	ns, err := yaml.Marshal([]rbacv1.PolicyRule{NamespaceRule()})
	if err != nil {
		return nil, fmt.Errorf("rendering member namespace rule: %w", err)
	}
	deps, err := yaml.Marshal([]rbacv1.PolicyRule{DependenciesRule()})
	if err != nil {
		return nil, fmt.Errorf("rendering member dependency rule: %w", err)
	}
	var b bytes.Buffer
	b.WriteString(chartGeneratedHeaderLines)
	b.WriteString("apiVersion: rbac.authorization.k8s.io/v1\n")
	b.WriteString("kind: ClusterRole\n")
	b.WriteString("metadata:\n")
	b.WriteString("  name: {{ include \"replicafed-member.clusterRoleName\" . }}\n")
	b.WriteString("  labels:\n")
	b.WriteString("    {{- include \"replicafed-member.labels\" . | nindent 4 }}\n")
	b.WriteString("rules:\n")
	b.Write(base)
	b.WriteString("{{- if .Values.createNamespaces }}\n")
	b.Write(ns)
	b.WriteString("{{- end }}\n")
	b.WriteString("{{- if .Values.propagateDependencies }}\n")
	b.Write(deps)
	b.WriteString("{{- end }}\n")
	return b.Bytes(), nil
}

// ChartCRDFile is the replicafed-member chart's copy of the MemberReplicaSet
// CRD; `make generate` copies it from api/crds.
const ChartCRDFile = "charts/replicafed-member/crds/" + crds.MemberReplicaSetFile

// GeneratedFiles returns every generated file by path relative to the
// repository root: the three manifests and the chart's ClusterRole template.
func GeneratedFiles() (map[string][]byte, error) {
	out := map[string][]byte{}
	var err error
	if out[ManifestFile], err = Manifest(RoleOptions{CreateNamespaces: true}); err != nil {
		return nil, err
	}
	if out[ManifestNoNamespacesFile], err = Manifest(RoleOptions{}); err != nil {
		return nil, err
	}
	if out[ManifestDependenciesFile], err = Manifest(RoleOptions{CreateNamespaces: true, PropagateDependencies: true}); err != nil {
		return nil, err
	}
	if out[ChartClusterRoleTemplate], err = ChartTemplate(); err != nil {
		return nil, err
	}
	return out, nil
}
