package server

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/replicafed/replicafed/raftstore/node"
)

// raftNode is the node whose log position the index gauges read; one per
// process, but Run may be called again (tests), so it is swapped, not captured.
var raftNode atomic.Pointer[node.Node]

// The applied and last log index say how many raft entries a workload cost
// (the difference over a run), the figure the fleet benchmark reports per
// 1,000 pods.
var (
	raftAppliedIndex = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicafed_raft_applied_index",
		Help: "Index of the last raft log entry applied to this replica's state machine.",
	}, func() float64 {
		if n := raftNode.Load(); n != nil {
			return float64(n.Raft().AppliedIndex())
		}
		return 0
	})
	raftLastIndex = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicafed_raft_last_log_index",
		Help: "Index of the last entry in this replica's raft log (stored, not necessarily committed).",
	}, func() float64 {
		if n := raftNode.Load(); n != nil {
			return float64(n.Raft().LastIndex())
		}
		return 0
	})
	// The snapshot index says the log is compacted: raft keeps the entries
	// after it plus the trailing logs, so a soak reads a bounded log from
	// last - snapshot.
	raftSnapshotIndex = prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "replicafed_raft_last_snapshot_index",
		Help: "Index of the last raft log entry in this replica's newest snapshot (0 before the first).",
	}, func() float64 {
		if n := raftNode.Load(); n != nil {
			v, _ := strconv.ParseUint(n.Raft().Stats()["last_snapshot_index"], 10, 64)
			return float64(v)
		}
		return 0
	})
)

func init() {
	crmetrics.Registry.MustRegister(raftAppliedIndex, raftLastIndex, raftSnapshotIndex)
}
