// Package rafttest starts in-process raft clusters on loopback for the
// raftstore tests and benchmarks, and issues test certificates.
package rafttest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"

	"github.com/replicafed/replicafed/internal/test/testnet"
	"github.com/replicafed/replicafed/internal/test/testpki"
	"github.com/replicafed/replicafed/raftstore/node"
)

// FreePort returns an address on this test process's own loopback address
// (testnet.Host) with a port no other process takes and this process never
// hands out twice. Ports on 127.0.0.1 chosen a moment before the bind were
// taken in between while another make test ran beside this one ("address
// already in use"): first from the kernel's ephemeral range, then from
// 20000-32000, where the other run's raft tests and this process's own later
// picks could land on it.
func FreePort(tb testing.TB) string {
	tb.Helper()
	addr, err := testnet.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}

// Cluster is a set of nodes in one process.
type Cluster struct {
	TB    testing.TB
	Cfgs  []node.NodeConfig
	mu    sync.Mutex
	Nodes []*node.Node // nil while stopped
	Log   logr.Logger
	// CA issued every node's certificate.
	CA *CA
}

// FastTimers are short raft timers for tests.
func FastTimers(c *node.NodeConfig) {
	c.HeartbeatTimeout = 300 * time.Millisecond
	c.ElectionTimeout = 300 * time.Millisecond
	c.LeaderLeaseTimeout = 150 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.JoinInterval = 100 * time.Millisecond
	c.ApplyTimeout = 2 * time.Second
}

// StableTimers are raft's production timers (heartbeat and election 1s,
// lease 500ms) with a fast join: for tests that need one leader to stay
// leader while they work, which 300ms heartbeats do not promise on a
// loaded machine under -race.
func StableTimers(_ int, c *node.NodeConfig) {
	c.HeartbeatTimeout = time.Second
	c.ElectionTimeout = time.Second
	c.LeaderLeaseTimeout = 500 * time.Millisecond
	c.CommitTimeout = 5 * time.Millisecond
	c.JoinInterval = 100 * time.Millisecond
	c.ApplyTimeout = 5 * time.Second
}

// NewCluster prepares n node configs (started separately) with peers
// r0..r{n-1}, each with a certificate for its name from the cluster's CA
// (mutual TLS, as in production); mod may change that.
func NewCluster(tb testing.TB, n int, mod func(i int, c *node.NodeConfig)) *Cluster {
	tb.Helper()
	c := &Cluster{TB: tb, Log: logr.Discard(), CA: NewCA(tb, "raft-ca")}
	if os.Getenv("RAFTSTORE_TEST_LOG") != "" {
		c.Log = testr.NewWithOptions(tb.(*testing.T), testr.Options{Verbosity: 1})
	}
	dir := tb.TempDir()
	var peers []node.Peer
	for i := range n {
		peers = append(peers, node.Peer{ID: fmt.Sprintf("r%d", i), Address: FreePort(tb)})
	}
	for i := range n {
		cfg := node.NodeConfig{
			ID: peers[i].ID, ClusterID: "test-cluster", BindAddr: peers[i].Address,
			Peers: peers, DataDir: filepath.Join(dir, peers[i].ID),
		}
		cert, key, ca := c.CA.Issue(tb, filepath.Join(dir, "tls", peers[i].ID), peers[i].ID)
		cfg.TLS = node.TLSFiles{CertFile: cert, KeyFile: key, CAFile: ca}
		FastTimers(&cfg)
		if mod != nil {
			mod(i, &cfg)
		}
		c.Cfgs = append(c.Cfgs, cfg)
		c.Nodes = append(c.Nodes, nil)
	}
	tb.Cleanup(func() {
		for i := range c.Nodes {
			c.Kill(i)
		}
	})
	return c
}

// Start starts node i.
func (c *Cluster) Start(i int) *node.Node {
	c.TB.Helper()
	n, err := node.New(c.Cfgs[i], c.Log.WithName(c.Cfgs[i].ID))
	if err != nil {
		c.TB.Fatalf("starting node %d: %v", i, err)
	}
	c.mu.Lock()
	c.Nodes[i] = n
	c.mu.Unlock()
	return n
}

// StartAll starts every node.
func (c *Cluster) StartAll() {
	for i := range c.Cfgs {
		c.Start(i)
	}
}

// Node returns node i or nil.
func (c *Cluster) Node(i int) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Nodes[i]
}

// Kill stops node i like a crash.
func (c *Cluster) Kill(i int) {
	c.mu.Lock()
	n := c.Nodes[i]
	c.Nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		_ = n.Kill()
	}
}

// Live returns the running nodes.
func (c *Cluster) Live() []*node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*node.Node
	for _, n := range c.Nodes {
		if n != nil {
			out = append(out, n)
		}
	}
	return out
}

// Index returns the position of n.
func (c *Cluster) Index(n *node.Node) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, m := range c.Nodes {
		if m == n {
			return i
		}
	}
	return -1
}

// WaitLeader waits until some running node (other than the excluded ones)
// leads and permits member writes.
func (c *Cluster) WaitLeader(timeout time.Duration, exclude ...*node.Node) *node.Node {
	c.TB.Helper()
	deadline := time.Now().Add(loaded(timeout))
	for time.Now().Before(deadline) {
	next:
		for _, n := range c.Live() {
			for _, e := range exclude {
				if n == e {
					continue next
				}
			}
			if _, ok := n.Allowed(); ok {
				return n
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	c.TB.Fatalf("no leader within %s", loaded(timeout))
	return nil
}

// WaitVoters waits until the leader's configuration has want voters, every
// running node holds that same configuration itself and is ready. "Ready"
// alone is not enough: a node that just joined knows the leader (and has
// applied everything it knows to be committed) before the configuration
// entry reaches it, and then reports an empty configuration.
func (c *Cluster) WaitVoters(want int, timeout time.Duration) *node.Node {
	c.TB.Helper()
	deadline := time.Now().Add(loaded(timeout))
	var why string
	for time.Now().Before(deadline) {
		l := c.WaitLeader(time.Until(deadline))
		if why = c.votersAgree(l, want); why == "" {
			return l
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.TB.Fatalf("cluster did not reach %d voters within %s: %s", want, loaded(timeout), why)
	return nil
}

func voterSet(n *node.Node) (map[string]bool, error) {
	s, err := n.Servers()
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, x := range s {
		if x.Voter {
			out[x.ID] = true
		}
	}
	return out, nil
}

// votersAgree returns why the cluster does not (yet) agree on want voters, or "".
func (c *Cluster) votersAgree(l *node.Node, want int) string {
	lv, err := voterSet(l)
	if err != nil {
		return err.Error()
	}
	if len(lv) != want {
		return fmt.Sprintf("leader has %d voters: %v", len(lv), lv)
	}
	for _, n := range c.Live() {
		if err := n.Ready(); err != nil {
			return n.ServerID() + ": " + err.Error()
		}
		v, err := voterSet(n)
		if err != nil {
			return n.ServerID() + ": " + err.Error()
		}
		if len(v) != len(lv) {
			return fmt.Sprintf("%s has voters %v, leader %v", n.ServerID(), v, lv)
		}
		for id := range lv {
			if !v[id] {
				return fmt.Sprintf("%s has voters %v, leader %v", n.ServerID(), v, lv)
			}
		}
	}
	return ""
}

// Eventually polls f until it returns nil.
func Eventually(tb testing.TB, timeout time.Duration, f func() error) {
	tb.Helper()
	deadline := time.Now().Add(loaded(timeout))
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	tb.Fatalf("condition not met within %s: %v", loaded(timeout), err)
}

// Ctx returns a context that ends with the test.
func Ctx(tb testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	tb.Cleanup(cancel)
	return ctx
}

// CA is a test certificate authority (see internal/test/testpki).
type CA struct {
	*testpki.CA
}

// NewCA creates a CA.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	ca, err := testpki.NewCA(name)
	if err != nil {
		tb.Fatal(err)
	}
	return &CA{CA: ca}
}

// Issue writes tls.crt, tls.key and ca.crt for a loopback peer named name
// into dir, replacing what is there.
func (ca *CA) Issue(tb testing.TB, dir, name string) (certFile, keyFile, caFile string) {
	tb.Helper()
	f, err := ca.CA.Issue(dir, name)
	if err != nil {
		tb.Fatal(err)
	}
	return f.CertFile, f.KeyFile, f.CAFile
}

// TLSFor is node i's TLS configuration as NewCluster issued it.
func (c *Cluster) TLSFor(i int) testpki.Files {
	t := c.Cfgs[i].TLS
	return testpki.Files{CertFile: t.CertFile, KeyFile: t.KeyFile, CAFile: t.CAFile}
}

// minWait is the least time any wait in these helpers allows. Elections,
// joins and cleanups take milliseconds on an idle machine but many seconds
// on a loaded 2-core one running -race builds beside control planes; a
// bound only ends a test that is going to fail anyway, so it is generous.
const minWait = 2 * time.Minute

func loaded(d time.Duration) time.Duration { return max(d, minWait) }
