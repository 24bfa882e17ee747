package server

import (
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
)

func init() {
	crmetrics.Registry.MustRegister(raftAppliedIndex, raftLastIndex)
}
