package credentials

import (
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// kubeconfig returns a one-context kubeconfig with an inline token, changed
// by mod.
func kubeconfig(mod func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)) *clientcmdapi.Config {
	cfg := clientcmdapi.NewConfig()
	c := &clientcmdapi.Cluster{Server: "https://member.example:6443", CertificateAuthorityData: []byte("CA")}
	u := &clientcmdapi.AuthInfo{Token: "TOKEN"}
	if mod != nil {
		mod(c, u)
	}
	cfg.Clusters["m"] = c
	cfg.AuthInfos["sa"] = u
	cfg.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "sa"}
	cfg.CurrentContext = "m"
	return cfg
}

func TestCheck(t *testing.T) {
	type mod = func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo)
	all := Policy{AllowExec: true, AllowFiles: true, AllowAuthProvider: true, AllowInsecureTLS: true, AllowProxy: true}
	tests := []struct {
		name   string
		mod    mod
		policy Policy
		want   string // Message of the refusals; empty: accepted
	}{
		{"inline token", nil, Policy{}, ""},
		{"inline client certificate", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			*u = clientcmdapi.AuthInfo{ClientCertificateData: []byte("CERT"), ClientKeyData: []byte("KEY")}
			c.TLSServerName = "member.internal"
		}, Policy{}, ""},
		{"basic auth and impersonation", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Username, u.Password, u.Impersonate, u.ImpersonateGroups = "a", "b", "c", []string{"d"}
		}, Policy{}, ""},
		{"extensions", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.Extensions = map[string]runtime.Object{"x": &runtime.Unknown{}}
			u.Extensions = map[string]runtime.Object{"x": &runtime.Unknown{}}
		}, Policy{}, ""},
		{"exec", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "/bin/sh", Args: []string{"-c", "touch /tmp/x"}}
		}, Policy{}, "users[sa].exec is not allowed: set clusters.credentials.allowExec to permit it"},
		{"exec allowed", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.Exec = &clientcmdapi.ExecConfig{Command: "aws"}
		}, Policy{AllowExec: true}, ""},
		{"token file", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
		}, Policy{}, "users[sa].tokenFile is not allowed: set clusters.credentials.allowFiles to permit it"},
		{"client certificate and key files", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			*u = clientcmdapi.AuthInfo{ClientCertificate: "/etc/tls/tls.crt", ClientKey: "/etc/tls/tls.key"}
		}, Policy{}, "users[sa].client-certificate is not allowed: set clusters.credentials.allowFiles to permit it; " +
			"users[sa].client-key is not allowed: set clusters.credentials.allowFiles to permit it"},
		{"CA file", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.CertificateAuthority = "/etc/ca.crt" },
			Policy{}, "clusters[m].certificate-authority is not allowed: set clusters.credentials.allowFiles to permit it"},
		{"files allowed", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.CertificateAuthority, u.TokenFile = "/etc/ca.crt", "/token"
		}, Policy{AllowFiles: true}, ""},
		{"auth provider", func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			u.AuthProvider = &clientcmdapi.AuthProviderConfig{Name: "oidc"}
		}, Policy{AllowExec: true, AllowFiles: true}, "users[sa].auth-provider is not allowed: set clusters.credentials.allowAuthProvider to permit it"},
		{"insecure", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.InsecureSkipTLSVerify = true },
			Policy{}, "clusters[m].insecure-skip-tls-verify is not allowed: set clusters.credentials.allowInsecureTLS to permit it"},
		{"plain http", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "http://member:8080" },
			Policy{}, "clusters[m].server is not allowed (http:// sends credentials unencrypted): set clusters.credentials.allowInsecureTLS to permit it"},
		{"plain http allowed", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "http://member:8080" },
			Policy{AllowInsecureTLS: true}, ""},
		{"other scheme", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "unix:///var/run/x.sock" },
			all, `clusters[m].server is not allowed (scheme "unix", want https) in a member kubeconfig Secret`},
		{"no server", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.Server = "" },
			all, "clusters[m].server is not allowed (empty) in a member kubeconfig Secret"},
		{"proxy", func(c *clientcmdapi.Cluster, _ *clientcmdapi.AuthInfo) { c.ProxyURL = "socks5://10.0.0.1:1080" },
			Policy{}, "clusters[m].proxy-url is not allowed: set clusters.credentials.allowProxy to permit it"},
		{"everything allowed", func(c *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) {
			c.ProxyURL, c.InsecureSkipTLSVerify, c.CertificateAuthority = "http://proxy:3128", true, "/ca"
			u.Exec, u.AuthProvider, u.TokenFile = &clientcmdapi.ExecConfig{Command: "x"}, &clientcmdapi.AuthProviderConfig{Name: "oidc"}, "/t"
		}, all, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Message(Check(kubeconfig(tc.mod), tc.policy))
			if got != tc.want {
				t.Errorf("Check = %q\nwant    %q", got, tc.want)
			}
		})
	}
}

// An unused user is checked too: a later edit of current-context must not
// make an unchecked entry live.
func TestCheckEveryEntry(t *testing.T) {
	cfg := kubeconfig(nil)
	cfg.AuthInfos["spare"] = &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "sh"}}
	cfg.Clusters["spare"] = &clientcmdapi.Cluster{Server: "https://x", CertificateAuthority: "/ca"}
	got := Check(cfg, Policy{})
	var fields []string
	for _, r := range got {
		fields = append(fields, r.Field)
	}
	if want := "clusters[spare].certificate-authority users[spare].exec"; strings.Join(fields, " ") != want {
		t.Errorf("refused %v, want %s", fields, want)
	}
}

// The checks apply to what clientcmd parses from the Secret's bytes, YAML
// spelling included.
func TestCheckParsedYAML(t *testing.T) {
	const data = `apiVersion: v1
kind: Config
clusters:
- name: m
  cluster: {server: "https://10.0.0.1:6443", certificate-authority-data: Q0E=}
users:
- name: evil
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch /tmp/pwned"]
      interactiveMode: Never
contexts:
- name: m
  context: {cluster: m, user: evil}
current-context: m
`
	cfg, err := clientcmd.Load([]byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := Message(Check(cfg, Policy{})), "users[evil].exec is not allowed: set clusters.credentials.allowExec to permit it"; got != want {
		t.Errorf("Check = %q, want %q", got, want)
	}
}

// Every field client-go's kubeconfig types have today has a rule. A field
// added by a client-go upgrade is refused until it gets one; this test
// says which to decide on.
func TestEveryFieldHasARule(t *testing.T) {
	for _, tc := range []struct {
		typ   reflect.Type
		rules map[string]rule
	}{
		{reflect.TypeOf(clientcmdapi.AuthInfo{}), userRules},
		{reflect.TypeOf(clientcmdapi.Cluster{}), clusterRules},
		{reflect.TypeOf(clientcmdapi.Context{}), contextRules},
	} {
		for i := 0; i < tc.typ.NumField(); i++ {
			name, _, _ := strings.Cut(tc.typ.Field(i).Tag.Get("json"), ",")
			if _, ok := tc.rules[name]; !ok {
				t.Errorf("%s field %s (%s) has no rule: decide whether a member Secret may use it", tc.typ.Name(), tc.typ.Field(i).Name, name)
			}
		}
	}
}

func TestUnknownFieldRefused(t *testing.T) {
	type future struct {
		Token  string `json:"token"`
		Plugin string `json:"plugin,omitempty"`
	}
	got := checkStruct("users[u]", reflect.ValueOf(future{Token: "t", Plugin: "x"}), userRules, Policy{AllowExec: true})
	if len(got) != 1 || got[0].String() != "users[u].plugin is not allowed (not a field replicafed knows) in a member kubeconfig Secret" {
		t.Errorf("refusals %v", got)
	}
}

func TestWarnings(t *testing.T) {
	if w := Warnings(Policy{}); len(w) != 0 {
		t.Errorf("default policy warns: %v", w)
	}
	w := Warnings(Policy{AllowExec: true, AllowProxy: true})
	if len(w) != 2 || !strings.HasPrefix(w[0], SettingExec) || !strings.HasPrefix(w[1], SettingProxy) {
		t.Errorf("warnings %v", w)
	}
}
