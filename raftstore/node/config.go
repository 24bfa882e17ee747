package node

import (
	"errors"
	"fmt"
	"time"

	"k8s.io/utils/clock"
)

// Peer is one statically configured raft peer: its pod name and address.
type Peer struct {
	// ID is the peer's name (the StatefulSet pod name), without the UUID suffix.
	ID string
	// Address is the host:port peers dial, e.g. "replicafed-0.replicafed.ns.svc:7000".
	Address string
}

// TLSFiles names the PEM files for the raft listener and the admin
// endpoint: mutual TLS, required unless Insecure.
type TLSFiles struct {
	CertFile, KeyFile, CAFile string
	// Insecure serves raft and its RPCs over plain TCP, with no
	// authentication of peers at all; it must be chosen explicitly.
	Insecure bool
}

// NodeConfig configures a Node. Zero durations and counts take the defaults
// noted on each field.
type NodeConfig struct {
	// ID is this replica's name (pod name). The raft server ID is ID-<uuid>,
	// with the UUID persisted in DataDir.
	ID string
	// ClusterID names the raft cluster; a data dir written for another
	// cluster ID is refused at start.
	ClusterID string
	// BindAddr is the listen address ("0.0.0.0:7000").
	BindAddr string
	// AdvertiseAddr is the address peers dial; empty means the bound address.
	AdvertiseAddr string
	// Peers is the static peer list including this node. Peers[0] bootstraps
	// a new cluster; all others join it.
	Peers   []Peer
	DataDir string
	TLS     TLSFiles

	HeartbeatTimeout   time.Duration // default 1s
	ElectionTimeout    time.Duration // default 1s
	LeaderLeaseTimeout time.Duration // default 500ms
	CommitTimeout      time.Duration // default 50ms
	MaxAppendEntries   int           // default 64
	SnapshotInterval   time.Duration // default 120s
	SnapshotThreshold  uint64        // default 8192
	TrailingLogs       uint64        // default 10240
	// ApplyTimeout bounds enqueueing one Apply and each forwarded write. Default 10s.
	ApplyTimeout time.Duration
	// ObservationBatchSize and ObservationFlushInterval tune how the
	// expectations store batches observations into raft entries. Defaults 256, 200ms.
	ObservationBatchSize     int
	ObservationFlushInterval time.Duration
	// ReservationLinger is how long the expectations store holds the
	// first pod-name reservation of a round for others to share its raft
	// entry; the reservations of many small MemberReplicaSets then cost one
	// entry instead of one each, for this much latency before their
	// creates. Default 100ms; negative: none.
	ReservationLinger time.Duration
	// CrowdedReservationLinger spaces the rounds while reservations of
	// several keys of one member keep coming (the round before carried
	// such and began less than this long ago): rounds then begin at the
	// multiples of it since the Unix epoch, the same ticks on every
	// replica, so many small MemberReplicaSets syncing at once, whose
	// creates wait for the member's client QPS anyway, share fewer, fuller
	// entries, while the occasional bursts of one large MemberReplicaSet
	// keep the short linger. Never shorter than ReservationLinger; ignored
	// when that is negative. Default 1s.
	CrowdedReservationLinger time.Duration
	// ExpectationsTTL is how long reservations and pending deletes count. Default 5m.
	ExpectationsTTL time.Duration

	// AdminToken, when set, is a bearer token that authorizes every admin
	// HTTP call and is required (with a peer certificate) for joins and
	// membership RPCs. Empty: only peers' certificates authorize.
	AdminToken string
	// JoinInterval is how often a node that is not in the configuration asks
	// its peers for the leader. Default 2s.
	JoinInterval time.Duration
	// Clock stamps commands and paces the feature re-check; nil: the
	// real clock. Tests inject a fake one.
	Clock clock.PassiveClock
	// DeadServerTimeout removes a voter the leader could not reach for this
	// long, as long as MinVoters remain. Zero disables the cleanup.
	DeadServerTimeout time.Duration
	// MinVoters is the voter count dead-server cleanup never goes below. Default 3.
	MinVoters int
}

func (c *NodeConfig) setDefaults() {
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&c.HeartbeatTimeout, time.Second)
	def(&c.ElectionTimeout, time.Second)
	def(&c.LeaderLeaseTimeout, 500*time.Millisecond)
	def(&c.CommitTimeout, 50*time.Millisecond)
	def(&c.SnapshotInterval, 120*time.Second)
	def(&c.ApplyTimeout, 10*time.Second)
	def(&c.ObservationFlushInterval, 200*time.Millisecond)
	def(&c.ReservationLinger, 100*time.Millisecond)
	def(&c.CrowdedReservationLinger, time.Second)
	def(&c.ExpectationsTTL, 5*time.Minute)
	def(&c.JoinInterval, 2*time.Second)
	if c.MaxAppendEntries == 0 {
		c.MaxAppendEntries = 64
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.ObservationBatchSize == 0 {
		c.ObservationBatchSize = 256
	}
	if c.MinVoters == 0 {
		c.MinVoters = 3
	}
}

// Validate reports the first invalid field.
func (c *NodeConfig) Validate() error {
	switch {
	case c.ID == "":
		return errors.New("raft: id is required")
	case c.ClusterID == "":
		return errors.New("raft: clusterID is required")
	case c.BindAddr == "":
		return errors.New("raft: bindAddr is required")
	case c.DataDir == "":
		return errors.New("raft: dataDir is required")
	case len(c.Peers) == 0:
		return errors.New("raft: peers must list at least this node")
	case c.LeaderLeaseTimeout >= c.HeartbeatTimeout:
		return fmt.Errorf("raft: leaderLeaseTimeout %s must be below heartbeatTimeout %s", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return fmt.Errorf("raft: electionTimeout %s must be at least heartbeatTimeout %s", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.MaxAppendEntries < 1 || c.MaxAppendEntries > 1024:
		return fmt.Errorf("raft: maxAppendEntries %d must be between 1 and 1024", c.MaxAppendEntries)
	case !c.TLS.Insecure && (c.TLS.CertFile == "" || c.TLS.KeyFile == "" || c.TLS.CAFile == ""):
		return errors.New("raft: tls needs certFile, keyFile and caFile (or insecure)")
	case c.TLS.Insecure && (c.TLS.CertFile != "" || c.TLS.KeyFile != "" || c.TLS.CAFile != ""):
		return errors.New("raft: tls files are set together with insecure")
	}
	self := false
	seen := map[string]bool{}
	for _, p := range c.Peers {
		if p.ID == "" || p.Address == "" {
			return errors.New("raft: every peer needs id and address")
		}
		if seen[p.ID] {
			return fmt.Errorf("raft: peer %q listed twice", p.ID)
		}
		seen[p.ID] = true
		self = self || p.ID == c.ID
	}
	if !self {
		return fmt.Errorf("raft: peers do not include this node %q", c.ID)
	}
	return nil
}
