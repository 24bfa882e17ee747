package server

import (
	"context"
	"fmt"
	"net/http"
	"net/http/pprof"
	"path/filepath"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/federation/registry/credentials"
	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/writefence"
)

// hubConfig loads the hub client configuration (hub.kubeconfig, else the
// in-cluster one) with the hub client's rate limit.
func hubConfig(cfg *config.Config) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if cfg.Hub.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Hub.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("hub.kubeconfig: loading hub client configuration: %w", err)
	}
	clientlimit.Shared(rc, cfg.Hub.QPS, cfg.Hub.Burst)
	rc.UserAgent = "replicafed"
	return rc, nil
}

// metricsOptions serves metrics over HTTPS behind the hub API server's
// TokenReview and SubjectAccessReview when metrics.secure, as kubebuilder
// projects do: a scraper needs a token whose identity may get the /metrics
// non-resource URL (the chart's metrics-reader ClusterRole), and replicafed
// needs tokenreviews and subjectaccessreviews create (the chart binds
// system:auth-delegator). The serving certificate is the raft one when its
// files share a directory (reloaded by controller-runtime's certwatcher),
// else a self-signed one.
func metricsOptions(cfg *config.Config) metricsserver.Options {
	o := metricsserver.Options{BindAddress: cfg.Metrics.BindAddress}
	if cfg.Metrics.Profiling {
		o.ExtraHandlers = profilingHandlers()
	}
	if !cfg.Metrics.Secure {
		return o
	}
	o.SecureServing = true
	o.FilterProvider = filters.WithAuthenticationAndAuthorization
	if t := cfg.Raft.TLS; !t.Insecure && t.CertFile != "" && filepath.Dir(t.CertFile) == filepath.Dir(t.KeyFile) {
		o.CertDir, o.CertName, o.KeyName = filepath.Dir(t.CertFile), filepath.Base(t.CertFile), filepath.Base(t.KeyFile)
	}
	return o
}

// profilingHandlers are net/http/pprof's handlers by path, for the
// metrics server: it wraps each in the same filter as /metrics, so with
// metrics.secure a caller needs get on the profile's own non-resource URL
// (say /debug/pprof/heap). pprof.Index serves every named profile under
// its prefix.
func profilingHandlers() map[string]http.Handler {
	return map[string]http.Handler{
		"/debug/pprof/":        http.HandlerFunc(pprof.Index),
		"/debug/pprof/cmdline": http.HandlerFunc(pprof.Cmdline),
		"/debug/pprof/profile": http.HandlerFunc(pprof.Profile),
		"/debug/pprof/symbol":  http.HandlerFunc(pprof.Symbol),
		"/debug/pprof/trace":   http.HandlerFunc(pprof.Trace),
	}
}

// metricsWarnings are the start-up warnings of the metrics endpoint's
// insecure settings.
func metricsWarnings(m config.Metrics) []string {
	if m.BindAddress == "0" || m.Secure {
		return nil
	}
	w := []string{"metrics.secure is false: " + m.BindAddress + " serves metrics over plain HTTP to anyone who can reach it"}
	if m.Profiling {
		w = append(w, "metrics.profiling is on without metrics.secure: anyone who can reach "+m.BindAddress+" can read this process's profiles (its heap holds pod specs) and keep its CPU busy")
	}
	return w
}

// writeLease is the raft leader's member write lease (node.Node): whether
// a write of a given deadline may leave now (waiting for a renewal), and
// whether one already in flight may have its deadline renewed.
type writeLease interface {
	WriteLease(d time.Duration) bool
	LeaseCovers(d time.Duration) bool
}

// memberWriteFence is the write fence of a member client outside sharding:
// pod writes leave only under the leader's write lease, and a write still
// in flight at its deadline is renewed while the lease covers it.
func memberWriteFence(ctl config.Controller, lease writeLease) func(*rest.Config) error {
	timeout := ctl.MemberWriteTimeout
	step := writefence.RenewalStep(timeout)
	permitted := func(context.Context) bool { return lease.WriteLease(timeout) }
	covers := func(context.Context) bool { return lease.LeaseCovers(step) }
	r := writefence.Renewal{Covers: covers, Step: step, Max: ctl.MemberWriteMaxDuration}
	return writefence.Renewed(timeout, permitted, r, writefence.DefaultMaxInFlight)
}

// registryOptions maps the configuration to the member registry's options.
// Member writes are fenced by lease: a write leaves only while this
// replica holds its raft write lease.
func registryOptions(cfg *config.Config, scheme *runtime.Scheme, monitor *health.Monitor, lease writeLease) registry.Options {
	opts := registry.Options{
		SecretNamespace: cfg.Clusters.SecretNamespace,
		SecretSelector:  cfg.Clusters.SecretSelector,
		SecretKey:       cfg.Clusters.SecretKey,
		Scheme:          scheme,
		RESTOptions:     []func(*rest.Config) error{memberLimits(cfg.Controller), memberWriteFence(cfg.Controller, lease)},
		Health:          monitor,
		Credentials:     credentialPolicy(cfg.Clusters.Credentials),
		ExpiryWarning:   cfg.Clusters.Credentials.ExpiryWarning,
		MaxCachedPods:   cfg.Controller.MaxCachedPodsPerMember,
	}
	for _, s := range cfg.Clusters.Static {
		opts.Static = append(opts.Static, registry.Static{Name: s.Name, Kubeconfig: s.Kubeconfig, Labels: s.Labels, Taints: s.ClusterTaints()})
	}
	return opts
}

// healthOptions maps failover.healthProbe to the member health monitor's
// options.
func healthOptions(p config.HealthProbe) health.Options {
	return health.Options{
		Interval:   p.Interval,
		Timeout:    p.Timeout,
		Thresholds: health.Thresholds{Failure: p.FailureThreshold, Success: p.SuccessThreshold},
	}
}

// memberLimits applies the member client rate limit, one bucket for all of
// the member's clients, or removes it. The registry applies it each time it
// builds a member's configuration, so each member has a bucket of its own.
func memberLimits(c config.Controller) func(*rest.Config) error {
	return func(rc *rest.Config) error {
		clientlimit.Apply(rc, c.MemberRateLimit, c.MemberQPS, c.MemberBurst)
		rc.UserAgent = "replicafed"
		return nil
	}
}

// nodeConfig maps the raft section (and the expectations TTL) to the raft
// node's configuration.
func nodeConfig(cfg *config.Config) node.NodeConfig {
	r := cfg.Raft
	nc := node.NodeConfig{
		ID:                       r.ID,
		ClusterID:                r.ClusterID,
		BindAddr:                 r.BindAddress,
		AdvertiseAddr:            r.AdvertiseAddress,
		DataDir:                  r.DataDir,
		HeartbeatTimeout:         r.HeartbeatTimeout,
		ElectionTimeout:          r.ElectionTimeout,
		LeaderLeaseTimeout:       r.LeaderLeaseTimeout,
		CommitTimeout:            r.CommitTimeout,
		MaxAppendEntries:         r.MaxAppendEntries,
		SnapshotInterval:         r.SnapshotInterval,
		SnapshotThreshold:        uint64(r.SnapshotThreshold),
		TrailingLogs:             uint64(r.TrailingLogs),
		ApplyTimeout:             r.ApplyTimeout,
		ObservationBatchSize:     r.ObservationBatchSize,
		ObservationFlushInterval: r.ObservationFlushInterval,
		ExpectationsTTL:          cfg.Controller.ExpectationsTTL,
		AdminToken:               r.AdminToken,
		DeadServerTimeout:        r.DeadServerTimeout,
	}
	nc.TLS = node.TLSFiles{CertFile: r.TLS.CertFile, KeyFile: r.TLS.KeyFile, CAFile: r.TLS.CAFile, Insecure: r.TLS.Insecure}
	for _, p := range r.Peers {
		nc.Peers = append(nc.Peers, node.Peer{ID: p.ID, Address: p.Address})
	}
	return nc
}

// credentialPolicy maps clusters.credentials to the registry's policy.
func credentialPolicy(c config.Credentials) credentials.Policy {
	return credentials.Policy{AllowExec: c.AllowExec, AllowFiles: c.AllowFiles, AllowAuthProvider: c.AllowAuthProvider,
		AllowInsecureTLS: c.AllowInsecureTLS, AllowProxy: c.AllowProxy}
}
