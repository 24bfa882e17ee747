package metrics

import (
	"fmt"
	"strings"
	"sync"

	gometrics "github.com/hashicorp/go-metrics/compat"
	gmprometheus "github.com/hashicorp/go-metrics/compat/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// legacyPerPeer are the key prefixes under which hashicorp/raft repeats its
// per-peer replication timings with the peer's ID in the metric name (one
// metric name per peer). The same figures are emitted with a peer_id label,
// which is what we keep; raftstore does not set raft's NoLegacyTelemetry.
var legacyPerPeer = []string{
	"raft.replication.heartbeat.",
	"raft.replication.appendEntries.rpc.",
	"raft.replication.appendEntries.logs.",
	"raft.replication.installSnapshot.",
}

// raftHelp declares raft's main series up front, with help text: they are
// served from start-up (counters at 0, so increase() works on every
// replica) and explain themselves. Series raft emits with labels (peer_id)
// are left out: a declared unlabelled series would clash with them.
var (
	raftCounters = map[string]string{
		"raft.state.leader":                    "Times this replica became raft leader.",
		"raft.state.candidate":                 "Times this replica started an election.",
		"raft.state.follower":                  "Times this replica became a follower.",
		"raft.apply":                           "Log entries submitted to raft on this replica while leading.",
		"raft.transition.heartbeat_timeout":    "Times this follower heard from no leader within the heartbeat timeout.",
		"raft.transition.leader_lease_timeout": "Times this leader stepped down for lack of quorum contact within the leader lease.",
	}
	raftSummaries = map[string]string{
		"raft.commitTime":         "Milliseconds from dispatching a log entry on the leader to its commit (leader only).",
		"raft.leader.lastContact": "Milliseconds since the leader last heard from a follower, sampled at each lease check (leader only).",
		"raft.leader.dispatchLog": "Milliseconds the leader takes to write a batch of entries to its own log (leader only).",
		"raft.fsm.apply":          "Milliseconds to apply one committed entry to replicafed's state machine.",
	}
	raftGauges = map[string]string{
		"raft.peers": "Servers in the raft configuration, as the leader counts them (leader only).",
	}
)

var raftOnce = sync.OnceValue(registerRaft)

// RegisterRaft routes the metrics hashicorp/raft and raft-boltdb emit
// through the process-wide go-metrics instance into controller-runtime's
// registry, so they are served on the metrics endpoint beside replicafed's
// own: raft_commitTime, raft_leader_lastContact, raft_fsm_apply,
// raft_state_leader and the rest (docs/observability.md lists
// them). Names are raft's keys joined with "_"; timings are summaries in
// milliseconds. Series never expire: a counter such as raft_state_leader
// must not vanish while the process runs. The go-metrics instance is
// global, so one process holds one raft node's figures; calling this more
// than once is harmless.
func RegisterRaft() error { return raftOnce() }

func registerRaft() error {
	opts := gmprometheus.PrometheusOpts{
		Registerer: crmetrics.Registry,
		Name:       "replicafed_raft_metrics_sink",
		Expiration: 0,
	}
	for k, help := range raftCounters {
		opts.CounterDefinitions = append(opts.CounterDefinitions, gmprometheus.CounterDefinition{Name: strings.Split(k, "."), Help: help})
	}
	for k, help := range raftSummaries {
		opts.SummaryDefinitions = append(opts.SummaryDefinitions, gmprometheus.SummaryDefinition{Name: strings.Split(k, "."), Help: help})
	}
	for k, help := range raftGauges {
		opts.GaugeDefinitions = append(opts.GaugeDefinitions, gmprometheus.GaugeDefinition{Name: strings.Split(k, "."), Help: help})
	}
	sink, err := gmprometheus.NewPrometheusSinkFrom(opts)
	if err != nil {
		return fmt.Errorf("registering the raft metrics sink: %w", err)
	}
	cfg := gometrics.DefaultConfig("")
	// No host or service prefix in the names (Prometheus adds instance
	// labels), and no runtime sampling: client_golang's Go collector
	// already serves go_* on the same endpoint.
	cfg.EnableHostname = false
	cfg.EnableRuntimeMetrics = false
	cfg.BlockedPrefixes = legacyPerPeer
	if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
		return fmt.Errorf("installing the raft metrics sink: %w", err)
	}
	return nil
}
