// Package metrics defines replicafed's own Prometheus metrics, registered with
// controller-runtime's registry so they are served on the manager's metrics
// endpoint next to the workqueue and client metrics.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/replicafed/replicafed/internal/version"
)

var (
	// PodOperations counts pod creates and deletes in members by result.
	PodOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replicafed_member_pod_operations_total",
		Help: "Pod creates and deletes replicafed made in member clusters, by cluster, operation (create, delete) and result (success, failure).",
	}, []string{"cluster", "operation", "result"})

	// Plans counts hub planning passes by outcome.
	Plans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replicafed_plans_total",
		Help: "FederatedReplicaSet planning passes on the leader, by result (committed: targets changed; unchanged; error).",
	}, []string{"result"})

	// Shortfall is the replicas the fleet lacks room for, per FederatedReplicaSet.
	Shortfall = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "replicafed_shortfall_replicas",
		Help: "Replicas of a FederatedReplicaSet that do not fit the fleet's known capacity.",
	}, []string{"namespace", "name"})

	// MemberHealthy is 1 for a reachable member, 0 for an unreachable one.
	MemberHealthy = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "replicafed_member_healthy",
		Help: "Whether a member cluster answers its health probe (1) or is unreachable (0).",
	}, []string{"cluster"})

	// MemberOwnedEpoch is, with sharding, the ownership epoch of each
	// member this replica owns.
	MemberOwnedEpoch = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "replicafed_member_owned_epoch",
		Help: "With sharding.enabled: the ownership epoch of each member this replica owns and writes to; absent for members it does not own.",
	}, []string{"cluster"})

	// MemberPodCachePods is the pods a member's bounded pod cache holds.
	MemberPodCachePods = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "replicafed_member_pod_cache_pods",
		Help: "Pods held in a member's pod cache, for members whose cache is bounded (controller.maxCachedPodsPerMember).",
	}, []string{"cluster"})

	// MemberPodCacheIncomplete is 1 while a member's bounded pod cache
	// misses pods.
	MemberPodCacheIncomplete = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "replicafed_member_pod_cache_incomplete",
		Help: "1 while a member has more pods than its pod cache may hold (controller.maxCachedPodsPerMember): nothing is created or deleted there.",
	}, []string{"cluster"})

	// RaftLeader is 1 on the replica that holds raft leadership.
	RaftLeader = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "replicafed_raft_leader",
		Help: "1 when this replica is the raft leader with write permission, else 0.",
	})

	// RaftTerm is the raft term this replica last led.
	RaftTerm = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "replicafed_raft_leader_term",
		Help: "Raft term of this replica's latest leadership.",
	})

	// RaftApplyDuration measures replicated writes made by the hub side.
	RaftApplyDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "replicafed_raft_apply_duration_seconds",
		Help:    "Time to commit a replicated write through raft, by operation.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"operation"})

	// RaftFirstMemberWrite measures each leadership's handover: from raft
	// electing this replica to its first member pod write.
	RaftFirstMemberWrite = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "replicafed_raft_first_member_write_seconds",
		Help:    "Seconds from raft electing this replica leader to the first pod write it sent to a member in that term (one sample per term that wrote).",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 12),
	})

	// RaftWriteLease is how long the member write lease lasts after each
	// contact round that renewed it: the room a write's deadline must fit.
	RaftWriteLease = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "replicafed_raft_write_lease_remaining_seconds",
		Help:    "After each contact round of the leader, how long the member write lease it gave lasts from then; a pod write leaves only if its deadline (controller.memberWriteTimeout) ends within it.",
		Buckets: []float64{0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1, 2},
	})

	// RaftContactRoundsFailed counts the leader's contact rounds that got
	// no quorum of promises (the lease was not renewed).
	RaftContactRoundsFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "replicafed_raft_contact_rounds_failed_total",
		Help: "Contact rounds of the leader in which no quorum of voters promised to follow it: the member write lease was not renewed.",
	})

	// RaftCommandsPerEntry is how many commands the leader combined into
	// each raft entry it proposed (group commit).
	RaftCommandsPerEntry = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "replicafed_raft_commands_per_entry",
		Help:    "Replicated commands the leader combined into each raft entry it proposed.",
		Buckets: []float64{1, 2, 4, 8, 16, 32, 64, 128, 256},
	})

	// RaftEntriesProposed counts the raft entries the leader proposed by
	// what they carry: a command type ("set-targets") for an entry of one
	// command, "batch:" and the distinct types it holds, sorted and joined
	// by "+" ("batch:reserve+settle"), for a group-committed entry.
	RaftEntriesProposed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replicafed_raft_entries_proposed_total",
		Help: "Raft entries this replica proposed while leading, by content: one command's type, or batch: and the distinct command types of a group-committed entry.",
	}, []string{"types"})

	// RaftCommandsProposed counts the replicated commands the leader
	// proposed, alone or in a shared entry, by type.
	RaftCommandsProposed = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "replicafed_raft_commands_proposed_total",
		Help: "Replicated commands this replica proposed while leading, alone or sharing an entry, by command type.",
	}, []string{"type"})
)

// BuildInfo is always 1; its labels identify the running binary, so a
// dashboard can tell which replicas run which release during a rollout.
var BuildInfo = newBuildInfo(version.Get())

func newBuildInfo(v version.Info) prometheus.Gauge {
	return prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "replicafed_build_info",
		Help:        "Always 1; labelled with the version, commit and Go version replicafed was built from.",
		ConstLabels: prometheus.Labels{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion},
	})
}

func init() {
	BuildInfo.Set(1)
	crmetrics.Registry.MustRegister(PodOperations, Plans, Shortfall, MemberHealthy, MemberOwnedEpoch, MemberPodCachePods, MemberPodCacheIncomplete, RaftLeader, RaftTerm, RaftApplyDuration, RaftFirstMemberWrite, RaftWriteLease, RaftContactRoundsFailed, RaftCommandsPerEntry,
		RaftEntriesProposed, RaftCommandsProposed, BuildInfo)
}
