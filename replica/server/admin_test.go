package server

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/node"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestAdminServerTLS: the admin endpoint the server runs speaks TLS with the
// raft certificates and authorizes with the token.
func TestAdminServerTLS(t *testing.T) {
	ca, err := testpki.NewCA("raft")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files, err := ca.Issue(filepath.Join(dir, "tls"), "solo")
	if err != nil {
		t.Fatal(err)
	}
	raftAddr := freeAddr(t)
	n, err := node.New(node.NodeConfig{
		ID: "solo", ClusterID: "c", BindAddr: raftAddr, DataDir: filepath.Join(dir, "data"),
		Peers: []node.Peer{{ID: "solo", Address: raftAddr}}, AdminToken: "tok",
		TLS: node.TLSFiles{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile},
	}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- adminServer(addr, n).Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	cfg, err := testpki.ClientTLS(testpki.Files{CAFile: files.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	get := func(scheme, token string, tc *tls.Config) (int, error) {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+addr+"/status", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		code, err := get("https", "tok", cfg)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /status with the token: %d %v", code, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, _ := get("https", "", cfg); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
	if code, _ := get("https", "wrong", cfg); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	if code, err := get("http", "tok", nil); err == nil && code == http.StatusOK {
		t.Error("plain HTTP served")
	}
}
