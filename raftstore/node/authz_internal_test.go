package node

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/transport"
)

func TestCertificateStandsForPeer(t *testing.T) {
	ca, err := testpki.NewCA("ca")
	if err != nil {
		t.Fatal(err)
	}
	peer := func(cn string, dns ...string) transport.Peer {
		certPEM, _, err := ca.IssuePEM(cn, dns...)
		if err != nil {
			t.Fatal(err)
		}
		blk, _ := pem.Decode(certPEM)
		cert, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return transport.Peer{Verified: true, Names: transport.Identity(cert), Cert: cert}
	}
	shared := peer("replicafed", "*.replicafed-peers.ns.svc", "replicafed-0.replicafed-peers.ns.svc")
	perPod := peer("x", "replicafed-1.replicafed-peers.ns.svc")
	for _, tc := range []struct {
		name        string
		p           transport.Peer
		id, address string
		want        bool
	}{
		{"DNS SAN is the peer name", peer("r0"), "r0", "127.0.0.1:7000", true},
		{"another name", peer("r0"), "r1", "127.0.0.1:7000", false},
		{"IP SAN never identifies", peer("r9"), "r1", "127.0.0.1:7000", false},
		{"common name alone is no name", peerCNOnly(t, ca, "r1"), "r1", "127.0.0.1:7000", false},
		{"explicit SAN for the peer address", shared, "replicafed-0", "replicafed-0.replicafed-peers.ns.svc:7000", true},
		{"address host compared whole, any case", shared, "replicafed-0", "Replicafed-0.replicafed-peers.ns.svc.:7000", true},
		{"wildcard is no name", shared, "replicafed-2", "replicafed-2.replicafed-peers.ns.svc:7000", false},
		{"wildcard of another service", shared, "replicafed-2", "replicafed-2.other-peers.ns.svc:7000", false},
		{"first DNS label is not the name", perPod, "replicafed-1", "10.0.0.2:7000", false},
		{"per-pod name at its address", perPod, "replicafed-1", "replicafed-1.replicafed-peers.ns.svc:7000", true},
		{"per-pod name for another pod", perPod, "replicafed-0", "replicafed-0.replicafed-peers.ns.svc:7000", false},
		{"name under another domain", peer("x", "replicafed-0.attacker.example"), "replicafed-0", "replicafed-0.replicafed-peers.ns.svc:7000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := matches(tc.p, tc.id, tc.address); got != tc.want {
				t.Fatalf("matches(%v, %q, %q) = %v, want %v", tc.p.Names, tc.id, tc.address, got, tc.want)
			}
		})
	}
}

// peerCNOnly is a peer whose certificate has common name cn and no DNS SAN.
func peerCNOnly(t *testing.T, ca *testpki.CA, cn string) transport.Peer {
	t.Helper()
	certPEM, _, err := ca.IssueSpecPEM(testpki.Spec{CommonName: cn})
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(certPEM)
	cert, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return transport.Peer{Verified: true, Names: transport.Identity(cert), Cert: cert}
}
