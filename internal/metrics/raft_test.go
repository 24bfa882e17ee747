package metrics

import (
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/replicafed/replicafed/internal/test/serieslist"
)

// seriesList is the list of series names the chart's alerts and dashboard
// may use; the e2e scrape checks it against a running fleet.
const seriesList = "../../charts/testdata/series.txt"

type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (nopFSM) Restore(r io.ReadCloser) error       { return r.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(s raft.SnapshotSink) error { return s.Close() }
func (nopSnapshot) Release()                          {}

// startRaft runs a three-voter hashicorp/raft cluster on in-memory
// transports in this process and returns it once one node leads.
func startRaft(t *testing.T) []*raft.Raft {
	t.Helper()
	ids := []raft.ServerID{"node-0", "node-1", "node-2"}
	var servers []raft.Server
	trans := map[raft.ServerID]*raft.InmemTransport{}
	for _, id := range ids {
		addr, tr := raft.NewInmemTransport(raft.ServerAddress(id))
		trans[id] = tr
		servers = append(servers, raft.Server{ID: id, Address: addr})
	}
	for _, a := range trans {
		for _, b := range trans {
			if a != b {
				a.Connect(b.LocalAddr(), b)
			}
		}
	}
	var nodes []*raft.Raft
	for _, id := range ids {
		c := raft.DefaultConfig()
		c.LocalID = id
		c.Logger = hclog.NewNullLogger()
		c.HeartbeatTimeout, c.ElectionTimeout, c.LeaderLeaseTimeout = 200*time.Millisecond, 200*time.Millisecond, 100*time.Millisecond
		logs, stable, snaps := raft.NewInmemStore(), raft.NewInmemStore(), raft.NewInmemSnapshotStore()
		if err := raft.BootstrapCluster(c, logs, stable, snaps, trans[id], raft.Configuration{Servers: servers}); err != nil {
			t.Fatalf("bootstrapping %s: %v", id, err)
		}
		r, err := raft.NewRaft(c, nopFSM{}, logs, stable, snaps, trans[id])
		if err != nil {
			t.Fatalf("starting %s: %v", id, err)
		}
		nodes = append(nodes, r)
	}
	t.Cleanup(func() {
		for _, r := range nodes {
			_ = r.Shutdown().Error()
		}
	})
	return nodes
}

func leaderOf(nodes []*raft.Raft) *raft.Raft {
	for _, r := range nodes {
		if r.State() == raft.Leader {
			return r
		}
	}
	return nil
}

// families returns the names of the metric families the registry serves
// with at least one observation (declared series start at zero).
func families(t *testing.T) []string {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var names []string
	for _, mf := range mfs {
		for _, m := range mf.Metric {
			if m.GetCounter().GetValue() > 0 || m.GetGauge().GetValue() > 0 || m.GetSummary().GetSampleCount() > 0 {
				names = append(names, mf.GetName())
				break
			}
		}
	}
	return names
}

// help returns the help text of a family.
func help(t *testing.T, name string) string {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf.GetHelp()
		}
	}
	return ""
}

// TestRaftMetricsRegistered runs real raft nodes and finds raft's own series
// (leadership changes, commit time, leader last contact, FSM apply, per-peer
// replication) with observations in controller-runtime's registry, without the legacy
// per-peer metric names. Every raft_* name of the chart's series list must
// be among them.
func TestRaftMetricsRegistered(t *testing.T) {
	if err := RegisterRaft(); err != nil {
		t.Fatal(err)
	}
	if err := RegisterRaft(); err != nil {
		t.Fatalf("second registration: %v", err)
	}
	nodes := startRaft(t)
	want := []string{
		"raft_state_follower", "raft_state_candidate", "raft_state_leader",
		"raft_apply", "raft_commitTime", "raft_fsm_apply", "raft_leader_lastContact",
		"raft_replication_heartbeat", "raft_replication_appendEntries_rpc", "raft_peers",
	}
	listed, err := serieslist.Read(seriesList)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range listed {
		if strings.HasPrefix(name, "raft_") && !slices.Contains(want, name) {
			want = append(want, name)
		}
	}
	var missing []string
	deadline := time.Now().Add(60 * time.Second)
	for {
		// Keep committing entries: summaries are served as long as the
		// process runs, but every name needs at least one observation.
		if l := leaderOf(nodes); l != nil {
			_ = l.Apply([]byte("x"), 5*time.Second).Error()
		}
		got := families(t)
		missing = missing[:0]
		for _, w := range want {
			if !slices.Contains(got, w) {
				missing = append(missing, w)
			}
		}
		if len(missing) == 0 && len(heartbeatPeers(t)) >= 2 {
			for _, name := range got {
				for _, legacy := range legacyPerPeer {
					if p := strings.ReplaceAll(legacy, ".", "_"); strings.HasPrefix(name, p) {
						t.Errorf("legacy per-peer metric %s is served", name)
					}
				}
			}
			if h := help(t, "raft_commitTime"); !strings.Contains(h, "Milliseconds") {
				t.Errorf("raft_commitTime help %q", h)
			}
			t.Logf("raft families: %s", strings.Join(slices.DeleteFunc(got, func(s string) bool { return !strings.HasPrefix(s, "raft_") }), " "))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 60s: raft series missing: %v; peers in raft_replication_heartbeat: %v", missing, heartbeatPeers(t))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// heartbeatPeers returns the peer_id labels of raft_replication_heartbeat:
// the sink keeps the peer as a label, not in the name.
func heartbeatPeers(t *testing.T) []string {
	t.Helper()
	mfs, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, mf := range mfs {
		if mf.GetName() != "raft_replication_heartbeat" {
			continue
		}
		for _, m := range mf.Metric {
			for _, l := range m.Label {
				if l.GetName() == "peer_id" {
					peers = append(peers, l.GetValue())
				}
			}
		}
	}
	return peers
}
