package charts

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/replicafed/replicafed/api/policy"
)

// policy returns the rendered policy of that name and the binding naming it.
func (m *manifests) policy(name string) (*admissionv1.ValidatingAdmissionPolicy, *admissionv1.ValidatingAdmissionPolicyBinding) {
	var pol *admissionv1.ValidatingAdmissionPolicy
	var bind *admissionv1.ValidatingAdmissionPolicyBinding
	for _, p := range m.policies {
		if p.Name == name {
			pol = p
		}
	}
	for _, b := range m.policyBindings {
		if b.Spec.PolicyName == name {
			bind = b
		}
	}
	return pol, bind
}

// TestPodSecurityPolicy renders each level and compares the policies with
// api/policy, the source the real-API-server test exercises.
func TestPodSecurityPolicy(t *testing.T) {
	for _, level := range []policy.Level{policy.LevelPrivileged, policy.LevelBaseline, policy.LevelRestricted} {
		t.Run(string(level), func(t *testing.T) {
			flags := []string{"--set", "podSecurity.level=" + string(level)}
			if level == policy.LevelBaseline {
				flags = nil // the default
			}
			m := template(t, flags...)
			want, _, err := policy.PodSecurity(level)
			if err != nil {
				t.Fatal(err)
			}
			// The selector policy is always there.
			if len(m.policies) != len(want)+1 || len(m.policyBindings) != len(want)+1 {
				t.Fatalf("%d policies and %d bindings; want %d each", len(m.policies), len(m.policyBindings), len(want)+1)
			}
			for _, w := range want {
				got, bind := m.policy(w.Name)
				if got == nil || bind == nil {
					t.Fatalf("policy %s or its binding not rendered", w.Name)
				}
				if diff := cmp.Diff(w.Spec, got.Spec); diff != "" {
					t.Errorf("policy %s differs from api/policy (-api/policy +chart), run `make generate`:\n%s", w.Name, diff)
				}
				if !slices.Equal(bind.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Deny}) || bind.Spec.MatchResources != nil {
					t.Errorf("binding %s: %+v; want Deny everywhere", bind.Name, bind.Spec)
				}
			}
		})
	}
	t.Run("dry run with exemptions", func(t *testing.T) {
		m := template(t, "--set", "podSecurity.level=restricted", "--set", "podSecurity.validationActions={Warn,Audit}",
			"--set", "podSecurity.exemptNamespaces={legacy}")
		for _, b := range m.policyBindings {
			if !strings.HasPrefix(b.Name, "podsecurity-") {
				continue
			}
			if !slices.Equal(b.Spec.ValidationActions, []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}) {
				t.Errorf("binding %s actions %v", b.Name, b.Spec.ValidationActions)
			}
			sel := b.Spec.MatchResources.NamespaceSelector.MatchExpressions
			if len(sel) != 1 || sel[0].Key != "kubernetes.io/metadata.name" || !slices.Equal(sel[0].Values, []string{"legacy"}) {
				t.Errorf("binding %s namespace selector %+v", b.Name, sel)
			}
		}
	})
	if _, err := runHelm(t, "template", release, chartDir, "--set", "podSecurity.level=strict"); err == nil {
		t.Error("podSecurity.level=strict accepted by the schema")
	}
}

func TestNetworkPolicy(t *testing.T) {
	ports := func(r networkingv1.NetworkPolicyIngressRule) []string {
		var out []string
		for _, p := range r.Ports {
			out = append(out, p.Port.String())
		}
		return out
	}
	m := template(t)
	if len(m.networkPolicies) != 1 {
		t.Fatalf("%d NetworkPolicies rendered; want 1", len(m.networkPolicies))
	}
	np := m.networkPolicies[0]
	if np.Namespace != namespace || !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Fatalf("NetworkPolicy %s/%s types %v", np.Namespace, np.Name, np.Spec.PolicyTypes)
	}
	sts := m.statefulSet
	sel := np.Spec.PodSelector.MatchLabels
	for k, v := range sel {
		if sts.Spec.Template.Labels[k] != v {
			t.Fatalf("NetworkPolicy selects %v, not the replicafed pods %v", sel, sts.Spec.Template.Labels)
		}
	}
	// Every port the policy names exists on the container.
	named := map[string]bool{}
	for _, p := range m.container(t).Ports {
		named[p.Name] = true
	}
	var raftRule *networkingv1.NetworkPolicyIngressRule
	for i, r := range np.Spec.Ingress {
		for _, p := range ports(r) {
			if !named[p] {
				t.Errorf("rule %d names port %q the container does not have", i, p)
			}
			if (p == "raft" || p == "admin") && len(r.From) != 1 {
				t.Errorf("rule %d opens %s to %+v; want the replicafed pods only", i, p, r.From)
			}
		}
		if slices.Contains(ports(r), "raft") {
			raftRule = &np.Spec.Ingress[i]
		}
	}
	if raftRule == nil || !slices.Equal(ports(*raftRule), []string{"raft", "admin"}) || raftRule.From[0].PodSelector == nil ||
		raftRule.From[0].NamespaceSelector != nil || len(raftRule.From[0].PodSelector.MatchLabels) != len(sel) {
		t.Fatalf("raft/admin rule %+v; want raft and admin from the replicafed pods in the release namespace", raftRule)
	}
	for k, v := range sel {
		if raftRule.From[0].PodSelector.MatchLabels[k] != v {
			t.Fatalf("raft/admin peers %v; want %v", raftRule.From[0].PodSelector.MatchLabels, sel)
		}
	}
	// By default metrics is closed; health is open for kubelet probes.
	for _, r := range np.Spec.Ingress {
		if slices.Contains(ports(r), "metrics") {
			t.Errorf("metrics reachable by default from %+v", r.From)
		}
	}

	m = template(t, "--set-json", `networkPolicy.metricsFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`,
		"--set-json", `networkPolicy.healthFrom=[{"ipBlock":{"cidr":"10.0.0.0/8"}}]`)
	got := map[string][]networkingv1.NetworkPolicyPeer{}
	for _, r := range m.networkPolicies[0].Spec.Ingress {
		for _, p := range ports(r) {
			got[p] = r.From
		}
	}
	if f := got["metrics"]; len(f) != 1 || f[0].NamespaceSelector == nil || f[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" {
		t.Errorf("metrics peers %+v", f)
	}
	if f := got["health"]; len(f) != 1 || f[0].IPBlock == nil || f[0].IPBlock.CIDR != "10.0.0.0/8" {
		t.Errorf("health peers %+v", f)
	}

	m = template(t, "--set", "networkPolicy.enabled=false")
	if len(m.networkPolicies) != 0 {
		t.Errorf("networkPolicy.enabled=false still renders %d policies", len(m.networkPolicies))
	}
}

// mapAPI is the --api-versions entry of a hub that serves
// MutatingAdmissionPolicy (Kubernetes 1.36 and later).
const mapAPI = "admissionregistration.k8s.io/v1/MutatingAdmissionPolicy"

// TestFinalizerPolicy renders the finalizer policy where the hub serves
// the API, compares it with api/policy, and leaves it out when disabled or
// when the hub does not serve MutatingAdmissionPolicy (helm template's own
// capabilities do not list it).
func TestFinalizerPolicy(t *testing.T) {
	want, wantBind, err := policy.Finalizer()
	if err != nil {
		t.Fatal(err)
	}
	m := template(t, "--api-versions", mapAPI)
	if len(m.mutatingPolicies) != 1 || len(m.mutatingBindings) != 1 {
		t.Fatalf("%d mutating policies and %d bindings; want 1 each", len(m.mutatingPolicies), len(m.mutatingBindings))
	}
	if got := m.mutatingPolicies[0]; got.Name != want.Name {
		t.Errorf("policy named %q, want %q", got.Name, want.Name)
	} else if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
		t.Errorf("policy differs from api/policy (-api/policy +chart), run `make generate`:\n%s", diff)
	}
	if diff := cmp.Diff(wantBind.Spec, m.mutatingBindings[0].Spec); diff != "" {
		t.Errorf("binding (-api/policy +chart):\n%s", diff)
	}
	for name, flags := range map[string][]string{
		"finalizerPolicy.enabled=false":      {"--api-versions", mapAPI, "--set", "finalizerPolicy.enabled=false"},
		"a hub without the API (helm's own)": nil,
	} {
		off := template(t, flags...)
		if len(off.mutatingPolicies)+len(off.mutatingBindings) != 0 {
			t.Errorf("%s: rendered %d policies and %d bindings, want none", name, len(off.mutatingPolicies), len(off.mutatingBindings))
		}
	}
}
