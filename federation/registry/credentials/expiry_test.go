package credentials

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// jwt returns an unsigned JWT with the given payload.
func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256","kid":"x"}`)) + "." + enc([]byte(payload)) + ".c2ln"
}

func certPEM(t *testing.T, notAfter time.Time) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replicafed"},
		NotBefore: notAfter.Add(-48 * time.Hour), NotAfter: notAfter}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestTokenExpiry(t *testing.T) {
	for _, tc := range []struct {
		name, token string
		want        time.Time
		ok          bool
	}{
		{"service account token", jwt(`{"iss":"https://kubernetes.default.svc","exp":1795000000,"sub":"system:serviceaccount:a:b"}`), time.Unix(1795000000, 0), true},
		{"float exp", jwt(`{"exp":1795000000.0}`), time.Unix(1795000000, 0), true},
		{"padded payload", "e30." + base64.URLEncoding.EncodeToString([]byte(`{"exp":1}`)) + ".c2ln", time.Unix(1, 0), true},
		{"no exp (legacy Secret token)", jwt(`{"iss":"kubernetes/serviceaccount"}`), time.Time{}, false},
		{"not a JWT", "abcdef0123456789", time.Time{}, false},
		{"bad base64", "a.!!!.c", time.Time{}, false},
		{"not JSON", "a." + base64.RawURLEncoding.EncodeToString([]byte("exp")) + ".c", time.Time{}, false},
		{"string exp", jwt(`{"exp":"soon"}`), time.Time{}, false},
		{"negative exp", jwt(`{"exp":-5}`), time.Time{}, false},
		{"absurd exp", jwt(`{"exp":1e300}`), time.Time{}, false},
	} {
		got, ok := TokenExpiry(tc.token)
		if ok != tc.ok || !got.Equal(tc.want) {
			t.Errorf("%s: TokenExpiry = %v, %v; want %v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}

func TestExpiry(t *testing.T) {
	tokenAt := time.Date(2027, 11, 22, 16, 16, 6, 0, time.UTC)
	certAt := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	token := jwt(`{"exp":` + big.NewInt(tokenAt.Unix()).String() + `}`)
	cert := certPEM(t, certAt)
	keyThenCert := append(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: []byte("k")}), cert...)
	for _, tc := range []struct {
		name string
		user *clientcmdapi.AuthInfo
		want Expiration
		ok   bool
	}{
		{"token", &clientcmdapi.AuthInfo{Token: token}, Expiration{tokenAt, SourceToken}, true},
		{"certificate", &clientcmdapi.AuthInfo{ClientCertificateData: cert}, Expiration{certAt, SourceCertificate}, true},
		{"certificate after another block", &clientcmdapi.AuthInfo{ClientCertificateData: keyThenCert}, Expiration{certAt, SourceCertificate}, true},
		{"both: the earlier", &clientcmdapi.AuthInfo{Token: token, ClientCertificateData: cert}, Expiration{certAt, SourceCertificate}, true},
		{"opaque token", &clientcmdapi.AuthInfo{Token: "abc"}, Expiration{}, false},
		{"garbage certificate", &clientcmdapi.AuthInfo{ClientCertificateData: []byte("not PEM")}, Expiration{}, false},
		{"token file is not read", &clientcmdapi.AuthInfo{TokenFile: "/etc/passwd"}, Expiration{}, false},
	} {
		cfg := kubeconfig(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { *u = *tc.user })
		got, ok := Expiry(cfg)
		if ok != tc.ok || !got.At.Equal(tc.want.At) || got.Source != tc.want.Source {
			t.Errorf("%s: Expiry = %+v, %v; want %+v, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
	cfg := kubeconfig(func(_ *clientcmdapi.Cluster, u *clientcmdapi.AuthInfo) { u.Token = token })
	cfg.CurrentContext = "missing"
	if _, ok := Expiry(cfg); ok {
		t.Error("expiry of a kubeconfig whose current context does not exist")
	}
}

func TestAssess(t *testing.T) {
	exp := Expiration{At: time.Date(2027, 11, 22, 12, 0, 0, 0, time.UTC), Source: SourceToken}
	warn := 30 * 24 * time.Hour
	for _, tc := range []struct {
		name     string
		now      time.Time
		expiring bool
		reason   string
		message  string
	}{
		{"a year left", exp.At.Add(-365 * 24 * time.Hour), false, ReasonValid, "the token expires at 2027-11-22T12:00:00Z"},
		{"just outside the warning", exp.At.Add(-warn), false, ReasonValid, "the token expires at 2027-11-22T12:00:00Z"},
		{"just inside the warning", exp.At.Add(-warn + time.Second), true, ReasonExpiresSoon,
			"the token expires at 2027-11-22T12:00:00Z, in 29 days; rotate it (replicafed join --rotate)"},
		{"a day and a half", exp.At.Add(-36 * time.Hour), true, ReasonExpiresSoon,
			"the token expires at 2027-11-22T12:00:00Z, in 36 hours; rotate it (replicafed join --rotate)"},
		{"minutes", exp.At.Add(-90 * time.Second), true, ReasonExpiresSoon,
			"the token expires at 2027-11-22T12:00:00Z, in 1m30s; rotate it (replicafed join --rotate)"},
		{"at expiry", exp.At, true, ReasonExpired, "the token expired at 2027-11-22T12:00:00Z; rotate it (replicafed join --rotate)"},
		{"long expired", exp.At.Add(400 * 24 * time.Hour), true, ReasonExpired, "the token expired at 2027-11-22T12:00:00Z; rotate it (replicafed join --rotate)"},
	} {
		got := Assess(exp, tc.now, warn)
		if got.Expiring != tc.expiring || got.Reason != tc.reason || got.Message != tc.message {
			t.Errorf("%s: Assess = %+v\nwant expiring %v, %s, %q", tc.name, got, tc.expiring, tc.reason, tc.message)
		}
	}
}
