package node_test

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/internal/test/secretscan"
	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/node"
)

// lockedBuffer collects log lines from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) write(prefix, args string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(&l.b, prefix, args)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestNoSecretsInLogs runs replicas at the highest verbosity through
// joins, refused joins and admin calls with right and wrong tokens, a
// certificate rotation and refused TLS clients, and checks that no log line
// holds the admin token, a presented wrong token or any private key.
func TestNoSecretsInLogs(t *testing.T) {
	var buf lockedBuffer
	log := funcr.New(buf.write, funcr.Options{Verbosity: 10})
	c := tu.NewCluster(t, 4, func(_ int, cfg *node.NodeConfig) { cfg.AdminToken = adminToken })
	c.Log = log
	for i := range 3 {
		c.Cfgs[i].Peers = c.Cfgs[i].Peers[:3]
		c.Start(i)
	}
	c.WaitVoters(3, 30*time.Second)
	c.Start(3) // joins with the token
	leader := c.WaitVoters(4, 30*time.Second)
	reserve(t, c, 1)

	const wrongToken = "wrong-token-presented-by-a-caller"
	cfg, err := testpki.ClientTLS(c.TLSFor(3))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	strangerFiles, err := c.CA.CA.Issue(t.TempDir(), "stranger")
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := testpki.ClientTLS(strangerFiles)
	if err != nil {
		t.Fatal(err)
	}
	stranger.ServerName = "127.0.0.1"
	addr := leader.ListenAddr().String()
	for _, req := range []map[string]any{
		{"op": "join", "id": "stranger-1", "address": "127.0.0.1:1", "token": wrongToken},
		{"op": "addvoter", "id": "stranger-1", "address": "127.0.0.1:1", "token": wrongToken},
		{"op": "status", "token": wrongToken},
	} {
		if msg, err := rpcCall(stranger, addr, req); err == nil && !strings.Contains(msg, "unauthorized") {
			t.Fatalf("%v accepted", req["op"])
		}
	}
	if _, err := rpcCall(nil, addr, map[string]any{"op": "status", "token": wrongToken}); err == nil {
		t.Fatal("plain TCP accepted")
	}

	admin := serveAdmin(t, leader)
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cfg.RootCAs, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}}}
	for _, tok := range []string{adminToken, wrongToken} {
		req, _ := http.NewRequest(http.MethodPost, "https://"+admin+"/raft/voters", strings.NewReader(`{"id":"x-1","address":"127.0.0.1:1"}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}

	// Rotate r1's certificate: reloading logs what it loaded.
	f := c.TLSFor(1)
	if _, err := c.CA.CA.Issue(strings.TrimSuffix(f.CertFile, "/tls.crt"), "r1"); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 30*time.Second, func() error {
		if !strings.Contains(buf.String(), "Reloaded TLS certificates") {
			// A handshake triggers the reload.
			_, _ = rpcCall(cfg, c.Node(1).ListenAddr().String(), map[string]any{"op": "status"})
			return fmt.Errorf("no reload logged yet")
		}
		return nil
	})

	for i := range 4 {
		c.Kill(i)
	}
	logs := buf.String()
	if !strings.Contains(logs, "Refused RPC") {
		t.Fatal("the refusals were not logged at all; the test captured nothing")
	}
	secrets := secretscan.New()
	secrets.Add(adminToken, "admin token")
	secrets.Add(wrongToken, "wrong token")
	keyFiles := []string{strangerFiles.KeyFile}
	for i := range 4 {
		keyFiles = append(keyFiles, c.TLSFor(i).KeyFile)
	}
	for _, kf := range keyFiles {
		if err := secrets.AddPEMFile(kf, "private key "+kf); err != nil {
			t.Fatal(err)
		}
	}
	found, err := secrets.Scan(strings.NewReader(logs), "logs")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s", f)
	}
	t.Logf("checked %d bytes of logs for %d secrets", len(logs), secrets.Len())
}
