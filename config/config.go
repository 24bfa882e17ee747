// Package config holds replicafed's typed configuration: the settings table
// with every default, loading from a YAML file, REPLICAFED_* environment
// variables and flags (in that rising order of precedence), and validation.
package config

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Config is the whole replicafed configuration. Load fills it; every field has
// a default in the settings table (settings.go).
type Config struct {
	// Logging configures the process logger.
	Logging Logging `mapstructure:"logging"`
	// Hub says how to reach the hub cluster that holds FederatedReplicaSets.
	Hub Hub `mapstructure:"hub"`
	// Clusters says where member clusters are registered.
	Clusters Clusters `mapstructure:"clusters"`
	// Raft configures the replicated store shared by the replicafed replicas.
	Raft Raft `mapstructure:"raft"`
	// Controller tunes the per-member ReplicaSet engine.
	Controller Controller `mapstructure:"controller"`
	// Failover holds fleet-wide defaults for moving replicas off sick members.
	Failover Failover `mapstructure:"failover"`
	// Metrics configures the Prometheus endpoint.
	Metrics Metrics `mapstructure:"metrics"`
	// Health configures the liveness/readiness probe endpoint.
	Health Health `mapstructure:"health"`
	// Autoscaling configures the FederatedHorizontalPodAutoscaler controller.
	Autoscaling Autoscaling `mapstructure:"autoscaling"`
	// Sharding shares the member clusters out among the replicas.
	Sharding Sharding `mapstructure:"sharding"`
}

// Logging configures the process logger.
type Logging struct {
	// Level is debug, info, warn, error, or a logr verbosity 0-10 (V(N) logs
	// are shown when N <= the verbosity). See ParseLevel.
	Level string `mapstructure:"level"`
	// Format is json or console.
	Format string `mapstructure:"format"`
	// Development switches to console output with stack traces on warnings
	// and panics on DPanic.
	Development bool `mapstructure:"development"`
}

// Logging formats.
const (
	// FormatJSON writes one JSON object per line.
	FormatJSON = "json"
	// FormatConsole writes human-readable lines.
	FormatConsole = "console"
)

// Hub says how to reach the hub cluster.
type Hub struct {
	// Kubeconfig is a kubeconfig file path; empty means in-cluster config.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// Namespace is the hub namespace replicafed runs in.
	Namespace string `mapstructure:"namespace"`
	// QPS is the client-side rate limit for hub API calls.
	QPS float32 `mapstructure:"qps"`
	// Burst is the client-side burst for hub API calls.
	Burst int `mapstructure:"burst"`
	// LeaderLease mirrors the raft leader into a Lease in Namespace.
	LeaderLease LeaderLease `mapstructure:"leaderLease"`
}

// LeaderLease configures the coordination.k8s.io/v1 Lease in which the raft
// leader writes its ID, so `kubectl get lease` shows who leads. It is
// informational only: raft elects the leader and nothing reads the Lease.
type LeaderLease struct {
	// Name of the Lease in hub.namespace; empty disables it.
	Name string `mapstructure:"name"`
	// RenewInterval is how often the leader renews it (its duration is
	// three intervals).
	RenewInterval time.Duration `mapstructure:"renewInterval"`
}

// Clusters says where member clusters are registered.
type Clusters struct {
	// SecretNamespace is the hub namespace holding member kubeconfig Secrets.
	// Load resolves an empty value to Hub.Namespace.
	SecretNamespace string `mapstructure:"secretNamespace"`
	// SecretSelector is a label selector choosing the kubeconfig Secrets.
	SecretSelector string `mapstructure:"secretSelector"`
	// SecretKey is the Secret data key holding the kubeconfig.
	SecretKey string `mapstructure:"secretKey"`
	// Static lists member clusters given by kubeconfig files.
	Static []StaticCluster `mapstructure:"static"`
	// Credentials says what a member kubeconfig Secret may contain beyond
	// inline credentials. Static members are the operator's own files and
	// are not restricted.
	Credentials Credentials `mapstructure:"credentials"`
}

// Credentials relaxes the check of member kubeconfig Secrets. By default a
// Secret may hold only inline credentials (server, CA data, token, client
// certificate and key data): whoever can write a labelled Secret in the
// registry namespace must not be able to run a command in replicafed or make
// it read its own files. Each setting is logged as a warning at start-up.
type Credentials struct {
	// AllowExec accepts users[].exec credential plugins: replicafed runs the
	// command inside its pod.
	AllowExec bool `mapstructure:"allowExec"`
	// AllowFiles accepts file paths: users[].tokenFile,
	// users[].client-certificate, users[].client-key and
	// clusters[].certificate-authority, read from replicafed's file system.
	AllowFiles bool `mapstructure:"allowFiles"`
	// AllowAuthProvider accepts users[].auth-provider plugins.
	AllowAuthProvider bool `mapstructure:"allowAuthProvider"`
	// AllowInsecureTLS accepts clusters[].insecure-skip-tls-verify.
	AllowInsecureTLS bool `mapstructure:"allowInsecureTLS"`
	// AllowProxy accepts clusters[].proxy-url.
	AllowProxy bool `mapstructure:"allowProxy"`
	// ExpiryWarning is how long before a member's inline token or client
	// certificate expires its MemberCluster says CredentialsExpiring.
	ExpiryWarning time.Duration `mapstructure:"expiryWarning"`
}

// StaticCluster is one member cluster given by a kubeconfig file.
type StaticCluster struct {
	// Name identifies the member in placements and status.
	Name string `mapstructure:"name"`
	// Kubeconfig is the path of the member's kubeconfig file.
	Kubeconfig string `mapstructure:"kubeconfig"`
	// Labels are matched by FederatedReplicaSet placement selectors.
	Labels map[string]string `mapstructure:"labels"`
	// Taints keep replicas off the member unless a placement tolerates them,
	// as the replicafed.io/taints annotation does for a member registered by
	// Secret.
	Taints []StaticTaint `mapstructure:"taints"`
}

// StaticTaint is a taint on a static member cluster.
type StaticTaint struct {
	// Key of the taint, a label key.
	Key string `mapstructure:"key"`
	// Value of the taint, a label value; may be empty.
	Value string `mapstructure:"value"`
	// Effect is NoSchedule or NoExecute.
	Effect v1alpha1.TaintEffect `mapstructure:"effect"`
	// TimeAdded (RFC 3339) is when the taint was added: a NoExecute
	// toleration's tolerationSeconds count from it. Unset, they count from
	// when the raft leader first saw the taint (recorded in the member's
	// MemberCluster, so a new leader keeps the same window).
	TimeAdded time.Time `mapstructure:"timeAdded"`
}

// ClusterTaints returns the member's taints in the API's form.
func (s StaticCluster) ClusterTaints() []v1alpha1.ClusterTaint {
	if len(s.Taints) == 0 {
		return nil
	}
	out := make([]v1alpha1.ClusterTaint, 0, len(s.Taints))
	for _, t := range s.Taints {
		ct := v1alpha1.ClusterTaint{Key: t.Key, Value: t.Value, Effect: t.Effect}
		if !t.TimeAdded.IsZero() {
			added := metav1.NewTime(t.TimeAdded)
			ct.TimeAdded = &added
		}
		out = append(out, ct)
	}
	return out
}

// Raft configures the replicated store (hashicorp/raft).
type Raft struct {
	// ID is this server's raft ID. Load resolves an empty value to $POD_NAME,
	// else the hostname.
	ID string `mapstructure:"id"`
	// BindAddress is the host:port the raft transport listens on.
	BindAddress string `mapstructure:"bindAddress"`
	// AdvertiseAddress is the host:port peers dial to reach this server. Load
	// resolves an empty value to this server's entry in Peers, else to
	// BindAddress (an unspecified host becoming 127.0.0.1, for single-node use).
	AdvertiseAddress string `mapstructure:"advertiseAddress"`
	// Peers is the static server list (including this server) used to
	// bootstrap; empty means a single server or joining through the admin API.
	Peers []Peer `mapstructure:"peers"`
	// DataDir holds the raft log, stable store and snapshots.
	DataDir string `mapstructure:"dataDir"`
	// TLS enables mutual TLS on the raft transport when set.
	TLS TLS `mapstructure:"tls"`
	// HeartbeatTimeout is how long a follower waits for the leader before
	// starting an election.
	HeartbeatTimeout time.Duration `mapstructure:"heartbeatTimeout"`
	// ElectionTimeout is how long a candidate waits before a new election.
	ElectionTimeout time.Duration `mapstructure:"electionTimeout"`
	// LeaderLeaseTimeout is how long a leader stays leader without contact
	// with a quorum; it bounds how long a deposed leader keeps acting.
	LeaderLeaseTimeout time.Duration `mapstructure:"leaderLeaseTimeout"`
	// CommitTimeout is the longest the leader waits before sending an
	// AppendEntries without new entries.
	CommitTimeout time.Duration `mapstructure:"commitTimeout"`
	// SnapshotInterval is how often raft checks whether to snapshot.
	SnapshotInterval time.Duration `mapstructure:"snapshotInterval"`
	// SnapshotThreshold is how many new log entries trigger a snapshot.
	SnapshotThreshold int `mapstructure:"snapshotThreshold"`
	// TrailingLogs is how many log entries are kept after a snapshot.
	TrailingLogs int `mapstructure:"trailingLogs"`
	// MaxAppendEntries caps entries per AppendEntries RPC (raft allows 1-1024).
	MaxAppendEntries int `mapstructure:"maxAppendEntries"`
	// ApplyTimeout bounds one raft Apply, including forwarding to the leader.
	ApplyTimeout time.Duration `mapstructure:"applyTimeout"`
	// ObservationBatchSize caps informer observations folded into one Apply.
	ObservationBatchSize int `mapstructure:"observationBatchSize"`
	// ObservationFlushInterval is the longest an observation waits for its batch.
	ObservationFlushInterval time.Duration `mapstructure:"observationFlushInterval"`
	// AdminAddress is the host:port of the join/leave endpoint.
	AdminAddress string `mapstructure:"adminAddress"`
	// AdminToken authenticates calls to the admin endpoint (Bearer token);
	// prefer setting it through REPLICAFED_RAFT_ADMIN_TOKEN from a Secret.
	AdminToken string `mapstructure:"adminToken"`
	// ClusterID names the raft cluster; a data dir written for another
	// cluster is refused at start.
	ClusterID string `mapstructure:"clusterID"`
	// DeadServerTimeout removes a voter the leader could not reach for this
	// long, never going below three voters.
	DeadServerTimeout time.Duration `mapstructure:"deadServerTimeout"`
}

// Peer is one raft server in the static peer list.
type Peer struct {
	// ID is the peer's raft server ID.
	ID string `mapstructure:"id"`
	// Address is the peer's raft host:port (DNS names allowed).
	Address string `mapstructure:"address"`
}

// TLS names the PEM files for mutual TLS on raft and the admin endpoint:
// all three are required unless Insecure.
type TLS struct {
	// CertFile is this server's certificate.
	CertFile string `mapstructure:"certFile"`
	// KeyFile is this server's private key.
	KeyFile string `mapstructure:"keyFile"`
	// CAFile is the CA bundle peers' certificates must chain to.
	CAFile string `mapstructure:"caFile"`
	// Insecure runs raft, its RPCs and the admin endpoint over plain TCP with
	// no peer authentication. It must be set explicitly.
	Insecure bool `mapstructure:"insecure"`
}

// Enabled reports whether TLS files are configured.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.CAFile != "" }

// Controller tunes the per-member ReplicaSet engine.
type Controller struct {
	// Workers is the number of reconcile workers per member cluster.
	Workers int `mapstructure:"workers"`
	// HubWorkers is how many FederatedReplicaSets the raft leader plans at
	// once. A pass waits for its targets to commit, and commits share raft
	// rounds that come up to a second apart while pods are being created,
	// so planning runs at about HubWorkers objects per round.
	HubWorkers int `mapstructure:"hubWorkers"`
	// BurstReplicas caps creates or deletes per reconcile, as the upstream
	// ReplicaSet controller's burstReplicas does.
	BurstReplicas int `mapstructure:"burstReplicas"`
	// MemberRateLimit turns the member client rate limit (MemberQPS and
	// MemberBurst) on or off.
	MemberRateLimit bool `mapstructure:"memberRateLimit"`
	// MemberQPS is the client-side rate limit per member cluster.
	MemberQPS float32 `mapstructure:"memberQPS"`
	// MemberBurst is the client-side burst per member cluster.
	MemberBurst int `mapstructure:"memberBurst"`
	// MemberWriteTimeout is the deadline of every write to a member, counted
	// from when the request leaves the client. The leader lets a pod write
	// leave only if its write lease lasts until the deadline ends, so a
	// write it permitted has ended before another leader can be elected;
	// the lease lasts about raft.heartbeatTimeout from each contact round,
	// so the deadline must leave room for the rounds (validateWriteDeadline).
	MemberWriteTimeout time.Duration `mapstructure:"memberWriteTimeout"`
	// MemberWriteMaxDuration bounds how long a write to a member may stay in
	// flight when its deadline is renewed: a write unanswered at its
	// deadline runs on a quarter of MemberWriteTimeout at a time while the
	// lease that let it leave still covers that quarter, instead of being
	// cut and sent again. Equal to MemberWriteTimeout: no renewal.
	MemberWriteMaxDuration time.Duration `mapstructure:"memberWriteMaxDuration"`
	// CreateNamespaces creates a FederatedReplicaSet's namespace in a member
	// that lacks it; when false the member reports NamespaceMissing.
	CreateNamespaces bool `mapstructure:"createNamespaces"`
	// ExpectationsTTL is how long an unobserved create/delete expectation
	// holds a reconcile back.
	ExpectationsTTL time.Duration `mapstructure:"expectationsTTL"`
	// ResyncPeriod is the informer resync period.
	ResyncPeriod time.Duration `mapstructure:"resyncPeriod"`
	// StatusUpdateInterval is the minimum interval between status writes of
	// one FederatedReplicaSet in the hub.
	StatusUpdateInterval time.Duration `mapstructure:"statusUpdateInterval"`
	// NodeCost is the default of a FederatedReplicaSet's
	// spec.scaleDown.nodeCost; an empty key means none.
	NodeCost NodeCost `mapstructure:"nodeCost"`
	// MaxCachedPodsPerMember caps the pods one member's cache may hold; over
	// it the member is marked degraded instead of the process running out of
	// memory. 0 means unbounded.
	MaxCachedPodsPerMember int `mapstructure:"maxCachedPodsPerMember"`
}

// NodeCost is the fleet-wide default node cost tiering of scale-down (see
// v1alpha1.NodeCost): a node label key and either its values from cheapest
// to dearest to free, or Integer for an integer-valued label (lower is
// cheaper).
type NodeCost struct {
	// Key is the node label key; empty turns the default off.
	Key string `mapstructure:"key"`
	// Values are the label values, cheapest to free first.
	Values []string `mapstructure:"values"`
	// Integer reads the label value as an integer, lower is cheaper.
	Integer bool `mapstructure:"integer"`
}

// Spec returns the default as the API type, nil when Key is empty. A
// FederatedReplicaSet's own spec.scaleDown.nodeCost takes precedence.
func (n NodeCost) Spec() *v1alpha1.NodeCost {
	if n.Key == "" {
		return nil
	}
	return &v1alpha1.NodeCost{Key: n.Key, Values: append([]string(nil), n.Values...), Integer: n.Integer}
}

// Failover holds fleet-wide defaults; a FederatedReplicaSet's spec.failover
// overrides them.
type Failover struct {
	// UnreachableGracePeriod is how long a member may be unreachable before
	// its replicas are planned elsewhere.
	UnreachableGracePeriod time.Duration `mapstructure:"unreachableGracePeriod"`
	// UnschedulableThreshold is how long a pod may stay unschedulable before
	// it counts as missing capacity.
	UnschedulableThreshold time.Duration `mapstructure:"unschedulableThreshold"`
	// MoveBack says whether replicas return to a recovered member.
	MoveBack v1alpha1.MoveBackPolicy `mapstructure:"moveBack"`
	// HealthProbe configures the member health check.
	HealthProbe HealthProbe `mapstructure:"healthProbe"`
}

// HealthProbe configures how member clusters are probed.
type HealthProbe struct {
	// Interval is the time between probes of one member.
	Interval time.Duration `mapstructure:"interval"`
	// Timeout bounds one probe; it must not exceed Interval.
	Timeout time.Duration `mapstructure:"timeout"`
	// FailureThreshold is how many failed probes in a row mark a member unreachable.
	FailureThreshold int `mapstructure:"failureThreshold"`
	// SuccessThreshold is how many good probes in a row mark it reachable again.
	SuccessThreshold int `mapstructure:"successThreshold"`
}

// Metrics configures the Prometheus endpoint.
type Metrics struct {
	// BindAddress is the metrics host:port; "0" disables metrics.
	BindAddress string `mapstructure:"bindAddress"`
	// Secure serves metrics over HTTPS and lets only callers the hub API
	// server authenticates (TokenReview) and authorizes for get on the
	// /metrics non-resource URL (SubjectAccessReview) read them.
	Secure bool `mapstructure:"secure"`
	// PerFRS bounds the per-FederatedReplicaSet gauges: PerFRSOff,
	// PerFRSSummary (totals per FederatedReplicaSet) or PerFRSMembers (plus
	// one row per member cluster).
	PerFRS string `mapstructure:"perFRS"`
	// Profiling serves the Go runtime's profiles (net/http/pprof) under
	// /debug/pprof/ on the metrics endpoint, behind the same authentication
	// and authorization as /metrics when Secure.
	Profiling bool `mapstructure:"profiling"`
}

// Values of metrics.perFRS.
const (
	// PerFRSOff exports no per-FederatedReplicaSet series.
	PerFRSOff = "off"
	// PerFRSSummary exports a few series per FederatedReplicaSet.
	PerFRSSummary = "summary"
	// PerFRSMembers adds a few series per FederatedReplicaSet and member.
	PerFRSMembers = "members"
)

// Health configures the probe endpoint.
type Health struct {
	// ProbeAddress is the healthz/readyz host:port; "0" disables it.
	ProbeAddress string `mapstructure:"probeAddress"`
}
