package registry

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// perMember returns Options whose RESTOptions set the user agent and
// whose RESTOptionsFor appends the member's name to it (so the order
// shows) and refuses the member "bad".
func perMember() Options {
	return Options{SecretNamespace: "fleet", SecretSelector: "member=true", SecretKey: "kubeconfig",
		RESTOptions: []func(*rest.Config) error{func(c *rest.Config) error { c.UserAgent = "replicafed"; return nil }},
		RESTOptionsFor: func(cluster string) []func(*rest.Config) error {
			if cluster == "bad" {
				return []func(*rest.Config) error{func(*rest.Config) error { return errors.New("no lease") }}
			}
			return []func(*rest.Config) error{func(c *rest.Config) error { c.UserAgent += "/" + cluster; return nil }}
		}}
}

// TestRESTOptionsFor: each member's client configuration gets its own
// options after the common ones, whether it comes from a kubeconfig
// Secret or a static member's file; a failing option refuses the member.
func TestRESTOptionsFor(t *testing.T) {
	p, err := NewProvider(perMember())
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := kubeconfigYAML(t, "https://m:6443", &clientcmdapi.AuthInfo{Token: "t"})
	file := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(file, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(perMember(), p)
	secret := func(name string) (*rest.Config, string) {
		st, rc := p.judge(name, kubeconfig)
		if st.refused != nil {
			return nil, st.refused.message
		}
		return rc, ""
	}
	static := func(name string) (*rest.Config, string) {
		rc, err := r.staticConfig(Static{Name: name, Kubeconfig: file})
		if err != nil {
			return nil, err.Error()
		}
		return rc, ""
	}
	for _, tc := range []struct {
		name   string
		build  func(string) (*rest.Config, string)
		member string
		agent  string
		refuse string
	}{
		{name: "secret a", build: secret, member: "a", agent: "replicafed/a"},
		{name: "secret b", build: secret, member: "b", agent: "replicafed/b"},
		{name: "secret refused", build: secret, member: "bad", refuse: "configuring client of member bad: no lease"},
		{name: "static a", build: static, member: "a", agent: "replicafed/a"},
		{name: "static c", build: static, member: "c", agent: "replicafed/c"},
		{name: "static refused", build: static, member: "bad", refuse: "configuring client of static member bad: no lease"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc, refused := tc.build(tc.member)
			if tc.refuse != "" {
				if !strings.Contains(refused, tc.refuse) {
					t.Fatalf("refusal %q, want %q", refused, tc.refuse)
				}
				return
			}
			if refused != "" || rc.UserAgent != tc.agent {
				t.Fatalf("user agent %q (refused %q), want %q", rc.UserAgent, refused, tc.agent)
			}
		})
	}
}
