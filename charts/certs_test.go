package charts

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"maps"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// raftVolume returns the raft-tls volume of the pods, or nil.
func raftVolume(m *manifests) *corev1.Volume {
	for _, v := range m.statefulSet.Spec.Template.Spec.Volumes {
		if v.Name == "raft-tls" {
			return &v
		}
	}
	return nil
}

func peerNames(replicas int) []string {
	var out []string
	for i := range replicas {
		out = append(out, fmt.Sprintf("%s-%d.%s.%s.svc", fullname, i, headless, namespace))
	}
	return out
}

func parseCert(t *testing.T, b []byte) *x509.Certificate {
	t.Helper()
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatal("no PEM block")
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// checkMount checks that the pods mount exactly the certificate, key and CA
// of Secret name (never the CA key) where the config points.
func checkMount(t *testing.T, m *manifests, name string) {
	t.Helper()
	v := raftVolume(m)
	if v == nil || v.Secret == nil || v.Secret.SecretName != name {
		t.Fatalf("raft-tls volume %+v, want Secret %s", v, name)
	}
	var keys []string
	for _, it := range v.Secret.Items {
		keys = append(keys, it.Key)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"ca.crt", "tls.crt", "tls.key"}) {
		t.Errorf("raft-tls volume projects %v, want ca.crt, tls.crt, tls.key", keys)
	}
	cfg, err := m.loadConfig(t, fullname+"-0")
	if err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	if cfg.Raft.TLS.Insecure || !cfg.Raft.TLS.Enabled() {
		t.Errorf("raft TLS %+v, want the mounted files", cfg.Raft.TLS)
	}
}

// TestGeneratedCertificates: by default the chart generates a CA and one
// certificate, for server and client use, valid for every peer's name (and
// so carrying each pod's identity), and mounts it.
func TestGeneratedCertificates(t *testing.T) {
	m := template(t, "--set", "replicas=5", "--set-json", `raft.tls.extraDNSNames=["raft.example.org"]`)
	if len(m.secrets) != 1 {
		t.Fatalf("want 1 Secret, got %d", len(m.secrets))
	}
	s := m.secrets[0]
	if s.Name != fullname+"-raft-tls" || s.Type != corev1.SecretTypeTLS {
		t.Fatalf("Secret %s of type %s", s.Name, s.Type)
	}
	if s.Annotations["replicafed.io/names-sha256"] == "" {
		t.Error("the Secret does not record the names it was issued for (upgrades would not notice a change)")
	}
	for _, k := range []string{"ca.crt", "ca.key", "tls.crt", "tls.key"} {
		if len(s.Data[k]) == 0 {
			t.Fatalf("Secret lacks %s", k)
		}
	}
	ca, leaf := parseCert(t, s.Data["ca.crt"]), parseCert(t, s.Data["tls.crt"])
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	for _, usage := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{usage}}); err != nil {
			t.Errorf("certificate does not verify for usage %v: %v", usage, err)
		}
	}
	for _, n := range append(peerNames(5), "replicafed-9."+headless+"."+namespace+".svc", "raft.example.org") {
		if err := leaf.VerifyHostname(n); err != nil {
			t.Errorf("certificate not valid for %s: %v", n, err)
		}
	}
	for _, n := range peerNames(5) {
		if !slices.Contains(leaf.DNSNames, n) {
			t.Errorf("certificate lacks the explicit name %s (a pod's identity)", n)
		}
	}
	if len(m.certManager) != 0 {
		t.Errorf("cert-manager objects rendered without certManager.enabled: %v", m.certManager)
	}
	checkMount(t, m, s.Name)
}

// TestCertManagerCertificates: with certManager.enabled the chart renders
// cert-manager objects instead of a Secret: its own CA chain, or one
// Certificate from the issuer named in values.
func TestCertManagerCertificates(t *testing.T) {
	type obj = map[string]any
	kinds := func(m *manifests) map[string]obj {
		out := map[string]obj{}
		for _, o := range m.certManager {
			out[o["kind"].(string)+"/"+o["metadata"].(obj)["name"].(string)] = o
		}
		return out
	}
	checkPeerCert := func(t *testing.T, c obj, issuer, kind string) {
		t.Helper()
		spec := c["spec"].(obj)
		if spec["secretName"] != fullname+"-raft-tls" {
			t.Errorf("Certificate secretName %v", spec["secretName"])
		}
		var dns []string
		for _, d := range spec["dnsNames"].([]any) {
			dns = append(dns, d.(string))
		}
		for _, n := range append(peerNames(3), "*."+headless+"."+namespace+".svc") {
			if !slices.Contains(dns, n) {
				t.Errorf("Certificate dnsNames %v lack %s", dns, n)
			}
		}
		var usages []string
		for _, u := range spec["usages"].([]any) {
			usages = append(usages, u.(string))
		}
		if !slices.Contains(usages, "server auth") || !slices.Contains(usages, "client auth") {
			t.Errorf("Certificate usages %v", usages)
		}
		ref := spec["issuerRef"].(obj)
		if ref["name"] != issuer || ref["kind"] != kind {
			t.Errorf("Certificate issuerRef %v, want %s %s", ref, kind, issuer)
		}
	}

	t.Run("own CA", func(t *testing.T) {
		m := template(t, "--set", "certManager.enabled=true")
		if len(m.secrets) != 0 {
			t.Errorf("a Secret is rendered next to cert-manager: %v", m.secrets[0].Name)
		}
		k := kinds(m)
		for _, want := range []string{"Issuer/" + fullname + "-raft-selfsigned", "Certificate/" + fullname + "-raft-ca", "Issuer/" + fullname + "-raft-ca", "Certificate/" + fullname + "-raft"} {
			if k[want] == nil {
				t.Errorf("%s not rendered (got %v)", want, slices.Collect(maps.Keys(k)))
			}
		}
		if ca := k["Certificate/"+fullname+"-raft-ca"]; ca != nil && ca["spec"].(obj)["isCA"] != true {
			t.Error("the CA Certificate is not a CA")
		}
		if c := k["Certificate/"+fullname+"-raft"]; c != nil {
			checkPeerCert(t, c, fullname+"-raft-ca", "Issuer")
		}
		checkMount(t, m, fullname+"-raft-tls")
	})
	t.Run("issuer from values", func(t *testing.T) {
		m := template(t, "--set", "certManager.enabled=true", "--set", "certManager.issuerRef.name=corp-ca", "--set", "certManager.issuerRef.kind=ClusterIssuer")
		k := kinds(m)
		if len(k) != 1 || k["Certificate/"+fullname+"-raft"] == nil {
			t.Fatalf("want only the peers' Certificate, got %v", slices.Collect(maps.Keys(k)))
		}
		checkPeerCert(t, k["Certificate/"+fullname+"-raft"], "corp-ca", "ClusterIssuer")
	})
}

// TestOwnOrNoCertificates: your own Secret is mounted as it is; insecure
// mounts nothing and says so in the config.
func TestOwnOrNoCertificates(t *testing.T) {
	m := template(t, "--set", "raft.tls.secretName=corp-raft")
	if len(m.secrets) != 0 || len(m.certManager) != 0 {
		t.Errorf("certificates rendered although raft.tls.secretName is set")
	}
	checkMount(t, m, "corp-raft")

	m = template(t, "--set", "raft.tls.insecure=true")
	if len(m.secrets) != 0 || len(m.certManager) != 0 || raftVolume(m) != nil {
		t.Error("certificates rendered or mounted with raft.tls.insecure")
	}
	cfg, err := m.loadConfig(t, fullname+"-0")
	if err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	if !cfg.Raft.TLS.Insecure {
		t.Error("raft.tls.insecure does not reach the config")
	}
}

// TestMetricsAuth: metrics.secure (the default) ships the scrapers'
// ClusterRole and lets replicafed ask for TokenReviews and
// SubjectAccessReviews; off, neither is rendered.
func TestMetricsAuth(t *testing.T) {
	m := template(t)
	r, b := m.metricsReader, m.authDelegator
	if r == nil || b == nil {
		t.Fatalf("metrics-reader ClusterRole (%v) or auth-delegator binding (%v) missing", r != nil, b != nil)
	}
	if len(r.Rules) != 1 || !slices.Equal(r.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(r.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("metrics-reader rules %+v, want get on /metrics only", r.Rules)
	}
	if b.RoleRef.Kind != "ClusterRole" || b.RoleRef.Name != "system:auth-delegator" {
		t.Errorf("auth-delegator binding refers to %+v", b.RoleRef)
	}
	if len(b.Subjects) != 1 || b.Subjects[0].Kind != "ServiceAccount" || b.Subjects[0].Name != m.serviceAccount.Name || b.Subjects[0].Namespace != namespace {
		t.Errorf("auth-delegator binding subjects %+v", b.Subjects)
	}
	cfg, err := m.loadConfig(t, fullname+"-0")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Metrics.Secure {
		t.Error("metrics.secure is not in the config")
	}

	m = template(t, "--set", "metrics.secure=false")
	if m.metricsReader != nil || m.authDelegator != nil {
		t.Error("metrics auth RBAC rendered with metrics.secure=false")
	}
	if cfg, err := m.loadConfig(t, fullname+"-0"); err != nil || cfg.Metrics.Secure {
		t.Errorf("metrics.secure=false: config %v, %v", cfg != nil && cfg.Metrics.Secure, err)
	}
}
