package config

import (
	"strings"
	"time"
	"unicode"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// EnvPrefix starts every environment variable replicafed reads.
const EnvPrefix = "REPLICAFED_"

// ConfigEnv names the config file when --config is not given.
const ConfigEnv = EnvPrefix + "CONFIG"

// setting is one configuration key: its default, flag and help text.
type setting struct {
	// key is the dotted path as written in the YAML file.
	key string
	// def is the default; its Go type is the field's type.
	def any
	// noFlag is set for keys a flag cannot express (lists of objects).
	noFlag bool
	usage  string
}

// settings is the single source of truth for keys and defaults. Every leaf
// of Config has exactly one entry (checked by a test).
var settings = []setting{
	{key: "logging.level", def: "info", usage: "log level: debug, info, warn, error, or a verbosity 0-10"},
	{key: "logging.format", def: FormatJSON, usage: "log format: json or console"},
	{key: "logging.development", def: false, usage: "development logging (console, stack traces on warnings)"},

	{key: "hub.kubeconfig", def: "", usage: "kubeconfig of the hub cluster; empty means in-cluster"},
	{key: "hub.namespace", def: "replicafed-system", usage: "hub namespace replicafed runs in"},
	{key: "hub.qps", def: float32(50), usage: "client QPS limit for the hub, one bucket for all of a replica's hub requests"},
	{key: "hub.burst", def: 100, usage: "client burst for the hub"},
	{key: "hub.leaderLease.name", def: "replicafed-leader", usage: "Lease in hub.namespace the raft leader writes its ID into (informational; empty disables)"},
	{key: "hub.leaderLease.renewInterval", def: 5 * time.Second, usage: "how often the raft leader renews the leader Lease (>= 1s)"},

	{key: "clusters.secretNamespace", def: "", usage: "namespace of member kubeconfig Secrets; empty means hub.namespace"},
	{key: "clusters.secretSelector", def: "sigs.k8s.io/multicluster-runtime-kubeconfig=true", usage: "label selector of member kubeconfig Secrets"},
	{key: "clusters.secretKey", def: "kubeconfig", usage: "Secret data key holding the kubeconfig"},
	{key: "clusters.static", def: []StaticCluster{}, noFlag: true, usage: "static member clusters (YAML list of {name, kubeconfig, labels, taints})"},
	{key: "clusters.credentials.allowExec", def: false, usage: "accept exec credential plugins in member kubeconfig Secrets: the command runs inside replicafed (warned at every start)"},
	{key: "clusters.credentials.allowFiles", def: false, usage: "accept file paths (tokenFile, client-certificate, client-key, certificate-authority) in member kubeconfig Secrets, read from replicafed's file system (warned at every start)"},
	{key: "clusters.credentials.allowAuthProvider", def: false, usage: "accept auth-provider plugins in member kubeconfig Secrets (warned at every start)"},
	{key: "clusters.credentials.allowInsecureTLS", def: false, usage: "accept insecure-skip-tls-verify in member kubeconfig Secrets (warned at every start)"},
	{key: "clusters.credentials.allowProxy", def: false, usage: "accept proxy-url in member kubeconfig Secrets (warned at every start)"},
	{key: "clusters.credentials.expiryWarning", def: 30 * 24 * time.Hour, usage: "how long before a member's inline token or client certificate expires its MemberCluster says CredentialsExpiring"},

	{key: "raft.id", def: "", usage: "raft server ID; empty means $POD_NAME, else the hostname"},
	{key: "raft.bindAddress", def: "0.0.0.0:7000", usage: "raft transport listen host:port"},
	{key: "raft.advertiseAddress", def: "", usage: "raft host:port peers dial; empty means this server's peers entry, else the bind address"},
	{key: "raft.peers", def: []Peer{}, usage: "static raft peers, as id=host:port,id=host:port"},
	{key: "raft.dataDir", def: "/var/lib/replicafed/raft", usage: "directory for the raft log and snapshots"},
	{key: "raft.tls.certFile", def: "", usage: "PEM certificate for raft and the admin endpoint (mutual TLS; its DNS names/CN identify this peer); reloaded when it changes"},
	{key: "raft.tls.keyFile", def: "", usage: "PEM private key of raft.tls.certFile"},
	{key: "raft.tls.caFile", def: "", usage: "PEM CA bundle peers' and admin clients' certificates must chain to"},
	{key: "raft.tls.insecure", def: false, usage: "run raft, its RPCs and the admin endpoint over plain TCP without authenticating peers (warned at every start)"},
	{key: "raft.heartbeatTimeout", def: time.Second, usage: "raft heartbeat timeout"},
	{key: "raft.electionTimeout", def: time.Second, usage: "raft election timeout (>= heartbeat timeout)"},
	{key: "raft.leaderLeaseTimeout", def: 500 * time.Millisecond, usage: "raft leader lease (< heartbeat timeout)"},
	{key: "raft.commitTimeout", def: 50 * time.Millisecond, usage: "raft commit timeout"},
	{key: "raft.snapshotInterval", def: 60 * time.Second, usage: "how often raft checks whether to snapshot"},
	{key: "raft.snapshotThreshold", def: 1024, usage: "new log entries that trigger a snapshot"},
	{key: "raft.trailingLogs", def: 10240, usage: "log entries kept after a snapshot"},
	{key: "raft.maxAppendEntries", def: 64, usage: "entries per AppendEntries RPC (1-1024)"},
	{key: "raft.applyTimeout", def: 5 * time.Second, usage: "timeout of one raft apply"},
	{key: "raft.observationBatchSize", def: 256, usage: "informer observations per raft apply"},
	{key: "raft.observationFlushInterval", def: time.Second, usage: "longest wait before a partial observation batch is applied (the leader counts unflushed observations at once; the flush only serves a later leader, which settles from a quorum list anyway)"},
	{key: "raft.adminAddress", def: "0.0.0.0:7001", usage: "join/leave endpoint host:port"},
	{key: "raft.adminToken", def: "", usage: "bearer token that authorizes every admin endpoint call and is required for raft joins and membership changes; empty: only peer certificates authorize (voters' for changes)"},
	{key: "raft.clusterID", def: "replicafed", usage: "raft cluster name; a data dir of another cluster is refused"},
	{key: "raft.deadServerTimeout", def: 10 * time.Minute, usage: "remove a voter unreachable this long (never below 3 voters)"},

	{key: "controller.workers", def: 5, usage: "reconcile workers per member cluster"},
	{key: "controller.hubWorkers", def: 8, usage: "FederatedReplicaSets the raft leader plans at once (1-1024; each pass waits for its targets' raft round)"},
	{key: "controller.burstReplicas", def: 500, usage: "most pod creates or deletes per reconcile"},
	{key: "controller.memberRateLimit", def: true, usage: "apply memberQPS/memberBurst to member clients"},
	{key: "controller.memberQPS", def: float32(20), usage: "client QPS limit per member cluster, one bucket for all of a replica's requests to it"},
	{key: "controller.memberBurst", def: 30, usage: "client burst per member cluster"},
	{key: "controller.memberWriteTimeout", def: 650 * time.Millisecond, usage: "deadline of each write to a member (< raft.heartbeatTimeout - raft.leaderLeaseTimeout/2 - max(raft.heartbeatTimeout/20, 10ms))"},
	{key: "controller.memberWriteMaxDuration", def: 10 * time.Second, usage: "longest a write to a member may stay in flight: one unanswered at its deadline runs on a quarter of memberWriteTimeout at a time while the write lease still covers it (= memberWriteTimeout: never renewed)"},
	{key: "controller.createNamespaces", def: true, usage: "create a FederatedReplicaSet's namespace in members that lack it"},
	{key: "controller.expectationsTTL", def: 5 * time.Minute, usage: "how long an unobserved expectation holds a reconcile"},
	{key: "controller.resyncPeriod", def: 10 * time.Hour, usage: "informer resync period"},
	{key: "controller.statusUpdateInterval", def: time.Second, usage: "minimum interval between hub status writes of one FederatedReplicaSet"},
	{key: "controller.nodeCost.key", def: "", usage: "default spec.scaleDown.nodeCost: node label key ranking nodes for scale-down; empty means none"},
	{key: "controller.nodeCost.values", def: []string{}, usage: "default nodeCost: label values, cheapest to free first (comma-separated)"},
	{key: "controller.nodeCost.integer", def: false, usage: "default nodeCost: the label is an integer, lower is cheaper to free"},
	{key: "controller.maxCachedPodsPerMember", def: 200000, usage: "most pods one member's cache may hold; over it the member is marked degraded (0: unbounded)"},

	{key: "failover.unreachableGracePeriod", def: 60 * time.Second, usage: "how long a member may be unreachable before its replicas move"},
	{key: "failover.unschedulableThreshold", def: 60 * time.Second, usage: "how long a pod may be unschedulable before its replica moves"},
	{key: "failover.moveBack", def: v1alpha1.MoveBackNever, usage: "whether replicas return to a recovered member: Never or OnRecovery"},
	{key: "failover.healthProbe.interval", def: 5 * time.Second, usage: "member health probe interval"},
	{key: "failover.healthProbe.timeout", def: 3 * time.Second, usage: "member health probe timeout (<= interval)"},
	{key: "failover.healthProbe.failureThreshold", def: 3, usage: "failed probes in a row that mark a member unreachable"},
	{key: "failover.healthProbe.successThreshold", def: 1, usage: "good probes in a row that mark a member reachable"},

	{key: "metrics.bindAddress", def: ":8080", usage: `metrics listen host:port; "0" disables`},
	{key: "metrics.secure", def: true, usage: "serve metrics over HTTPS, each request authenticated (TokenReview) and authorized (SubjectAccessReview, get on /metrics) by the hub API server"},
	{key: "metrics.profiling", def: false, usage: "serve Go runtime profiles at /debug/pprof/ on the metrics endpoint (with metrics.secure each request is authorized for get on its /debug/pprof/... non-resource URL; without it, warned at every start)"},
	{key: "metrics.perFRS", def: PerFRSSummary, usage: "per-FederatedReplicaSet gauges on the raft leader: off, summary (totals per FRS) or members (plus a row per member)"},
	{key: "health.probeAddress", def: ":8081", usage: `health probe listen host:port; "0" disables`},
}

// words splits a dotted camelCase key into lower-case words, keeping
// acronyms together: "controller.memberQPS" -> controller, member, qps.
func words(key string) []string {
	var out []string
	for _, part := range strings.Split(key, ".") {
		rs := []rune(part)
		start := 0
		for i := 1; i < len(rs); i++ {
			upper := unicode.IsUpper(rs[i])
			prevLower := !unicode.IsUpper(rs[i-1])
			nextLower := i+1 < len(rs) && unicode.IsLower(rs[i+1])
			if upper && (prevLower || nextLower) {
				out = append(out, strings.ToLower(string(rs[start:i])))
				start = i
			}
		}
		out = append(out, strings.ToLower(string(rs[start:])))
	}
	return out
}

// EnvName returns the environment variable for a dotted key:
// raft.bindAddress -> REPLICAFED_RAFT_BIND_ADDRESS.
func EnvName(key string) string {
	return EnvPrefix + strings.ToUpper(strings.Join(words(key), "_"))
}

// FlagName returns the flag for a dotted key: raft.bindAddress ->
// raft-bind-address; the logging section is shortened to log-.
func FlagName(key string) string {
	w := words(key)
	if w[0] == "logging" {
		w[0] = "log"
	}
	return strings.Join(w, "-")
}
