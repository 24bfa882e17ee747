package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

// Certs holds this server's certificate, key and CA bundle, read from PEM
// files and read again when a file changes (a cert-manager renewal or a
// Secret update replaces them), so rotation needs no restart. The files are
// stat'ed on every handshake, which is cheap next to the handshake itself;
// a set of files that does not load (a key that does not match its
// certificate while a rotation is half written) keeps the previous set.
type Certs struct {
	certFile, keyFile, caFile string
	log                       logr.Logger

	mu     sync.Mutex
	cur    *certSet
	stamps [3]fileStamp
}

type certSet struct {
	cert *tls.Certificate
	pool *x509.CertPool
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadCerts reads the PEM files; an error names the file that failed.
func LoadCerts(certFile, keyFile, caFile string, log logr.Logger) (*Certs, error) {
	c := &Certs{certFile: certFile, keyFile: keyFile, caFile: caFile, log: log}
	stamps, err := c.stat()
	if err != nil {
		return nil, err
	}
	set, err := c.load()
	if err != nil {
		return nil, err
	}
	c.cur, c.stamps = set, stamps
	return c, nil
}

func (c *Certs) stat() ([3]fileStamp, error) {
	var out [3]fileStamp
	for i, f := range []string{c.certFile, c.keyFile, c.caFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return out, fmt.Errorf("reading TLS file: %w", err)
		}
		out[i] = fileStamp{mod: fi.ModTime(), size: fi.Size()}
	}
	return out, nil
}

func (c *Certs) load() (*certSet, error) {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading TLS key pair %s, %s: %w", c.certFile, c.keyFile, err)
	}
	b, err := os.ReadFile(c.caFile)
	if err != nil {
		return nil, fmt.Errorf("reading TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("TLS CA %s holds no certificate", c.caFile)
	}
	return &certSet{cert: &cert, pool: pool}, nil
}

// current returns the loaded set, first reloading it when a file changed.
func (c *Certs) current() *certSet {
	c.mu.Lock()
	defer c.mu.Unlock()
	stamps, err := c.stat()
	if err != nil || stamps == c.stamps {
		return c.cur
	}
	set, err := c.load()
	if err != nil {
		// Not remembered as seen: the next handshake tries again, and the
		// rest of a rotation in progress will have arrived.
		c.log.Error(err, "Reloading TLS certificates failed; keeping the previous ones")
		return c.cur
	}
	c.cur, c.stamps = set, stamps
	if set.cert.Leaf != nil {
		c.log.Info("Reloaded TLS certificates", "serial", set.cert.Leaf.SerialNumber.String(), "notAfter", set.cert.Leaf.NotAfter)
	}
	return set
}

// Leaf is the certificate currently served (after any reload).
func (c *Certs) Leaf() *x509.Certificate { return c.current().cert.Leaf }

// ServerConfig is a TLS server configuration that always serves the current
// certificate and checks client certificates against the current CA with
// the given policy.
func (c *Certs) ServerConfig(auth tls.ClientAuthType) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			s := c.current()
			return &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*s.cert},
				ClientCAs:    s.pool,
				ClientAuth:   auth,
			}, nil
		},
	}
}

// ClientConfig is a TLS client configuration presenting the current
// certificate and verifying the server against the current CA and
// serverName.
func (c *Certs) ClientConfig(serverName string) *tls.Config {
	s := c.current()
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{*s.cert},
		RootCAs:      s.pool,
		ServerName:   serverName,
	}
}

// How a certificate is bound to a raft server. A raft server ID is
// "<name>-<uuid>"; the name (the StatefulSet pod name, NodeConfig.ID) is what
// a certificate must carry. A certificate stands for the server name at
// address (StandsFor) when one of its DNS SANs, compared exactly (ASCII case
// aside), is
//
//   - the name itself ("replicafed-0"), or
//   - the DNS host of the server's raft address
//     ("replicafed-0.replicafed-headless.ns.svc" for
//     "replicafed-0.replicafed-headless.ns.svc:7000").
//
// Nothing else counts: not the common name, not a wildcard SAN, not a
// prefix of a longer name ("replicafed-0.example.com" is not replicafed-0),
// not an IP SAN, not a URI SAN. So a certificate the same CA issued for
// anything else (a member, a client, another replica) is refused as that
// peer. Dialing, the layer checks that the server it reached stands for the
// name expected at that address (Config.PeerName); accepting, the node's
// Authorize admits a raft connection only from a certificate that stands for
// a server of the raft configuration or a configured peer.

// Identity is what a peer certificate may stand for: its DNS SANs,
// lower-cased, wildcard names left out. It is for logs and error messages;
// decisions use StandsFor.
func Identity(cert *x509.Certificate) []string {
	if cert == nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, n := range cert.DNSNames {
		n = strings.ToLower(n)
		if n == "" || strings.Contains(n, "*") || seen[n] {
			continue
		}
		seen[n] = true
		out = append(out, n)
	}
	return out
}

// StandsFor reports whether cert stands for the raft server called name
// whose raft address is address (host:port; may be empty): see the rule
// above.
func StandsFor(cert *x509.Certificate, name, address string) bool {
	if cert == nil || name == "" {
		return false
	}
	host := ""
	if h, _, err := net.SplitHostPort(address); err == nil && net.ParseIP(h) == nil {
		host = strings.TrimSuffix(h, ".")
	}
	for _, n := range Identity(cert) {
		if strings.EqualFold(n, name) || (host != "" && strings.EqualFold(n, host)) {
			return true
		}
	}
	return false
}

// ErrUnauthorized is returned when a verified peer's identity is not allowed.
var ErrUnauthorized = errors.New("peer identity not authorized")
