package charts

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/federation/memberaccess"
)

const memberChartDir = "replicafed-member"

type memberManifests struct {
	role    *rbacv1.ClusterRole
	binding *rbacv1.ClusterRoleBinding
	sa      *corev1.ServiceAccount
	secrets []*corev1.Secret
}

func renderMember(t *testing.T, flags ...string) *memberManifests {
	t.Helper()
	out, err := runHelm(t, append([]string{"template", "m", memberChartDir, "--namespace", "replicafed-system"}, flags...)...)
	if err != nil {
		t.Fatal(err)
	}
	m := &memberManifests{}
	for _, u := range yamlDocs(t, out) {
		var obj any
		switch kind, _ := u["kind"].(string); kind {
		case "ClusterRole":
			m.role = &rbacv1.ClusterRole{}
			obj = m.role
		case "ClusterRoleBinding":
			m.binding = &rbacv1.ClusterRoleBinding{}
			obj = m.binding
		case "ServiceAccount":
			m.sa = &corev1.ServiceAccount{}
			obj = m.sa
		case "Secret":
			s := &corev1.Secret{}
			m.secrets = append(m.secrets, s)
			obj = s
		default:
			t.Fatalf("unexpected kind %q rendered", kind)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u, obj, true); err != nil {
			t.Fatalf("decoding strictly: %v", err)
		}
	}
	if m.role == nil || m.binding == nil || m.sa == nil {
		t.Fatalf("member chart must render a ClusterRole, a ClusterRoleBinding and a ServiceAccount")
	}
	return m
}

// TestMemberChart checks the member chart grants exactly what
// federation/memberaccess defines, for both createNamespaces settings.
func TestMemberChart(t *testing.T) {
	if _, err := runHelm(t, "lint", memberChartDir); err != nil {
		t.Fatal(err)
	}
	for _, createNS := range []bool{true, false} {
		flags := []string{}
		if !createNS {
			flags = append(flags, "--set", "createNamespaces=false")
		}
		m := renderMember(t, flags...)
		want := memberaccess.Rules(memberaccess.RoleOptions{CreateNamespaces: createNS})
		if diff := cmp.Diff(want, m.role.Rules); diff != "" {
			t.Errorf("createNamespaces=%v: chart rules differ from memberaccess.Rules (-memberaccess +chart), run `make generate`:\n%s", createNS, diff)
		}
		b := m.binding
		if b.RoleRef.Name != m.role.Name || len(b.Subjects) != 1 || b.Subjects[0].Kind != rbacv1.ServiceAccountKind ||
			b.Subjects[0].Name != m.sa.Name || b.Subjects[0].Namespace != "replicafed-system" || m.sa.Namespace != "replicafed-system" {
			t.Errorf("binding %+v does not bind %s to ServiceAccount %s/%s", b, m.role.Name, m.sa.Namespace, m.sa.Name)
		}
		if m.sa.AutomountServiceAccountToken == nil || *m.sa.AutomountServiceAccountToken {
			t.Errorf("the member ServiceAccount must not be mounted into pods")
		}
		if len(m.secrets) != 0 {
			t.Errorf("token Secret rendered without tokenSecret.create")
		}
	}
	deps := renderMember(t, "--set", "propagateDependencies=true")
	want := memberaccess.Rules(memberaccess.RoleOptions{CreateNamespaces: true, PropagateDependencies: true})
	if diff := cmp.Diff(want, deps.role.Rules); diff != "" {
		t.Errorf("propagateDependencies=true: chart rules differ from memberaccess.Rules (-memberaccess +chart), run `make generate`:\n%s", diff)
	}
	m := renderMember(t, "--set", "tokenSecret.create=true")
	if len(m.secrets) != 1 || m.secrets[0].Type != corev1.SecretTypeServiceAccountToken ||
		m.secrets[0].Annotations[corev1.ServiceAccountNameKey] != m.sa.Name {
		t.Errorf("token Secret %+v", m.secrets)
	}
	// The CRD ships with the chart: the ClusterRole cannot create it.
	crd, err := crds.Load(crds.MemberReplicaSetFile)
	if err != nil {
		t.Fatal(err)
	}
	out, err := runHelm(t, "show", "crds", memberChartDir)
	if err != nil || !strings.Contains(out, "name: "+crd.Name) {
		t.Errorf("member chart CRDs: %v\n%s", err, out)
	}
}
