package metrics

import (
	"fmt"
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

var raftOnce = sync.OnceValue(registerRaft)

// RegisterRaft routes the metrics hashicorp/raft and raft-boltdb emit
// through the process-wide go-metrics instance into controller-runtime's
// registry, so they are served on the metrics endpoint beside replicafed's
// own: raft_commitTime, raft_leader_lastContact, raft_fsm_apply,
// raft_state_leader and the rest (README "Observing replicafed" lists
// them). Names are raft's keys joined with "_"; timings are summaries in
// milliseconds. Series never expire: a counter such as raft_state_leader
// must not vanish while the process runs. The go-metrics instance is
// global, so one process holds one raft node's figures; calling this more
// than once is harmless.
func RegisterRaft() error { return raftOnce() }

func registerRaft() error {
	sink, err := gmprometheus.NewPrometheusSinkFrom(gmprometheus.PrometheusOpts{
		Registerer: crmetrics.Registry,
		Name:       "replicafed_raft_metrics_sink",
		Expiration: 0,
	})
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
