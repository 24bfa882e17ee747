package transport_test

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/internal/test/testnet"
	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/transport"
)

// timeout bounds every dial and read: generous, never reached when the
// code works (a refusal shows as a closed connection or an error).
const timeout = 30 * time.Second

type pki struct {
	t   *testing.T
	ca  *testpki.CA
	dir string
}

func newPKI(t *testing.T) *pki {
	ca, err := testpki.NewCA("raft")
	if err != nil {
		t.Fatal(err)
	}
	return &pki{t: t, ca: ca, dir: t.TempDir()}
}

// certs issues a certificate for raft server name from the shared CA.
func (p *pki) certs(name string) *transport.Certs {
	p.t.Helper()
	f, err := p.ca.Issue(filepath.Join(p.dir, name), name)
	if err != nil {
		p.t.Fatal(err)
	}
	c, err := transport.LoadCerts(f.CertFile, f.KeyFile, f.CAFile, logr.Discard())
	if err != nil {
		p.t.Fatal(err)
	}
	return c
}

// listen starts a layer presenting certs, knowing servers (a function, so
// a test can fill them in once every address is known).
func listen(t *testing.T, certs *transport.Certs, servers *[]transport.Server) *transport.Layer {
	t.Helper()
	l, err := transport.Listen(transport.Config{
		BindAddr: net.JoinHostPort(testnet.Host, "0"), Certs: certs,
		Servers:   func() []transport.Server { return *servers },
		Authorize: func(transport.Peer) error { return nil },
		Log:       logr.Discard(),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// A raft connection is accepted only from a certificate standing for a
// known server: a certificate the same CA issued for another name is
// refused, the right one is delivered to raft.
func TestAcceptBindsCertificateToServer(t *testing.T) {
	p := newPKI(t)
	var servers []transport.Server
	l0 := listen(t, p.certs("r0"), &servers)
	l1 := listen(t, p.certs("r1"), &servers)
	l9 := listen(t, p.certs("r9"), &servers)
	addr0 := l0.ListenAddr().String()
	// r9 is not a server of the cluster; the dialers expect r0 at addr0.
	servers = []transport.Server{{Name: "r0", Address: addr0}, {Name: "r1", Address: l1.ListenAddr().String()}}

	if c, err := l1.Dial(raft.ServerAddress(l9.ListenAddr().String()), timeout); !errors.Is(err, transport.ErrWrongPeer) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial to an address of no known server: %v, want ErrWrongPeer", err)
	}
	bad, err := l9.Dial(raft.ServerAddress(addr0), timeout)
	if err != nil {
		t.Fatalf("r9 dialling r0: %v (the dialer's own check of r0 should pass)", err)
	}
	_ = bad.SetReadDeadline(time.Now().Add(timeout))
	if n, err := bad.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("r9's connection: read %d bytes, error %v; want it closed (refused)", n, err)
	}

	good, err := l1.Dial(raft.ServerAddress(addr0), timeout)
	if err != nil {
		t.Fatalf("r1 dialling r0: %v", err)
	}
	defer good.Close()
	if _, err := good.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	acc := make(chan net.Conn, 1)
	go func() {
		c, err := l0.Accept()
		if err == nil {
			acc <- c
		}
	}()
	var c net.Conn
	select {
	case c = <-acc:
	case <-time.After(timeout):
		t.Fatal("r1's connection not accepted")
	}
	defer c.Close()
	// The first connection raft gets is r1's: r9's was never delivered.
	buf := make([]byte, 5)
	_ = c.SetReadDeadline(time.Now().Add(timeout))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("accepted connection read %q, %v; want r1's hello", buf, err)
	}
}

// A dial succeeds only when the server reached stands for the server
// expected at that address.
func TestDialBindsServerCertificate(t *testing.T) {
	p := newPKI(t)
	var servers []transport.Server
	l0 := listen(t, p.certs("r0"), &servers)
	impostor := listen(t, p.certs("r9"), &servers) // same CA, wrong ID
	client := listen(t, p.certs("r1"), &servers)
	addr0, addrImp := l0.ListenAddr().String(), impostor.ListenAddr().String()
	servers = []transport.Server{{Name: "r0", Address: addr0}, {Name: "r2", Address: addrImp}, {Name: "r1", Address: client.ListenAddr().String()}}

	if c, err := client.Dial(raft.ServerAddress(addrImp), timeout); !errors.Is(err, transport.ErrWrongPeer) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("dial to r2's address served by r9's certificate: %v, want ErrWrongPeer", err)
	}
	if c, err := client.DialRPCTo(addr0, "r2", timeout); !errors.Is(err, transport.ErrWrongPeer) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("RPC dial expecting r2 at r0's address: %v, want ErrWrongPeer", err)
	}
	c, err := client.Dial(raft.ServerAddress(addr0), timeout)
	if err != nil {
		t.Fatalf("dial to r0: %v", err)
	}
	c.Close()
	c, err = client.DialRPC(addr0, timeout)
	if err != nil {
		t.Fatalf("RPC dial to r0: %v", err)
	}
	c.Close()
}

func TestStandsFor(t *testing.T) {
	ca, err := testpki.NewCA("raft")
	if err != nil {
		t.Fatal(err)
	}
	cert := func(s testpki.Spec) *x509.Certificate {
		b, _, err := ca.IssueSpecPEM(s)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(b)
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	const fqdn = "replicafed-0.replicafed-headless.ns.svc"
	for _, tc := range []struct {
		name         string
		spec         testpki.Spec
		server, addr string
		want         bool
	}{
		{"name SAN", testpki.Spec{DNSNames: []string{"replicafed-0"}}, "replicafed-0", "10.0.0.1:7000", true},
		{"address SAN", testpki.Spec{DNSNames: []string{fqdn}}, "replicafed-0", fqdn + ":7000", true},
		{"address SAN at another address", testpki.Spec{DNSNames: []string{fqdn}}, "replicafed-0", "10.0.0.1:7000", false},
		{"common name only", testpki.Spec{CommonName: "replicafed-0"}, "replicafed-0", "10.0.0.1:7000", false},
		{"wildcard", testpki.Spec{DNSNames: []string{"*.replicafed-headless.ns.svc"}}, "replicafed-0", fqdn + ":7000", false},
		{"name under another domain", testpki.Spec{DNSNames: []string{"replicafed-0.evil.example"}}, "replicafed-0", "10.0.0.1:7000", false},
		{"IP SAN", testpki.Spec{IPs: []net.IP{net.ParseIP("10.0.0.1")}}, "replicafed-0", "10.0.0.1:7000", false},
		{"another server's name", testpki.Spec{DNSNames: []string{"replicafed-1"}}, "replicafed-0", "10.0.0.1:7000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := transport.StandsFor(cert(tc.spec), tc.server, tc.addr); got != tc.want {
				t.Fatalf("StandsFor = %v, want %v", got, tc.want)
			}
		})
	}
}
