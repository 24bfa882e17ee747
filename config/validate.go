package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Raft's own lower bounds (hashicorp/raft ValidateConfig), checked here so a
// bad value is reported at start-up with its key.
const (
	minRaftTimeout  = 5 * time.Millisecond
	minCommit       = time.Millisecond
	maxAppendLimit  = 1024
	disabledAddress = "0"
)

// FieldError is one refused configuration value.
type FieldError struct {
	// Key is the dotted key, with list indexes: raft.peers[1].address.
	Key string
	// Reason says what is wrong and what value was given.
	Reason string
}

// Error formats the problem as "key: reason".
func (e *FieldError) Error() string { return e.Key + ": " + e.Reason }

// FieldErrors returns the FieldErrors inside an error from Load or Validate.
func FieldErrors(err error) []*FieldError {
	var out []*FieldError
	var walk func(error)
	walk = func(err error) {
		if fe, ok := err.(*FieldError); ok {
			out = append(out, fe)
			return
		}
		if j, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range j.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// problems collects validation errors, each naming its key.
type problems []error

func (p *problems) add(key, format string, args ...any) {
	*p = append(*p, &FieldError{Key: key, Reason: fmt.Sprintf(format, args...)})
}

// MaxBurstReplicas is the largest controller.burstReplicas: one sync
// reserves or deletes at most that many pods in one raft command, and the
// FSM refuses commands with more items (raftstore/fsm.MaxItems; a test keeps
// the two equal).
const MaxBurstReplicas = 10000

// MaxHubWorkers bounds controller.hubWorkers: past the hub client's QPS
// more workers only wait.
const MaxHubWorkers = 1024

func (p *problems) positive(key string, d time.Duration) bool {
	if d <= 0 {
		p.add(key, "must be > 0, got %q", d.String())
		return false
	}
	return true
}

func (p *problems) atLeast(key string, d, min time.Duration) {
	if p.positive(key, d) && d < min {
		p.add(key, "must be at least %s, got %q", min, d.String())
	}
}

func (p *problems) minInt(key string, n, min int) {
	if n < min {
		p.add(key, "must be >= %d, got %d", min, n)
	}
}

func (p *problems) fileExists(key, path string) {
	info, err := os.Stat(path)
	switch {
	case err != nil:
		p.add(key, "file %q: %v", path, errors.Unwrap(err))
	case info.IsDir():
		p.add(key, "%q is a directory, want a file", path)
	}
}

// hostPort checks a host:port. Hosts may be IPs or DNS names; hostRequired
// also refuses an empty or unspecified (0.0.0.0, ::) host, as peers cannot
// dial it.
func (p *problems) hostPort(key, addr string, hostRequired bool) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		p.add(key, "must be host:port, got %q", addr)
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 {
		p.add(key, "port must be 1-65535, got %q", addr)
	}
	if host == "" {
		if hostRequired {
			p.add(key, "must name a host peers can dial, got %q", addr)
		}
		return
	}
	if ip := net.ParseIP(host); ip != nil {
		if hostRequired && ip.IsUnspecified() {
			p.add(key, "must name a host peers can dial, not %s, got %q", host, addr)
		}
		return
	}
	if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
		p.add(key, "host %q is neither an IP nor a DNS name: %s", host, strings.Join(msgs, "; "))
	}
}

// advertisable turns a bind address into one peers can dial on this host.
func advertisable(bind string) string {
	host, port, err := net.SplitHostPort(bind)
	if err != nil {
		return bind
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return bind
}

// Validate checks every key and returns all problems joined, each as
// "key: reason". Load calls it; call it again after changing a Config.
func (c *Config) Validate() error {
	var p problems
	c.validateLogging(&p)
	c.validateHub(&p)
	c.validateClusters(&p)
	c.validateRaft(&p)
	c.validateController(&p)
	c.validateFailover(&p)
	c.validateListeners(&p)
	c.validateAutoscaling(&p)
	c.validateSharding(&p)
	if m := c.Metrics.PerFRS; m != PerFRSOff && m != PerFRSSummary && m != PerFRSMembers {
		p.add("metrics.perFRS", "must be %s, %s or %s, got %q", PerFRSOff, PerFRSSummary, PerFRSMembers, m)
	}
	if c.Metrics.Profiling && c.Metrics.BindAddress == disabledAddress {
		p.add("metrics.profiling", "profiles are served on the metrics endpoint, which metrics.bindAddress %q disables", disabledAddress)
	}
	return errors.Join(p...)
}

func (c *Config) validateLogging(p *problems) {
	if _, err := ParseLevel(c.Logging.Level); err != nil {
		p.add("logging.level", "%v", err)
	}
	if f := c.Logging.Format; f != FormatJSON && f != FormatConsole {
		p.add("logging.format", "must be %s or %s, got %q", FormatJSON, FormatConsole, f)
	}
}

func (c *Config) validateHub(p *problems) {
	h := c.Hub
	if h.Kubeconfig != "" {
		p.fileExists("hub.kubeconfig", h.Kubeconfig)
	}
	if msgs := validation.IsDNS1123Label(h.Namespace); len(msgs) > 0 {
		p.add("hub.namespace", "must be a namespace name, got %q: %s", h.Namespace, strings.Join(msgs, "; "))
	}
	rateLimit(p, "hub.qps", "hub.burst", h.QPS, h.Burst)
	if n := h.LeaderLease.Name; n != "" {
		if msgs := validation.IsDNS1123Subdomain(n); len(msgs) > 0 {
			p.add("hub.leaderLease.name", "must be an object name or empty, got %q: %s", n, strings.Join(msgs, "; "))
		}
		// Renewing more often than every second only loads the hub.
		p.atLeast("hub.leaderLease.renewInterval", h.LeaderLease.RenewInterval, time.Second)
	}
}

// rateLimit checks a client QPS/burst pair: QPS must be > 0 (use the
// separate switch to turn limits off) and burst must cover one second.
func rateLimit(p *problems, qpsKey, burstKey string, qps float32, burst int) {
	if qps <= 0 {
		p.add(qpsKey, "must be > 0, got %v", qps)
	}
	if burst < 1 {
		p.add(burstKey, "must be >= 1, got %d", burst)
	} else if float32(burst) < qps {
		p.add(burstKey, "must be >= %s (%v), got %d", qpsKey, qps, burst)
	}
}

func (c *Config) validateClusters(p *problems) {
	cl := c.Clusters
	if msgs := validation.IsDNS1123Label(cl.SecretNamespace); len(msgs) > 0 {
		p.add("clusters.secretNamespace", "must be a namespace name, got %q: %s", cl.SecretNamespace, strings.Join(msgs, "; "))
	}
	if strings.TrimSpace(cl.SecretSelector) == "" {
		p.add("clusters.secretSelector", "must not be empty: it would select every Secret in the namespace")
	} else if _, err := labels.Parse(cl.SecretSelector); err != nil {
		p.add("clusters.secretSelector", "invalid label selector %q: %v", cl.SecretSelector, err)
	}
	if msgs := validation.IsConfigMapKey(cl.SecretKey); len(msgs) > 0 {
		p.add("clusters.secretKey", "must be a Secret data key, got %q: %s", cl.SecretKey, strings.Join(msgs, "; "))
	}
	seen := map[string]int{}
	for i, sc := range cl.Static {
		key := fmt.Sprintf("clusters.static[%d]", i)
		switch {
		case sc.Name == "":
			p.add(key+".name", "must not be empty")
		default:
			if msgs := validation.IsDNS1123Subdomain(sc.Name); len(msgs) > 0 {
				p.add(key+".name", "must be a DNS subdomain, got %q: %s", sc.Name, strings.Join(msgs, "; "))
			}
			if j, dup := seen[sc.Name]; dup {
				p.add(key+".name", "duplicates clusters.static[%d].name %q", j, sc.Name)
			} else {
				seen[sc.Name] = i
			}
		}
		if sc.Kubeconfig == "" {
			p.add(key+".kubeconfig", "must not be empty")
		} else {
			p.fileExists(key+".kubeconfig", sc.Kubeconfig)
		}
		for k, v := range sc.Labels {
			if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
				p.add(key+".labels", "invalid label key %q: %s", k, strings.Join(msgs, "; "))
			}
			if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
				p.add(key+".labels", "invalid value %q for label %q: %s", v, k, strings.Join(msgs, "; "))
			}
		}
		validateTaints(p, key+".taints", sc.Taints)
	}
	p.positive("clusters.credentials.expiryWarning", cl.Credentials.ExpiryWarning)
}

// validateTaints checks a static member's taints as the API checks a
// registration's: a label key, a label value, a known effect, and one taint
// per key and effect.
func validateTaints(p *problems, key string, taints []StaticTaint) {
	seen := map[string]int{}
	for i, t := range taints {
		k := fmt.Sprintf("%s[%d]", key, i)
		if t.Key == "" {
			p.add(k+".key", "must not be empty")
		} else if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
			p.add(k+".key", "must be a label key, got %q: %s", t.Key, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsValidLabelValue(t.Value); len(msgs) > 0 {
			p.add(k+".value", "must be a label value, got %q: %s", t.Value, strings.Join(msgs, "; "))
		}
		switch t.Effect {
		case v1alpha1.TaintNoSchedule, v1alpha1.TaintNoExecute:
			id := t.Key + "\x00" + string(t.Effect)
			if j, dup := seen[id]; dup {
				p.add(k, "duplicates %s[%d] (key %q, effect %s)", key, j, t.Key, t.Effect)
			} else {
				seen[id] = i
			}
		default:
			p.add(k+".effect", "must be NoSchedule or NoExecute, got %q", t.Effect)
		}
	}
}

// validateRaft checks the raft section, in the order its keys are documented.
func (c *Config) validateRaft(p *problems) {
	r := c.Raft
	if strings.TrimSpace(r.ID) == "" {
		p.add("raft.id", "must not be empty (set it, $POD_NAME or the hostname)")
	}
	p.hostPort("raft.bindAddress", r.BindAddress, false)
	p.hostPort("raft.advertiseAddress", r.AdvertiseAddress, true)
	p.hostPort("raft.adminAddress", r.AdminAddress, false)

	validateRaftPeers(p, r)

	if strings.TrimSpace(r.DataDir) == "" {
		p.add("raft.dataDir", "must not be empty")
	} else if info, err := os.Stat(r.DataDir); err == nil && !info.IsDir() {
		p.add("raft.dataDir", "%q exists and is not a directory", r.DataDir)
	}

	validateRaftTLS(p, r.TLS)
	validateRaftTiming(p, r)
	if r.ClusterID == "" {
		p.add("raft.clusterID", "must not be empty")
	}
	p.minInt("raft.observationBatchSize", r.ObservationBatchSize, 1)
	p.positive("raft.observationFlushInterval", r.ObservationFlushInterval)
}

// validateRaftPeers checks raft.peers: unique IDs and addresses, and that the
// list, when given, holds this server under its advertised address.
func validateRaftPeers(p *problems, r Raft) {
	ids := map[string]int{}
	addrs := map[string]int{}
	self := -1
	for i, peer := range r.Peers {
		key := fmt.Sprintf("raft.peers[%d]", i)
		if peer.ID == "" {
			p.add(key+".id", "must not be empty")
		} else if j, dup := ids[peer.ID]; dup {
			p.add(key+".id", "duplicates raft.peers[%d].id %q", j, peer.ID)
		} else {
			ids[peer.ID] = i
		}
		p.hostPort(key+".address", peer.Address, true)
		if j, dup := addrs[peer.Address]; dup {
			p.add(key+".address", "duplicates raft.peers[%d].address %q", j, peer.Address)
		} else {
			addrs[peer.Address] = i
		}
		if peer.ID == r.ID && self < 0 {
			self = i
		}
	}
	if len(r.Peers) > 0 {
		if self < 0 {
			p.add("raft.peers", "must include this server's raft.id %q", r.ID)
		} else if a := r.Peers[self].Address; a != r.AdvertiseAddress {
			p.add("raft.advertiseAddress", "must equal raft.peers[%d].address %q (this server's entry), got %q", self, a, r.AdvertiseAddress)
		}
	}
}

// validateRaftTLS checks that the three PEM files are all set (and exist) or,
// with raft.tls.insecure, all empty.
func validateRaftTLS(p *problems, t TLS) {
	files := []struct{ key, path string }{
		{"raft.tls.certFile", t.CertFile}, {"raft.tls.keyFile", t.KeyFile}, {"raft.tls.caFile", t.CAFile},
	}
	for _, f := range files {
		switch {
		case t.Insecure && f.path != "":
			p.add(f.key, "must be empty with raft.tls.insecure: true (plain TCP); unset one or the other")
		case t.Insecure:
		case f.path == "":
			p.add(f.key, "must be set: raft and the admin endpoint use mutual TLS (certFile, keyFile, caFile); raft.tls.insecure: true runs them unauthenticated")
		default:
			p.fileExists(f.key, f.path)
		}
	}
}

// validateRaftTiming checks raft's timeouts and limits against hashicorp/raft's
// bounds and against each other.
func validateRaftTiming(p *problems, r Raft) {
	p.atLeast("raft.heartbeatTimeout", r.HeartbeatTimeout, minRaftTimeout)
	p.atLeast("raft.electionTimeout", r.ElectionTimeout, minRaftTimeout)
	if r.HeartbeatTimeout > 0 && r.ElectionTimeout > 0 && r.ElectionTimeout < r.HeartbeatTimeout {
		p.add("raft.electionTimeout", "must be >= raft.heartbeatTimeout (%s), got %q", r.HeartbeatTimeout, r.ElectionTimeout.String())
	}
	p.atLeast("raft.leaderLeaseTimeout", r.LeaderLeaseTimeout, minRaftTimeout)
	if r.HeartbeatTimeout > 0 && r.LeaderLeaseTimeout >= r.HeartbeatTimeout {
		p.add("raft.leaderLeaseTimeout", "must be < raft.heartbeatTimeout (%s), got %q: a leader that lost its quorum must stop writing before followers can elect another",
			r.HeartbeatTimeout, r.LeaderLeaseTimeout.String())
	}
	p.atLeast("raft.commitTimeout", r.CommitTimeout, minCommit)
	p.atLeast("raft.snapshotInterval", r.SnapshotInterval, minRaftTimeout)
	p.minInt("raft.snapshotThreshold", r.SnapshotThreshold, 1)
	p.minInt("raft.trailingLogs", r.TrailingLogs, 0)
	if r.MaxAppendEntries < 1 || r.MaxAppendEntries > maxAppendLimit {
		p.add("raft.maxAppendEntries", "must be 1-%d, got %d", maxAppendLimit, r.MaxAppendEntries)
	}
	p.positive("raft.applyTimeout", r.ApplyTimeout)
	p.positive("raft.deadServerTimeout", r.DeadServerTimeout)
}

// WriteLeaseMargin is what the raft leader keeps back from each
// follower's promise when it bounds its member write lease (see
// raftstore/node, contact.go): a twentieth of the heartbeat timeout, at
// least 10ms.
func WriteLeaseMargin(heartbeat time.Duration) time.Duration {
	return max(heartbeat/20, 10*time.Millisecond)
}

// validateWriteDeadline checks that member writes can be permitted at all.
// Safety does not depend on it: the leader permits a write only if its
// deadline ends before a quorum could elect another leader, which a
// contact round bounds at about raft.heartbeatTimeout less the margin
// from the round's start. Rounds come every quarter of
// raft.leaderLeaseTimeout; a deadline that leaves less than half the lease
// of that bound would stall writes between rounds.
func validateWriteDeadline(p *problems, d time.Duration, r Raft) {
	if !p.positive("controller.memberWriteTimeout", d) || r.LeaderLeaseTimeout < minRaftTimeout || r.LeaderLeaseTimeout >= r.HeartbeatTimeout {
		return // the raft keys' own problems are reported with them
	}
	margin := WriteLeaseMargin(r.HeartbeatTimeout)
	if room := r.HeartbeatTimeout - r.LeaderLeaseTimeout/2 - margin; d >= room {
		p.add("controller.memberWriteTimeout", "must be < raft.heartbeatTimeout - raft.leaderLeaseTimeout/2 - margin (%s - %s - %s = %s), got %q: a write must end within the write lease a contact round gives (the heartbeat timeout less the margin), with room left for the rounds every quarter lease",
			r.HeartbeatTimeout, r.LeaderLeaseTimeout/2, margin, room, d.String())
	}
}

func (c *Config) validateController(p *problems) {
	ctl := c.Controller
	p.minInt("controller.workers", ctl.Workers, 1)
	if ctl.HubWorkers < 1 || ctl.HubWorkers > MaxHubWorkers {
		p.add("controller.hubWorkers", "must be 1 to %d (more only wait at the hub's client limit), got %d", MaxHubWorkers, ctl.HubWorkers)
	}
	p.minInt("controller.burstReplicas", ctl.BurstReplicas, 1)
	if ctl.BurstReplicas > MaxBurstReplicas {
		p.add("controller.burstReplicas", "must be <= %d, the most pods one replicated command may reserve or delete, got %d", MaxBurstReplicas, ctl.BurstReplicas)
	}
	validateWriteDeadline(p, ctl.MemberWriteTimeout, c.Raft)
	if ctl.MemberWriteMaxDuration < ctl.MemberWriteTimeout {
		p.add("controller.memberWriteMaxDuration", "must be >= controller.memberWriteTimeout (%s; equal turns renewal off), got %q", ctl.MemberWriteTimeout, ctl.MemberWriteMaxDuration.String())
	}
	rateLimit(p, "controller.memberQPS", "controller.memberBurst", ctl.MemberQPS, ctl.MemberBurst)
	p.positive("controller.expectationsTTL", ctl.ExpectationsTTL)
	p.positive("controller.resyncPeriod", ctl.ResyncPeriod)
	p.positive("controller.statusUpdateInterval", ctl.StatusUpdateInterval)
	if ctl.MaxCachedPodsPerMember < 0 {
		p.add("controller.maxCachedPodsPerMember", "must be >= 0 (0 means unbounded), got %d", ctl.MaxCachedPodsPerMember)
	}
	nc := ctl.NodeCost
	switch {
	case nc.Key == "" && (len(nc.Values) > 0 || nc.Integer):
		p.add("controller.nodeCost.key", "must be set when controller.nodeCost.values or controller.nodeCost.integer is")
	case nc.Key == "":
	case (len(nc.Values) > 0) == nc.Integer:
		p.add("controller.nodeCost", "exactly one of values or integer: true must be set with key %q", nc.Key)
	}
	if nc.Key != "" {
		if errs := validation.IsQualifiedName(nc.Key); len(errs) > 0 {
			p.add("controller.nodeCost.key", "must be a label key: %s", strings.Join(errs, "; "))
		}
	}
	for i, v := range nc.Values {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 || v == "" {
			p.add(fmt.Sprintf("controller.nodeCost.values[%d]", i), "must be a non-empty label value, got %q", v)
		}
	}
}

func (c *Config) validateFailover(p *problems) {
	f := c.Failover
	p.positive("failover.unreachableGracePeriod", f.UnreachableGracePeriod)
	p.positive("failover.unschedulableThreshold", f.UnschedulableThreshold)
	if f.MoveBack != v1alpha1.MoveBackNever && f.MoveBack != v1alpha1.MoveBackOnRecovery {
		p.add("failover.moveBack", "must be %s or %s, got %q", v1alpha1.MoveBackNever, v1alpha1.MoveBackOnRecovery, f.MoveBack)
	}
	hp := f.HealthProbe
	p.positive("failover.healthProbe.interval", hp.Interval)
	if p.positive("failover.healthProbe.timeout", hp.Timeout) && hp.Interval > 0 && hp.Timeout > hp.Interval {
		p.add("failover.healthProbe.timeout", "must be <= failover.healthProbe.interval (%s), got %q", hp.Interval, hp.Timeout.String())
	}
	p.minInt("failover.healthProbe.failureThreshold", hp.FailureThreshold, 1)
	p.minInt("failover.healthProbe.successThreshold", hp.SuccessThreshold, 1)
}

// validateListeners checks the HTTP listeners and that no two listeners of
// this process share a port.
func (c *Config) validateListeners(p *problems) {
	listeners := []struct{ key, addr string }{
		{"raft.bindAddress", c.Raft.BindAddress},
		{"raft.adminAddress", c.Raft.AdminAddress},
		{"metrics.bindAddress", c.Metrics.BindAddress},
		{"health.probeAddress", c.Health.ProbeAddress},
	}
	for _, l := range listeners[2:] {
		if l.addr != disabledAddress {
			p.hostPort(l.key, l.addr, false)
		}
	}
	type bound struct{ key, host, port string }
	var seen []bound
	for _, l := range listeners {
		host, port, err := net.SplitHostPort(l.addr)
		if err != nil || port == "0" {
			continue
		}
		for _, o := range seen {
			if o.port == port && (o.host == host || wildcard(o.host) || wildcard(host)) {
				p.add(l.key, "port %s is also used by %s", port, o.key)
				break
			}
		}
		seen = append(seen, bound{l.key, host, port})
	}
}

// wildcard reports whether a listen host covers every local address.
func wildcard(host string) bool {
	ip := net.ParseIP(host)
	return host == "" || (ip != nil && ip.IsUnspecified())
}
