package node_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/raftstore/transport"
)

const adminToken = "s3cret-admin-token"

// serveAdmin serves n's admin handler over TLS as the server does.
func serveAdmin(t *testing.T, n *node.Node) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: n.AdminHandler(), ReadHeaderTimeout: 5 * time.Second, TLSConfig: n.AdminTLSConfig()}
	go func() { _ = srv.Serve(tls.NewListener(l, srv.TLSConfig)) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// raftStream is a raft.StreamLayer that dials with the given TLS client
// configuration (nil: plain TCP), for speaking raft to a node as a stranger.
type raftStream struct {
	tls    *tls.Config
	closed chan struct{}
}

func (s *raftStream) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", string(addr), timeout)
	if err != nil {
		return nil, err
	}
	if s.tls != nil {
		tc := tls.Client(c, s.tls)
		if err := tc.HandshakeContext(context.Background()); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if _, err := c.Write([]byte{transport.ProtoRaft}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func (s *raftStream) Accept() (net.Conn, error) { <-s.closed; return nil, net.ErrClosed }
func (s *raftStream) Close() error              { close(s.closed); return nil }
func (s *raftStream) Addr() net.Addr            { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1} }

// rpcCall sends one side-channel request; it returns the reply's error
// text, or the transport error.
func rpcCall(cfg *tls.Config, addr string, req map[string]any) (string, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if cfg != nil {
		tc := tls.Client(c, cfg)
		if err := tc.Handshake(); err != nil {
			return "", err
		}
		c = tc
	}
	body, _ := json.Marshal(req)
	frame := append([]byte{transport.ProtoRPC, 0, 0, 0, 0}, body...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(body)))
	if _, err := c.Write(frame); err != nil {
		return "", err
	}
	var hdr [4]byte
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return "", err
	}
	b := make([]byte, binary.BigEndian.Uint32(hdr[:]))
	if _, err := io.ReadFull(c, b); err != nil {
		return "", err
	}
	var resp struct {
		Err string `json:"err"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return "", err
	}
	return resp.Err, nil
}

// TestRefusesUnauthenticatedPeers: a client with no TLS, without a
// certificate, with a certificate of another CA, or with a certificate of
// the right CA whose identity is not a raft peer is refused on the raft
// port (each raft RPC and each side-channel RPC) and the admin port (each
// endpoint) of every replica, and the cluster's state does not change.
func TestRefusesUnauthenticatedPeers(t *testing.T) {
	c := tu.NewCluster(t, 3, func(_ int, cfg *node.NodeConfig) {
		tu.StableTimers(0, cfg)
		cfg.AdminToken = adminToken
	})
	c.StartAll()
	leader := c.WaitVoters(3, 30*time.Second)
	servers, err := leader.Servers()
	if err != nil {
		t.Fatal(err)
	}
	admins := make([]string, 3)
	for i := range 3 {
		admins[i] = serveAdmin(t, c.Node(i))
	}

	dir := t.TempDir()
	issue := func(ca *testpki.CA, name string) testpki.Files {
		f, err := ca.Issue(filepath.Join(dir, name), name)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	clientTLS := func(f testpki.Files) *tls.Config {
		cfg, err := testpki.ClientTLS(f)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "127.0.0.1"
		return cfg
	}
	other, err := testpki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	// The foreign certificate carries a voter's name: only the CA is wrong.
	foreign := issue(other, "r1")
	foreignCfg := clientTLS(foreign)
	foreignCfg.RootCAs = clientTLS(c.TLSFor(0)).RootCAs // it trusts the servers
	noCert := clientTLS(testpki.Files{CAFile: c.TLSFor(0).CAFile})
	clients := []struct {
		name string
		tls  *tls.Config // nil: plain TCP
	}{
		{"plain TCP", nil},
		{"no certificate", noCert},
		{"certificate of another CA", foreignCfg},
		{"valid certificate, identity not a peer", clientTLS(issue(c.CA.CA, "intruder"))},
	}

	cmd, err := fsm.Encode(&fsm.SetHealth{Meta: leader.Meta(), Cluster: "evil", Healthy: true, Since: 1})
	if err != nil {
		t.Fatal(err)
	}
	victim := servers[1]
	rpcs := []struct {
		op  string
		req map[string]any
	}{
		{"status", map[string]any{"op": "status"}},
		{"apply", map[string]any{"op": "apply", "data": cmd}},
		{"applyall", map[string]any{"op": "applyall", "batch": [][]byte{cmd, cmd}}},
		{"contact", map[string]any{"op": "contact"}},
		{"join", map[string]any{"op": "join", "id": "intruder-1", "address": "127.0.0.1:1"}},
		{"join with a peer's name and the admin token", map[string]any{"op": "join", "id": victim.ID, "address": "127.0.0.1:1", "token": adminToken}},
		{"addvoter", map[string]any{"op": "addvoter", "id": "intruder-1", "address": "127.0.0.1:1"}},
		{"remove", map[string]any{"op": "remove", "id": victim.ID}},
	}
	hdr := raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("intruder"), Addr: []byte("127.0.0.1:1")}
	type raftOp struct {
		name string
		call func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) error
	}
	raftOps := []raftOp{
		{"AppendEntries", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) error {
			return tr.AppendEntries(id, addr, &raft.AppendEntriesRequest{RPCHeader: hdr, Term: 1 << 40,
				Entries: []*raft.Log{{Index: 1 << 40, Term: 1 << 40, Type: raft.LogCommand, Data: cmd}}}, &raft.AppendEntriesResponse{})
		}},
		{"RequestVote", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) error {
			return tr.RequestVote(id, addr, &raft.RequestVoteRequest{RPCHeader: hdr, Term: 1 << 40, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40}, &raft.RequestVoteResponse{})
		}},
		{"InstallSnapshot", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) error {
			snap := []byte(`{}`)
			return tr.InstallSnapshot(id, addr, &raft.InstallSnapshotRequest{RPCHeader: hdr, SnapshotVersion: 1, Term: 1 << 40, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40, Size: int64(len(snap))},
				&raft.InstallSnapshotResponse{}, bytes.NewReader(snap))
		}},
		{"TimeoutNow", func(tr *raft.NetworkTransport, id raft.ServerID, addr raft.ServerAddress) error {
			return tr.TimeoutNow(id, addr, &raft.TimeoutNowRequest{RPCHeader: hdr}, &raft.TimeoutNowResponse{})
		}},
	}
	adminOps := []struct{ method, path, body string }{
		{http.MethodGet, "/status", ""},
		{http.MethodGet, "/livez", ""},
		{http.MethodGet, "/readyz", ""},
		{http.MethodGet, "/raft/servers", ""},
		{http.MethodPost, "/raft/voters", `{"id":"intruder-1","address":"127.0.0.1:1"}`},
		{http.MethodDelete, "/raft/servers/" + victim.ID, ""},
		{http.MethodPost, "/raft/leadership-transfer", ""},
	}

	for _, cl := range clients {
		t.Run(cl.name, func(t *testing.T) {
			stream := &raftStream{tls: cl.tls, closed: make(chan struct{})}
			tr := raft.NewNetworkTransport(stream, 1, 10*time.Second, io.Discard)
			defer tr.Close()
			for i, s := range servers {
				n := c.Node(i)
				addr := n.ListenAddr().String()
				for _, op := range raftOps {
					t.Run(fmt.Sprintf("r%d/raft/%s", i, op.name), func(t *testing.T) {
						err := op.call(tr, raft.ServerID(s.ID), raft.ServerAddress(addr))
						if err == nil {
							t.Fatal("accepted")
						}
						t.Logf("refused: %v", err)
					})
				}
				for _, op := range rpcs {
					t.Run(fmt.Sprintf("r%d/rpc/%s", i, op.op), func(t *testing.T) {
						msg, err := rpcCall(cl.tls, addr, op.req)
						if err == nil && !strings.Contains(msg, "unauthorized") {
							t.Fatalf("accepted (reply error %q)", msg)
						}
					})
				}
				for _, op := range adminOps {
					t.Run(fmt.Sprintf("r%d/admin/%s %s", i, op.method, op.path), func(t *testing.T) {
						scheme := "https"
						hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cl.tls}}
						if cl.tls == nil {
							scheme = "http"
							hc.Transport = &http.Transport{}
						}
						req, _ := http.NewRequest(op.method, scheme+"://"+admins[i]+op.path, strings.NewReader(op.body))
						resp, err := hc.Do(req)
						if err != nil {
							return // refused in the TLS handshake
						}
						defer resp.Body.Close()
						switch resp.StatusCode {
						case http.StatusBadRequest, http.StatusUnauthorized, http.StatusForbidden:
						default:
							t.Fatalf("got %s", resp.Status)
						}
					})
				}
			}
		})
	}

	// Nothing changed: same voters, no forged health record.
	after := c.WaitVoters(3, 30*time.Second)
	now, err := after.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for i := range servers {
		if now[i].ID != servers[i].ID {
			t.Fatalf("configuration changed: %v -> %v", servers, now)
		}
	}
	for _, n := range c.Live() {
		if _, _, ok := n.MemberHealth("evil"); ok {
			t.Fatal("a refused apply was committed")
		}
	}

	// The same calls work for the rightful callers: a voter's certificate
	// reads status on the admin port and the raft port; the token reads too.
	voterCfg := clientTLS(c.TLSFor(1))
	if msg, err := rpcCall(voterCfg, c.Node(0).ListenAddr().String(), map[string]any{"op": "status"}); err != nil || msg != "" {
		t.Fatalf("voter status RPC: %q %v", msg, err)
	}
	for _, cl := range []struct {
		name  string
		tls   *tls.Config
		token string
	}{{"voter certificate", voterCfg, ""}, {"token", noCert, adminToken}} {
		hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: cl.tls}}
		req, _ := http.NewRequest(http.MethodGet, "https://"+admins[0]+"/status", nil)
		if cl.token != "" {
			req.Header.Set("Authorization", "Bearer "+cl.token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", cl.name, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: GET /status got %s", cl.name, resp.Status)
		}
	}
}

// TestJoinNeedsIdentityAndToken: a new replica with a certificate of the
// right CA joins only with the admin token and only under its own name.
func TestJoinNeedsIdentityAndToken(t *testing.T) {
	c := tu.NewCluster(t, 4, func(_ int, cfg *node.NodeConfig) { cfg.AdminToken = adminToken })
	for i := range 3 {
		c.Cfgs[i].Peers = c.Cfgs[i].Peers[:3]
		c.Start(i)
	}
	leader := c.WaitVoters(3, 30*time.Second)

	// r3's own certificate, asking the leader directly.
	cfg, err := testpki.ClientTLS(c.TLSFor(3))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ServerName = "127.0.0.1"
	addr := leader.ListenAddr().String()
	servers, err := leader.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		req  map[string]any
	}{
		{"no token", map[string]any{"op": "join", "id": "r3-x", "address": c.Cfgs[3].BindAddr}},
		{"wrong token", map[string]any{"op": "join", "id": "r3-x", "address": c.Cfgs[3].BindAddr, "token": "wrong"}},
		{"another name", map[string]any{"op": "join", "id": servers[1].ID, "address": c.Cfgs[3].BindAddr, "token": adminToken}},
		{"apply before joining", map[string]any{"op": "apply", "data": []byte("x")}},
		{"applyall before joining", map[string]any{"op": "applyall", "batch": [][]byte{[]byte("x")}}},
		{"contact before joining", map[string]any{"op": "contact"}},
	} {
		msg, err := rpcCall(cfg, addr, tc.req)
		if err != nil || !strings.Contains(msg, "unauthorized") {
			t.Fatalf("%s: got %q, %v", tc.name, msg, err)
		}
	}
	if s, _ := leader.Servers(); len(s) != 3 {
		t.Fatalf("configuration changed: %v", s)
	}

	// With the token it joins.
	c.Start(3)
	c.WaitVoters(4, 30*time.Second)
}

// TestCertificateRotation: replacing every replica's certificate files with
// a new certificate from the same CA takes effect for new connections
// without a restart, and the cluster keeps committing.
func TestCertificateRotation(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	c.WaitVoters(3, 30*time.Second)
	reserve(t, c, 1)

	serial := func(i int) string {
		cfg, err := testpki.ClientTLS(c.TLSFor((i + 1) % 3))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ServerName = "127.0.0.1"
		conn, err := tls.Dial("tcp", c.Node(i).ListenAddr().String(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	before := make([]string, 3)
	for i := range 3 {
		before[i] = serial(i)
	}
	for i := range 3 {
		f := c.TLSFor(i)
		if _, err := c.CA.CA.Issue(filepath.Dir(f.CertFile), c.Cfgs[i].ID); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		if got := serial(i); got == before[i] {
			t.Fatalf("r%d still serves its old certificate %s", i, got)
		}
	}
	// Drop every open connection: raft and the RPCs redial with the new
	// certificates on both sides.
	for _, n := range c.Live() {
		n.SetIsolated(true)
		n.SetIsolated(false)
	}
	c.WaitVoters(3, 30*time.Second)
	reserve(t, c, 1)
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if err := n.Ready(); err != nil {
				return err
			}
		}
		return nil
	})
}
