package memberaccess

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func TestKubeconfigForIsSelfContained(t *testing.T) {
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, []byte("CA-PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	// An admin configuration as an EKS/GKE user has: CA from a file and an
	// exec credential plugin.
	admin := &rest.Config{
		Host:            "https://member.example:6443",
		TLSClientConfig: rest.TLSClientConfig{CAFile: caFile, ServerName: "member.internal"},
		ExecProvider:    &clientcmdapi.ExecConfig{Command: "aws", Args: []string{"eks", "get-token"}, APIVersion: "client.authentication.k8s.io/v1"},
	}
	for _, tc := range []struct {
		name, server, wantServer string
	}{{"server from admin", "", "https://member.example:6443"}, {"server override", "https://10.0.0.5:6443", "https://10.0.0.5:6443"}} {
		acc, err := kubeconfigFor(admin, GrantOptions{Server: tc.server}.withDefaults(), "TOKEN")
		if err != nil {
			t.Fatal(err)
		}
		kc, err := clientcmd.Load(acc.Kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		cl := kc.Clusters[kc.Contexts[kc.CurrentContext].Cluster]
		user := kc.AuthInfos[kc.Contexts[kc.CurrentContext].AuthInfo]
		if cl.Server != tc.wantServer || string(cl.CertificateAuthorityData) != "CA-PEM" || cl.CertificateAuthority != "" ||
			cl.TLSServerName != "member.internal" || cl.InsecureSkipTLSVerify {
			t.Errorf("%s: cluster %+v", tc.name, cl)
		}
		if user.Token != "TOKEN" || user.Exec != nil || user.TokenFile != "" || user.ClientCertificate != "" || len(user.ClientCertificateData) != 0 || user.AuthProvider != nil {
			t.Errorf("%s: user %+v; want the token only", tc.name, user)
		}
		if acc.Config.BearerToken != "TOKEN" || acc.Config.ExecProvider != nil || acc.Config.Host != tc.wantServer {
			t.Errorf("%s: Access.Config %+v", tc.name, acc.Config)
		}
	}
}

func TestGrantRefusesInsecureAdmin(t *testing.T) {
	_, err := Grant(context.Background(), &rest.Config{Host: "https://x", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}, GrantOptions{})
	if err == nil || !strings.Contains(err.Error(), "skips TLS verification") {
		t.Fatalf("Grant with an insecure admin configuration: %v", err)
	}
}

func TestValidation(t *testing.T) {
	const reg = "sigs.k8s.io/multicluster-runtime-kubeconfig"
	for _, tc := range []struct {
		name   string
		member string
		labels map[string]string
		ok     bool
	}{
		{"plain", "member-a", map[string]string{"region": "eu", "example.com/tier": "web"}, true},
		{"no labels", "m", nil, true},
		{"bad name", "Member_A", nil, false},
		{"empty name", "", nil, false},
		{"registration label", "m", map[string]string{reg: "true"}, false},
		{"bad key", "m", map[string]string{"a b": "x"}, false},
		{"bad value", "m", map[string]string{"a": "x y"}, false},
	} {
		err := validateName(tc.member)
		if err == nil {
			err = validateLabels(tc.labels, reg)
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
