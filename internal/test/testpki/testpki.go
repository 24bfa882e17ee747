// Package testpki issues the certificates replicafed's raft transport and
// admin endpoint need, for tests and local fleets: a CA and, per replica, a
// certificate whose common name and a DNS SAN are the replica's raft name,
// valid for loopback, for both server and client use.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/replicafed/replicafed/internal/test/testnet"
)

// Validity of issued certificates; long enough for any test run.
const validity = 24 * time.Hour

// CA is a certificate authority held in memory.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is the CA certificate.
	PEM []byte
}

// Files are the PEM files of one issued certificate.
type Files struct {
	CertFile, KeyFile, CAFile string
}

// NewCA creates a CA named name.
func NewCA(name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generating CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parsing CA certificate: %w", err)
	}
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// IssuePEM returns a certificate and key (PEM) with common name name, DNS
// names name, localhost and dnsNames, and IP SANs 127.0.0.1, ::1 and the
// process's own loopback address (testnet.Host). The raft transport takes
// the DNS SAN name as the raft server name the certificate stands for.
func (ca *CA) IssuePEM(name string, dnsNames ...string) (certPEM, keyPEM []byte, err error) {
	return ca.IssueSpecPEM(Spec{CommonName: name, DNSNames: append([]string{name, "localhost"}, dnsNames...),
		IPs: []net.IP{net.ParseIP("127.0.0.1"), net.IPv6loopback, net.ParseIP(testnet.Host)}})
}

// Spec is exactly what an issued certificate names (tests of identity
// rules issue certificates IssuePEM would not).
type Spec struct {
	CommonName string
	DNSNames   []string
	IPs        []net.IP
}

// IssueSpecPEM returns a certificate and key (PEM) naming exactly what s
// says, for server and client use.
func (ca *CA) IssueSpecPEM(s Spec) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: s.CommonName},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: s.IPs,
		DNSNames:    s.DNSNames,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, fmt.Errorf("creating certificate for %s: %w", s.CommonName, err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), nil
}

// Issue writes tls.crt, tls.key and ca.crt for name into dir (created with
// mode 0700; files 0600). Issuing again into the same dir replaces the
// files, which is how tests rotate a certificate: the key is written
// first, then the certificate, each by rename.
func (ca *CA) Issue(dir, name string, dnsNames ...string) (Files, error) {
	certPEM, keyPEM, err := ca.IssuePEM(name, dnsNames...)
	if err != nil {
		return Files{}, err
	}
	return ca.write(dir, certPEM, keyPEM)
}

func (ca *CA) write(dir string, certPEM, keyPEM []byte) (Files, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Files{}, fmt.Errorf("creating certificate directory: %w", err)
	}
	f := Files{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key"), CAFile: filepath.Join(dir, "ca.crt")}
	for _, w := range []struct {
		path string
		data []byte
	}{{f.CAFile, ca.PEM}, {f.KeyFile, keyPEM}, {f.CertFile, certPEM}} {
		if err := writeAtomic(w.path, w.data); err != nil {
			return Files{}, err
		}
	}
	return f, nil
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}

// ClientTLS is a client configuration presenting f's certificate (none when
// f.CertFile is empty) and trusting f's CA.
func ClientTLS(f Files) (*tls.Config, error) {
	b, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no certificate", f.CAFile)
	}
	cfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if f.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("loading key pair: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
