// Package memberaccess gives replicafed least-privilege access to a member
// cluster and registers that member with the hub.
//
// The member ClusterRole is defined once, here (Rules); the committed
// manifests in deploy/member and the charts/replicafed-member chart are
// rendered from it and tests keep them in sync. Grant provisions the role, a
// ServiceAccount bound to it and a token in a member and returns a kubeconfig
// carrying that token; Join and Unjoin add the hub side (the labelled
// kubeconfig Secret the registry watches).
package memberaccess

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/crds"
)

// Defaults for the member side.
const (
	// DefaultNamespace holds the ServiceAccount in each member.
	DefaultNamespace = "replicafed-system"
	// DefaultServiceAccount is the member ServiceAccount's name.
	DefaultServiceAccount = "replicafed"
	// ClusterRoleName names the member ClusterRole and its binding.
	ClusterRoleName = "replicafed-member"
)

// Labels put on every object Grant creates, so an operator can find them.
var Labels = map[string]string{
	"app.kubernetes.io/name":       "replicafed-member",
	"app.kubernetes.io/part-of":    "replicafed",
	"app.kubernetes.io/managed-by": "replicafed",
}

// RoleOptions select the optional rules.
type RoleOptions struct {
	// CreateNamespaces matches controller.createNamespaces: the member engine
	// creates a FederatedReplicaSet's namespace when the member lacks it.
	CreateNamespaces bool
	// PropagateDependencies lets the hub copy the ConfigMaps, Secrets,
	// ServiceAccounts and PersistentVolumeClaims of FederatedReplicaSets
	// with spec.propagateDependencies into the member (DependenciesRule).
	PropagateDependencies bool
}

// memberCRDName is the one CRD replicafed reads and updates in a member.
var memberCRDName = func() string {
	// The name is fixed by the group and plural; deriving it from the
	// embedded CRD keeps the two from drifting apart.
	crd, err := crds.Load(crds.MemberReplicaSetFile)
	if err != nil {
		panic(err)
	}
	return crd.Name
}()

// Rules returns exactly the access replicafed uses in a member:
//
//   - pods: the member engine's informer (list, watch), creations, deletions
//     with a UID precondition, adoption/release patches; the raft leader
//     lists pods live to settle reservations.
//   - nodes: the capacity estimate's informer (list, watch).
//   - events.k8s.io events: the engine's recorder (create, patch).
//   - memberreplicasets: the engine creates, updates and watches them, the
//     hub deletes them when a FederatedReplicaSet goes; status is written by
//     the engine; finalizers/update lets pods set blockOwnerDeletion on their
//     owner reference where OwnerReferencesPermissionEnforcement is enabled.
//   - the MemberReplicaSet CRD, by name: get (is it there and Established) and
//     update (a newer schema). Creating a CRD cannot be limited by
//     resourceNames (the name is not known at authorization time), so the role
//     does not grant it: whoever grants access (Grant, `replicafed join`, the
//     replicafed-member chart) installs the CRD with their own credentials.
//   - metrics.k8s.io pods: list, the autoscaler's reads of the pods' usage;
//     custom.metrics.k8s.io and external.metrics.k8s.io (any resource, as
//     metric paths name the described resource): get and list, its reads of
//     Pods, Object and External metrics where a member serves them;
//     autoscaling horizontalpodautoscalers: list, to find (and report, never
//     fight) a member HPA on a MemberReplicaSet. Read-only.
//   - namespaces: create, only with CreateNamespaces.
//   - configmaps, secrets, serviceaccounts, persistentvolumeclaims: only
//     with PropagateDependencies (DependenciesRule).
//   - GET /readyz: the health probe (already allowed to everyone by the
//     default system:public-info-viewer role; listed so the role is complete).
func Rules(o RoleOptions) []rbacv1.PolicyRule {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"list", "watch", "create", "delete", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{"replicafed.io"}, Resources: []string{"memberreplicasets"}, Verbs: []string{"get", "list", "watch", "create", "update", "delete"}},
		{APIGroups: []string{"replicafed.io"}, Resources: []string{"memberreplicasets/status"}, Verbs: []string{"update"}},
		{APIGroups: []string{"replicafed.io"}, Resources: []string{"memberreplicasets/finalizers"}, Verbs: []string{"update"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, ResourceNames: []string{memberCRDName}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"pods"}, Verbs: []string{"list"}},
		{APIGroups: []string{"custom.metrics.k8s.io", "external.metrics.k8s.io"}, Resources: []string{"*"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"autoscaling"}, Resources: []string{"horizontalpodautoscalers"}, Verbs: []string{"list"}},
		{NonResourceURLs: []string{"/readyz"}, Verbs: []string{"get"}},
	}
	// Last, so the chart template can wrap each in one condition.
	if o.CreateNamespaces {
		rules = append(rules, NamespaceRule())
	}
	if o.PropagateDependencies {
		rules = append(rules, DependenciesRule())
	}
	return rules
}

// DependenciesRule is the rule RoleOptions.PropagateDependencies adds: the
// hub copies the objects a template references into the member, so it
// reads them (get: the engine checks they exist before creating pods, by
// metadata only; list: the copies, found by their replicafed.io/dependency
// label), creates, updates and deletes its copies. It never changes an
// object without that label. Reading Secrets in a member adds little to
// what creating pods there already allows (a pod may mount any Secret of
// its namespace), which is why the role can hold it; it is still off unless
// asked for.
func DependenciesRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims"},
		Verbs: []string{"get", "list", "create", "update", "delete"}}
}

// NamespaceRule is the rule RoleOptions.CreateNamespaces adds.
func NamespaceRule() rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}
}

// ClusterRole returns the member ClusterRole.
func ClusterRole(o RoleOptions) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: ClusterRoleName, Labels: copyLabels()},
		Rules:      Rules(o),
	}
}

func copyLabels() map[string]string {
	out := make(map[string]string, len(Labels))
	for k, v := range Labels {
		out[k] = v
	}
	return out
}
