// Package server assembles one replicafed replica from its configuration: the
// raft node and replicated expectations, the hub manager with the
// FederatedReplicaSet reconciler, the member registry and health monitor, and
// one ReplicaSet worker per member. cmd/replicafed only loads configuration
// and calls Run; tests and the demo run the same binary.
package server

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/membersetup"
	"github.com/replicafed/replicafed/federation/memberstatus"
	"github.com/replicafed/replicafed/federation/propagation"
	"github.com/replicafed/replicafed/federation/prune"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/federation/registry/credentials"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/metrics"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/frsmetrics"
	"github.com/replicafed/replicafed/replica/leaderlease"
	"github.com/replicafed/replicafed/replica/writefence"
)

// Run runs one replica until ctx ends. On the way out, before anything else
// stops, the raft node steps down: it closes its member-write gate, cancels
// in-flight member writes and waits for them, commits its last observations
// and then hands leadership to a peer (when leading), so failover does not
// wait for a timeout and no write of this replica overlaps the next
// leader's. Only then do the workers and caches stop. It logs through the
// logger in ctx.
func Run(ctx context.Context, cfg *config.Config) error {
	log := logr.FromContextOrDiscard(ctx)
	scheme, err := kubescheme.New()
	if err != nil {
		return err
	}
	hubCfg, err := hubConfig(cfg)
	if err != nil {
		return err
	}

	// Before the node starts, so its first state changes are counted.
	if err := metrics.RegisterRaft(); err != nil {
		return err
	}
	n, err := node.New(nodeConfig(cfg), log.WithName("raft"))
	if err != nil {
		return fmt.Errorf("starting raft node: %w", err)
	}
	defer func() {
		if err := n.Shutdown(); err != nil {
			log.Error(err, "Stopping raft")
		}
	}()
	raftNode.Store(n)
	store := raftexp.New(n, log.WithName("expectations"))

	monitor := health.NewMonitor(health.Options{
		Interval: cfg.Failover.HealthProbe.Interval,
		Timeout:  cfg.Failover.HealthProbe.Timeout,
		Thresholds: health.Thresholds{
			Failure: cfg.Failover.HealthProbe.FailureThreshold,
			Success: cfg.Failover.HealthProbe.SuccessThreshold,
		},
	})
	regOpts := registry.Options{
		SecretNamespace: cfg.Clusters.SecretNamespace,
		SecretSelector:  cfg.Clusters.SecretSelector,
		SecretKey:       cfg.Clusters.SecretKey,
		Scheme:          scheme,
		RESTOptions:     []func(*rest.Config) error{memberLimits(cfg.Controller), writefence.Option(cfg.Controller.MemberWriteTimeout, func() bool { return n.WriteLease(cfg.Controller.MemberWriteTimeout) })},
		Health:          monitor,
		Credentials:     credentialPolicy(cfg.Clusters.Credentials),
		ExpiryWarning:   cfg.Clusters.Credentials.ExpiryWarning,
		MaxCachedPods:   cfg.Controller.MaxCachedPodsPerMember,
	}
	for _, w := range credentials.Warnings(regOpts.Credentials) {
		log.Info("WARNING: " + w)
	}
	for _, s := range cfg.Clusters.Static {
		regOpts.Static = append(regOpts.Static, registry.Static{Name: s.Name, Kubeconfig: s.Kubeconfig, Labels: s.Labels, Taints: s.ClusterTaints()})
	}
	provider, err := registry.NewProvider(regOpts)
	if err != nil {
		return fmt.Errorf("clusters.secretSelector: %w", err)
	}

	secretSel, err := labels.Parse(cfg.Clusters.SecretSelector)
	if err != nil {
		return fmt.Errorf("clusters.secretSelector: %w", err)
	}
	mgr, err := mcmanager.New(hubCfg, provider, manager.Options{
		Scheme: scheme,
		// Only member kubeconfig Secrets are cached, and only in their
		// namespace: the chart grants Secret access there and nowhere else.
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {
				Namespaces: map[string]cache.Config{cfg.Clusters.SecretNamespace: {}},
				Label:      secretSel,
			},
		}},
		Logger:                 log,
		Metrics:                metricsOptions(cfg),
		HealthProbeBindAddress: cfg.Health.ProbeAddress,
		// Leadership comes from raft, not a Lease: every replica runs the
		// informers, only the raft leader writes.
		LeaderElection: false,
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	local := mgr.GetLocalManager()
	if err := mgr.AddHealthzCheck("raft", func(*http.Request) error { return n.Live() }); err != nil {
		return fmt.Errorf("adding liveness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("raft", func(*http.Request) error { return n.Ready() }); err != nil {
		return fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("adding liveness check: %w", err)
	}

	targets := &targetStore{n: n}
	// Every trigger is kept (a workqueue, not a bounded channel).
	triggers := hub.NewTriggers()
	trigger := triggers.Trigger
	reports := hub.NewReports(trigger)

	workers := worker.NewManager(worker.Options{
		Workers: cfg.Controller.Workers,
		// The same bound as the member caches (registry.Options.MaxCachedPods);
		// Start refuses a member whose cache was built with another.
		MaxCachedPods:    cfg.Controller.MaxCachedPodsPerMember,
		BurstReplicas:    cfg.Controller.BurstReplicas,
		CreateNamespaces: cfg.Controller.CreateNamespaces,
		Store:            store,
		Source:           &hub.Workloads{Hub: local.GetClient(), Targets: targets, DefaultNodeCost: cfg.Controller.NodeCost.Spec()},
		Sink:             reports,
		Gate:             n,
		// Well inside the expectations TTL, so a key whose informer events
		// were lost is settled from a quorum list long before it expires.
		UnsatisfiedRequeue: min(cfg.Controller.ExpectationsTTL/10, engine.DefaultUnsatisfiedRequeue),
		// spec.propagateDependencies: pods wait until their dependencies
		// exist in the member (metadata-only live reads).
		Dependencies: func(cl cluster.Cluster) engine.DependencyChecker {
			return propagation.Presence{Reader: cl.GetAPIReader()}
		},
	})
	memberCRDs, err := crds.Member()
	if err != nil {
		return err
	}
	reg := registry.New(regOpts, provider)
	if err := reg.Setup(ctx, mgr); err != nil {
		return err
	}
	var problems sync.Map // cluster -> why it is not prepared
	prep := &membersetup.Preparer{
		CRDs: memberCRDs,
		OnError: func(cluster string, err error) {
			problems.Store(cluster, "member not prepared: "+err.Error())
			enqueueAll(ctx, local, trigger)
		},
		OnReady: func(cluster string) {
			if _, had := problems.LoadAndDelete(cluster); had {
				enqueueAll(ctx, local, trigger)
			}
		},
	}
	// Capacity counters ride on the member informers the workers start;
	// they need no prepared member, so they are engaged directly.
	tracker := capacity.NewTracker()
	if err := mgr.Add(&awareRunnable{Aware: tracker}); err != nil {
		return fmt.Errorf("adding member capacity counters: %w", err)
	}
	prep.Next = append(prep.Next, workers)
	if err := mgr.Add(&awareRunnable{Aware: prep}); err != nil {
		return fmt.Errorf("adding member preparation: %w", err)
	}
	pruner := prune.New(n, reg.Registered)
	if err := local.Add(pruner); err != nil {
		return fmt.Errorf("adding member state pruner: %w", err)
	}
	intents := &hub.DeletionIntents{}
	prop := propagation.New(propagation.Options{
		Hub: local.GetClient(), HubLive: local.GetAPIReader(), Members: reg, Health: monitor, Targets: targets,
		Gate: n, Poker: workers, Recorder: local.GetEventRecorder("replicafed"), Orphaned: intents.Orphans,
	})
	if err := prop.SetupWithManager(local); err != nil {
		return err
	}
	if err := crmetrics.Registry.Register(registry.ExpiryCollector{Registry: reg}); err != nil {
		return fmt.Errorf("registering member credential expiry metrics: %w", err)
	}
	defer crmetrics.Registry.Unregister(registry.ExpiryCollector{Registry: reg})
	var forgetHealth func(cluster string) // set below, before the manager starts
	reg.OnChange(func(cluster string, joined bool) {
		if !joined {
			reports.ForgetCluster(cluster)
			pruner.Trigger()
			forgetMember(cluster, &problems, forgetHealth)
		}
		enqueueAll(ctx, local, trigger)
		prop.Resync()
	})

	rec := &hub.Reconciler{
		Intents:        intents,
		Hub:            local.GetClient(),
		Registry:       reg,
		Health:         &health.Replicated{Local: monitor, Record: n},
		Registered:     reg.Registered,
		RecordedTaints: memberstatus.RecordedTaints(local.GetClient()),
		Targets:        targets,
		Reports:        reports,
		Capacity:       tracker,
		Gate:           n,
		// New targets may add or remove members that need copies.
		Poker:          pokers{workers, prop},
		Expectations:   store,
		Recorder:       local.GetEventRecorder("replicafed"),
		StatusInterval: cfg.Controller.StatusUpdateInterval,
		// Count-only status changes take at most half the hub client's
		// QPS while many objects change, leaving the rest to planning.
		StatusBudget: float64(cfg.Hub.QPS) / 2,
		MemberProblems: func(cluster string) string {
			if p, ok := problems.Load(cluster); ok {
				return p.(string)
			}
			return ""
		},
		Defaults: v1alpha1.Failover{
			UnreachableGracePeriod: v1alpha1.DurationOf(cfg.Failover.UnreachableGracePeriod),
			UnschedulableThreshold: v1alpha1.DurationOf(cfg.Failover.UnschedulableThreshold),
			MoveBack:               cfg.Failover.MoveBack,
		},
		Clock: clock.RealClock{},
	}
	if err := local.Add(&memberstatus.Writer{Hub: local.GetClient(), Registered: reg.Registered, Members: reg, Health: rec.Health, Gate: n, Capacity: tracker,
		OnPlacementInputsChanged: func() { enqueueAll(ctx, local, trigger) },
		Conditions:               reg.Conditions,
		Problem: func(ctx context.Context, c string) string {
			return cmp.Or(rec.MemberProblems(c), reg.SecretProblem(ctx, c))
		}}); err != nil {
		return fmt.Errorf("adding MemberCluster writer: %w", err)
	}
	err = ctrl.NewControllerManagedBy(local).
		// Orphan deletions leave their only trace on one watch event; catch
		// it here, before the hub's garbage collector removes it.
		For(&v1alpha1.FederatedReplicaSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			intents.Observe(o)
			return true
		}))).
		WatchesRawSource(triggers).
		Named("federatedreplicaset").
		Complete(rec)
	if err != nil {
		return fmt.Errorf("creating FederatedReplicaSet controller: %w", err)
	}
	recorder := health.NewRecorder(monitor, n, func() bool { _, ok := n.Allowed(); return ok }, time.Second)
	recorder.OnRecorded = func(string) { enqueueAll(ctx, local, trigger) }
	if err := local.Add(recorder); err != nil {
		return fmt.Errorf("adding member health recorder: %w", err)
	}
	forgetHealth = monitorChanges(ctx, monitor, recorder, func() { enqueueAll(ctx, local, trigger) }, func(cluster string) {
		// Fresh informers instead of waiting out client-go's reconnect backoff.
		if err := reg.Refresh(cluster); err != nil {
			log.Error(err, "Refreshing member clients after recovery", "cluster", cluster)
		}
	})

	if err := local.Add(manager.RunnableFunc(func(ctx context.Context) error {
		store.Run(ctx)
		return nil
	})); err != nil {
		return fmt.Errorf("adding expectations flusher: %w", err)
	}
	if err := local.Add(&takeover{node: n, store: store, workers: workers, trigger: func() { enqueueAll(ctx, local, trigger) }, log: log}); err != nil {
		return fmt.Errorf("adding leadership handler: %w", err)
	}
	if cfg.Metrics.PerFRS != config.PerFRSOff {
		c := &frsmetrics.Collector{Reader: local.GetCache(), Targets: targets, Registered: reg.Registered, Leader: n,
			PerMember: cfg.Metrics.PerFRS == config.PerFRSMembers, Log: log.WithName("frs-metrics")}
		if err := crmetrics.Registry.Register(c); err != nil {
			return fmt.Errorf("registering per-FederatedReplicaSet metrics: %w", err)
		}
		defer crmetrics.Registry.Unregister(c)
	}
	if l := cfg.Hub.LeaderLease; l.Name != "" {
		if err := local.Add(&leaderlease.Writer{Reader: local.GetAPIReader(), Writer: local.GetClient(), Namespace: cfg.Hub.Namespace, Name: l.Name,
			Identity: n.ServerID(), Leader: n, Interval: l.RenewInterval, Clock: clock.RealClock{}, Log: log.WithName("leader-lease")}); err != nil {
			return fmt.Errorf("adding the leader Lease writer: %w", err)
		}
	}
	if cfg.Raft.AdminAddress != "" && cfg.Raft.AdminAddress != "0" {
		if err := local.Add(adminServer(cfg.Raft.AdminAddress, n)); err != nil {
			return fmt.Errorf("adding admin server: %w", err)
		}
	}

	log.Info("Starting replicafed", "raftID", n.ServerID(), "raftAddress", n.Address())
	// The manager outlives ctx until the node has stepped down, so member
	// writes drain and leadership moves while informers still run.
	mgrCtx, stopMgr := context.WithCancel(context.WithoutCancel(ctx))
	defer stopMgr()
	stepped := make(chan struct{})
	go func() {
		defer close(stepped)
		select {
		case <-ctx.Done():
		case <-mgrCtx.Done():
			return
		}
		log.Info("Stopping: closing the member-write gate, then handing leadership over")
		_ = n.StepDown()
		stopMgr()
	}()
	err = mgr.Start(mgrCtx)
	stopMgr()
	<-stepped
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
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
	rc.QPS, rc.Burst = cfg.Hub.QPS, cfg.Hub.Burst
	rc.UserAgent = "replicafed"
	return rc, nil
}

// memberLimits applies the member client rate limit, or removes it.
func memberLimits(c config.Controller) func(*rest.Config) error {
	return func(rc *rest.Config) error {
		if c.MemberRateLimit {
			rc.QPS, rc.Burst = c.MemberQPS, c.MemberBurst
		} else {
			rc.QPS, rc.Burst = -1, 0
		}
		rc.UserAgent = "replicafed"
		return nil
	}
}

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

// monitorChanges re-plans everything when a member's health flips and asks
// the recorder to record the flip in raft (it retries until recorded), so a
// new leader measures the grace period from the original time instead of
// starting it again. It returns a function that forgets a member that left.
func monitorChanges(_ context.Context, m *health.Monitor, rec *health.Recorder, fn func(), recovered func(cluster string)) func(cluster string) {
	var was sync.Map // cluster -> last health
	m.SetOnChange(func(cluster string, st health.State) {
		if prev, ok := was.Swap(cluster, st.Health); ok && prev == v1alpha1.ClusterUnreachable && st.Health == v1alpha1.ClusterHealthy {
			go recovered(cluster)
		}
		healthy := st.Health == v1alpha1.ClusterHealthy
		metrics.MemberHealthy.WithLabelValues(cluster).Set(map[bool]float64{true: 1, false: 0}[healthy])
		rec.Kick()
		fn()
	})
	return func(cluster string) { was.Delete(cluster) }
}

// forgetMember drops what this process keeps per member once the member has
// left: its preparation problem, its last health and its metric series.
func forgetMember(cluster string, problems *sync.Map, forgetHealth func(string)) {
	problems.Delete(cluster)
	if forgetHealth != nil {
		forgetHealth(cluster)
	}
	metrics.MemberHealthy.DeleteLabelValues(cluster)
	metrics.PodOperations.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}

// credentialPolicy maps clusters.credentials to the registry's policy.
func credentialPolicy(c config.Credentials) credentials.Policy {
	return credentials.Policy{AllowExec: c.AllowExec, AllowFiles: c.AllowFiles, AllowAuthProvider: c.AllowAuthProvider,
		AllowInsecureTLS: c.AllowInsecureTLS, AllowProxy: c.AllowProxy}
}
