package node

import (
	"crypto/x509"
	"encoding/pem"
	"testing"

	"github.com/replicafed/replicafed/internal/testpki"
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
	shared := peer("replicafed", "*.replicafed-peers.ns.svc")
	perPod := peer("x", "replicafed-1.replicafed-peers.ns.svc")
	for _, tc := range []struct {
		name        string
		p           transport.Peer
		id, address string
		want        bool
	}{
		{"common name is the peer name", peer("r0"), "r0", "127.0.0.1:7000", true},
		{"another name", peer("r0"), "r1", "127.0.0.1:7000", false},
		{"IP SAN never identifies", peer("r9"), "r1", "127.0.0.1:7000", false},
		{"wildcard valid for the peer address", shared, "replicafed-2", "replicafed-2.replicafed-peers.ns.svc:7000", true},
		{"wildcard of another service", shared, "replicafed-2", "replicafed-2.other-peers.ns.svc:7000", false},
		{"wildcard is no name", shared, "replicafed-2", "10.0.0.3:7000", false},
		{"first DNS label is the name", perPod, "replicafed-1", "10.0.0.2:7000", true},
		{"per-pod name for another pod", perPod, "replicafed-0", "replicafed-0.replicafed-peers.ns.svc:7000", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := matches(tc.p, tc.id, tc.address); got != tc.want {
				t.Fatalf("matches(%v, %q, %q) = %v, want %v", tc.p.Names, tc.id, tc.address, got, tc.want)
			}
		})
	}
}
