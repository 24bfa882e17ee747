package node_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

var key = fsm.Key{Cluster: "m1", Namespace: "ns", Name: "web"}

// reserve commits a Reserve through the cluster's current leader. A Reserve
// is fenced by the term it was proposed in, so when leadership moves while
// it is under way (a loaded machine can cause an election at any time) it
// is refused as stale and proposed again by the next leader.
func reserve(t *testing.T, c *tu.Cluster, count int) []string {
	t.Helper()
	var names []string
	tu.Eventually(t, 30*time.Second, func() error {
		n := c.WaitLeader(10 * time.Second)
		res, err := n.Apply(tu.Ctx(t, 10*time.Second), &fsm.Reserve{Meta: n.Meta(), Key: key, Target: 1000, Count: count, Prefix: "web-", TTL: int64(time.Hour)})
		if err != nil {
			return fmt.Errorf("reserve: %w", err)
		}
		names = res.Names
		return nil
	})
	return names
}

func TestElectionAndForwarding(t *testing.T) {
	for _, size := range []int{3, 5} {
		t.Run(fmt.Sprintf("%d nodes", size), func(t *testing.T) {
			c := tu.NewCluster(t, size, nil)
			c.StartAll()
			leader := c.WaitVoters(size, 20*time.Second)
			var follower *node.Node
			for _, n := range c.Live() {
				if n != leader {
					follower = n
				}
			}
			if _, ok := follower.Allowed(); ok {
				t.Fatal("a follower permits member writes")
			}
			frs := fsm.FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
			// A follower's write is forwarded to the leader.
			// Both writes are idempotent: retried while an election under
			// load leaves no leader to forward to ("not the leader").
			tu.Eventually(t, 2*time.Minute, func() error {
				return follower.SetTargets(tu.Ctx(t, 10*time.Second), frs, 1, map[string]int32{"m1": 3})
			})
			tu.Eventually(t, 2*time.Minute, func() error {
				return follower.SetMemberHealth(tu.Ctx(t, 10*time.Second), "m1", true, time.Unix(100, 0))
			})
			for _, n := range c.Live() {
				tu.Eventually(t, 5*time.Second, func() error {
					got, gen, ok := n.Targets(frs)
					if !ok || gen != 1 || got["m1"] != 3 {
						return fmt.Errorf("%s has targets %v gen %d", n.ServerID(), got, gen)
					}
					if h, since, ok := n.MemberHealth("m1"); !ok || !h || !since.Equal(time.Unix(100, 0)) {
						return fmt.Errorf("%s has health %v %v", n.ServerID(), h, since)
					}
					return nil
				})
			}
			if err := follower.SetTargets(tu.Ctx(t, 10*time.Second), frs, 0, map[string]int32{"m1": 9}); !errors.Is(err, fsm.ErrStale) {
				t.Fatalf("older generation: got %v, want ErrStale", err)
			}
		})
	}
}

func TestLeaderKillKeepsCommittedState(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	frs := fsm.FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
	if err := leader.SetTargets(tu.Ctx(t, 5*time.Second), frs, 4, map[string]int32{"m1": 5, "m2": 2}); err != nil {
		t.Fatal(err)
	}
	names := reserve(t, c, 4)
	leader = c.WaitLeader(10 * time.Second)
	c.Kill(c.Index(leader))
	next := c.WaitLeader(10*time.Second, leader)
	// The new leader's context opens only after its Barrier, so its FSM holds
	// everything the old leader committed.
	v := next.FSM().View(key)
	for _, n := range names {
		if _, ok := v.Reservations[n]; !ok {
			t.Fatalf("new leader lost reservation %s", n)
		}
	}
	if got, gen, ok := next.Targets(frs); !ok || gen != 4 || got["m1"] != 5 || got["m2"] != 2 {
		t.Fatalf("new leader has targets %v gen %d", got, gen)
	}
	if _, term, ok := next.Leading(); !ok || term < 2 {
		t.Fatalf("leading term %d ok %v", term, ok)
	}
}

func TestPartitionedLeaderLosesGateBeforeNewLeader(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	old := c.WaitVoters(3, 20*time.Second)
	ctx, _ := old.Allowed()
	old.SetIsolated(true)
	cut := time.Now()
	var closedAfter time.Duration
	tu.Eventually(t, 5*time.Second, func() error {
		if _, ok := old.Allowed(); ok {
			return errors.New("isolated leader still allowed")
		}
		closedAfter = time.Since(cut)
		return nil
	})
	next := c.WaitLeader(10*time.Second, old)
	// Safety, not speed: by the time the majority's leader may write, the
	// isolated one must not.
	if _, ok := old.Allowed(); ok {
		t.Fatal("two nodes permit member writes at once")
	}
	tu.Eventually(t, 2*time.Second, func() error {
		if context.Cause(ctx) == nil {
			return errors.New("old leader context not cancelled")
		}
		return nil
	})
	if !errors.Is(context.Cause(ctx), node.ErrLeadershipLost) {
		t.Fatalf("old leader context cause %v", context.Cause(ctx))
	}
	t.Logf("isolated leader's gate closed after %s (lease %s); new leader %s", closedAfter, c.Cfgs[0].LeaderLeaseTimeout, next.ServerID())
	// Heal: the old leader rejoins as a follower and catches up.
	old.SetIsolated(false)
	names := reserve(t, c, 2)
	tu.Eventually(t, 10*time.Second, func() error {
		if _, ok := old.FSM().View(key).Reservations[names[1]]; !ok {
			return errors.New("healed node did not catch up")
		}
		return nil
	})
}

func TestSnapshotRestoreAndRestart(t *testing.T) {
	c := tu.NewCluster(t, 3, func(_ int, cfg *node.NodeConfig) { cfg.TrailingLogs = 10 })
	c.StartAll()
	c.WaitVoters(3, 20*time.Second)
	var all []string
	for range 30 {
		all = append(all, reserve(t, c, 2)...)
	}
	for _, n := range c.Live() {
		if err := n.Raft().Snapshot().Error(); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
	}
	all = append(all, reserve(t, c, 2)...) // after the snapshot: replayed from the log
	for i := range c.Cfgs {
		c.Kill(i)
	}
	c.StartAll()
	c.WaitVoters(3, 20*time.Second)
	for _, n := range c.Live() {
		tu.Eventually(t, 10*time.Second, func() error {
			v := n.FSM().View(key)
			for _, name := range all {
				if _, ok := v.Reservations[name]; !ok {
					return fmt.Errorf("%s lost %s after restart", n.ServerID(), name)
				}
			}
			return nil
		})
	}
	// A wiped follower rejoins under a new UUID and is restored from a snapshot.
	l := c.WaitLeader(10 * time.Second)
	victim := (c.Index(l) + 1) % 3
	oldID := c.Node(victim).ServerID()
	c.Kill(victim)
	if err := os.RemoveAll(c.Cfgs[victim].DataDir); err != nil {
		t.Fatal(err)
	}
	fresh := c.Start(victim)
	if fresh.ServerID() == oldID {
		t.Fatal("wiped node kept its server ID")
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if _, ok := fresh.FSM().View(key).Reservations[all[len(all)-1]]; !ok {
			return errors.New("wiped node not restored")
		}
		s, _ := c.WaitLeader(5 * time.Second).Servers()
		for _, x := range s {
			if x.ID == oldID {
				return errors.New("stale server ID still in configuration")
			}
		}
		if len(s) != 3 {
			return fmt.Errorf("configuration has %d servers", len(s))
		}
		return nil
	})
}

func TestMutualTLS(t *testing.T) {
	ca := tu.NewCA(t, "good")
	dirs := t.TempDir()
	c := tu.NewCluster(t, 3, func(i int, cfg *node.NodeConfig) {
		cert, key, caf := ca.Issue(t, filepath.Join(dirs, cfg.ID), cfg.ID)
		cfg.TLS = node.TLSFiles{CertFile: cert, KeyFile: key, CAFile: caf}
	})
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	reserve(t, c, 1)

	// A fourth replica whose certificate comes from another CA is refused.
	bad := tu.NewCA(t, "evil")
	cfg := c.Cfgs[0]
	cfg.ID = "r3"
	cfg.BindAddr = tu.FreePort(t)
	cfg.Peers = append(append([]node.Peer(nil), cfg.Peers...), node.Peer{ID: "r3", Address: cfg.BindAddr})
	cfg.DataDir = filepath.Join(t.TempDir(), "r3")
	cert, key, caf := bad.Issue(t, filepath.Join(dirs, "evil"), "r3")
	cfg.TLS = node.TLSFiles{CertFile: cert, KeyFile: key, CAFile: caf}
	intruder, err := node.New(cfg, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer intruder.Kill()
	time.Sleep(time.Second) // several join attempts
	s, err := leader.Servers()
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range s {
		if strings.HasPrefix(x.ID, "r3-") {
			t.Fatal("peer with a foreign certificate joined")
		}
	}
	if len(s) != 3 {
		t.Fatalf("configuration has %d servers", len(s))
	}
	if _, err := intruder.Apply(tu.Ctx(t, 500*time.Millisecond), &fsm.SetHealth{Meta: intruder.Meta(), Cluster: "x"}); err == nil {
		t.Fatal("peer with a foreign certificate could forward a write")
	}
}

func TestMembership3To5To3(t *testing.T) {
	c := tu.NewCluster(t, 5, func(_ int, cfg *node.NodeConfig) { cfg.AdminToken = "s3cret" })
	for i := range 3 {
		// The first three know only each other, as a 3-replica StatefulSet would.
		c.Cfgs[i].Peers = c.Cfgs[i].Peers[:3]
		c.Start(i)
	}
	c.WaitVoters(3, 20*time.Second)
	c.Start(3)
	c.Start(4)
	leader := c.WaitVoters(5, 20*time.Second)
	names := reserve(t, c, 1)

	srv := httptest.NewServer(leader.AdminHandler())
	defer srv.Close()
	del := func(id, token string) int {
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/raft/servers/"+id, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := del(c.Node(4).ServerID(), ""); code != http.StatusUnauthorized {
		t.Fatalf("unauthenticated removal got %d", code)
	}
	if code := del(c.Node(4).ServerID(), "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong token got %d", code)
	}
	for _, i := range []int{4, 3} {
		tu.Eventually(t, 30*time.Second, func() error {
			// A transfer fails when the target does not win within an
			// election timeout; retry.
			if l := c.WaitLeader(10 * time.Second); l == c.Node(i) {
				if err := l.TransferLeadership(); err != nil {
					return err
				}
				return errors.New("transferred; waiting for the next leader")
			}
			return nil
		})
		if code := del(c.Node(i).ServerID(), "s3cret"); code != http.StatusOK {
			t.Fatalf("removing r%d got %d", i, code)
		}
		c.Kill(i)
	}
	leader = c.WaitVoters(3, 20*time.Second)
	if _, ok := leader.FSM().View(key).Reservations[names[0]]; !ok {
		t.Fatal("state lost across membership changes")
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/readyz", nil)
	req.Header.Set("Authorization", "Bearer s3cret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz: %v %v", resp, err)
	}
	resp.Body.Close()
}

func TestRefusesForeignOrCorruptDataDir(t *testing.T) {
	c := tu.NewCluster(t, 1, nil)
	n := c.Start(0)
	c.WaitLeader(10 * time.Second)
	_ = n
	c.Kill(0)

	cfg := c.Cfgs[0]
	cfg.ClusterID = "another-cluster"
	if _, err := node.New(cfg, logr.Discard()); !errors.Is(err, node.ErrForeignDataDir) {
		t.Fatalf("foreign cluster data dir: got %v", err)
	} else {
		t.Logf("refused with: %v", err)
	}
	cfg = c.Cfgs[0]
	cfg.ID = "someone-else"
	cfg.Peers = []node.Peer{{ID: "someone-else", Address: cfg.BindAddr}}
	if _, err := node.New(cfg, logr.Discard()); !errors.Is(err, node.ErrForeignDataDir) {
		t.Fatalf("another replica's data dir: got %v", err)
	}

	db := filepath.Join(c.Cfgs[0].DataDir, "raft.db")
	if err := os.WriteFile(db, []byte(strings.Repeat("garbage!", 2048)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := node.New(c.Cfgs[0], logr.Discard()); err == nil {
		t.Fatal("corrupt log store accepted")
	} else {
		t.Logf("corrupt store refused with: %v", err)
	}
}

func TestConfigValidation(t *testing.T) {
	good := node.NodeConfig{ID: "a", ClusterID: "c", BindAddr: "127.0.0.1:0", DataDir: "/tmp/x", Peers: []node.Peer{{ID: "a", Address: "a:1"}}}
	tests := map[string]func(*node.NodeConfig){
		"no id":          func(c *node.NodeConfig) { c.ID = "" },
		"self not peer":  func(c *node.NodeConfig) { c.Peers = []node.Peer{{ID: "b", Address: "b:1"}} },
		"lease > hb":     func(c *node.NodeConfig) { c.HeartbeatTimeout = time.Second; c.LeaderLeaseTimeout = 2 * time.Second },
		"partial tls":    func(c *node.NodeConfig) { c.TLS.CertFile = "x" },
		"no cluster id":  func(c *node.NodeConfig) { c.ClusterID = "" },
		"duplicate peer": func(c *node.NodeConfig) { c.Peers = append(c.Peers, c.Peers[0]) },
	}
	for name, mod := range tests {
		t.Run(name, func(t *testing.T) {
			cfg := good
			cfg.DataDir = t.TempDir()
			mod(&cfg)
			if _, err := node.New(cfg, logr.Discard()); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}

// TestStepDownDrainsBeforeTransfer: on a graceful stop the leader closes its
// member-write gate (cancelling the permits' contexts), waits until every
// permit is done, runs the BeforeTransfer hooks, and only then hands
// leadership over, once.
func TestStepDownDrainsBeforeTransfer(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	leader := c.WaitVoters(3, 20*time.Second)
	_, term, _ := leader.Leading()
	wctx, permitTerm, done, ok := leader.Enter()
	if !ok || permitTerm != term {
		t.Fatalf("leader refused a permit (ok %v, term %d/%d)", ok, permitTerm, term)
	}
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	leader.BeforeTransfer(func(context.Context) {
		note("hook")
		if !leader.IsLeader() {
			t.Error("leadership moved before the hooks ran")
		}
	})
	stepped := make(chan error, 1)
	go func() { stepped <- leader.StepDown() }()
	tu.Eventually(t, 10*time.Second, func() error {
		if wctx.Err() == nil {
			return errors.New("permit context not cancelled")
		}
		return nil
	})
	if !errors.Is(context.Cause(wctx), node.ErrGateClosed) {
		t.Fatalf("permit cancelled with %v", context.Cause(wctx))
	}
	if _, ok := leader.Allowed(); ok {
		t.Fatal("gate open while stepping down")
	}
	if !leader.IsLeader() {
		t.Fatal("leadership transferred while a permit was open")
	}
	note("done")
	done()
	if err := <-stepped; err != nil {
		t.Fatalf("step down: %v", err)
	}
	next := c.WaitLeader(20*time.Second, leader)
	mu.Lock()
	if fmt.Sprint(order) != "[done hook]" {
		t.Fatalf("order %v, want [done hook]", order)
	}
	mu.Unlock()
	if _, _, _, ok := leader.Enter(); ok {
		t.Fatal("stepped-down node grants permits")
	}
	// A second StepDown (Shutdown calls it again) does not transfer again.
	_, nextTerm, _ := next.Leading()
	if err := leader.Shutdown(); err != nil {
		t.Fatal(err)
	}
	if _, t2, ok := next.Leading(); !ok || t2 != nextTerm {
		t.Fatalf("leadership moved again on Shutdown: term %d -> %d (leading %v)", nextTerm, t2, ok)
	}
}

// TestTransferLeadershipPausesGate: an admin transfer closes the gate first;
// when the transfer cannot happen the gate opens again.
func TestTransferLeadershipPausesGate(t *testing.T) {
	c := tu.NewCluster(t, 1, nil)
	c.StartAll()
	n := c.WaitLeader(10 * time.Second)
	wctx, _ := n.Allowed()
	if err := n.TransferLeadership(); err == nil {
		t.Fatal("transfer without another voter succeeded")
	}
	if !errors.Is(context.Cause(wctx), node.ErrGateClosed) {
		t.Fatalf("gate not closed during the transfer attempt: %v", context.Cause(wctx))
	}
	if _, ok := n.Allowed(); !ok {
		t.Fatal("gate did not reopen after the failed transfer")
	}
}
