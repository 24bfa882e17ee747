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
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/autoscale"
	"github.com/replicafed/replicafed/federation/autoscaler"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/membersetup"
	"github.com/replicafed/replicafed/federation/memberstatus"
	"github.com/replicafed/replicafed/federation/propagation"
	"github.com/replicafed/replicafed/federation/prune"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/federation/registry/credentials"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/metrics"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/frsmetrics"
	"github.com/replicafed/replicafed/replica/leaderlease"
)

// Run runs one replica until ctx ends. It logs through the logger in ctx.
//
// Start-up, in order: the hub client configuration; the raft node and the
// replicated expectations store; member access (health monitor, registry
// options, kubeconfig provider); the multicluster manager with its health
// checks; what the hub reconciler and the member side share; the member
// workers; the member registry, preparation, capacity counters and pruner;
// propagation; the reaction to members joining and leaving; the hub
// reconciler and MemberCluster status writer; member health recording; the
// runnables of leadership (expectations flusher, takeover, leader Lease);
// the admin endpoint; per-FederatedReplicaSet metrics; then the manager.
//
// Shutdown, in order (runManager, then the defers): the raft node steps
// down first: it closes its member-write gate, cancels in-flight member
// writes and waits for them, commits its last observations and hands
// leadership to a peer (when leading), so failover does not wait for a
// timeout and no write of this replica overlaps the next leader's. Only
// then does the manager stop the workers and caches; the metrics
// collectors are unregistered and the raft node shuts down last.
func Run(ctx context.Context, cfg *config.Config) error {
	log := logr.FromContextOrDiscard(ctx)
	scheme, hubCfg, err := loadHubConfig(cfg)
	if err != nil {
		return err
	}
	n, store, err := startRaft(cfg, log)
	if err != nil {
		return err
	}
	defer stopRaft(n, log)
	shard, err := newSharding(cfg, n)
	if err != nil {
		return err
	}
	if shard != nil {
		// A busy owner renews its lease in its reservation rounds.
		store.RideRenewals(shard.lease)
	}
	regOpts, provider, err := newMemberAccess(cfg, scheme, n, shard, log)
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, hubCfg, scheme, provider, n, log)
	if err != nil {
		return err
	}
	local := mgr.GetLocalManager()
	link := newHubLink(ctx, cfg, local, n, store)
	owned := shard.ownedHere(cfg, n)
	workers := newWorkers(cfg, store, n, link, shard, owned)
	mem, err := setupMembers(ctx, mgr, regOpts, provider, workers, link, n, owned)
	if err != nil {
		return err
	}
	prop, intents, err := setupPropagation(local, mem, workers, link, n)
	if err != nil {
		return err
	}
	unregisterExpiry, err := registerExpiryMetrics(mem.reg)
	if err != nil {
		return err
	}
	defer unregisterExpiry()
	followMembership(mem, link, prop)
	rec := newHubReconciler(cfg, local, mem, link, intents, pokers{workers, prop}, store, n)
	if err := setupHubControllers(local, rec, mem, workers, link, intents, n, cfg.Controller.HubWorkers); err != nil {
		return err
	}
	if err := setupHealthRecording(local, mem, link, n, log); err != nil {
		return err
	}
	if err := setupAutoscaler(cfg, local, mem, n); err != nil {
		return err
	}
	if err := addLeadership(cfg, local, store, workers, link, n, shard != nil, log); err != nil {
		return err
	}
	if err := addSharding(shard, cfg, local, n, mem, workers, link, log); err != nil {
		return err
	}
	if err := addAdminServer(cfg, local, n); err != nil {
		return err
	}
	unregisterFRS, err := registerFRSMetrics(cfg, local, mem, link, n, log)
	if err != nil {
		return err
	}
	defer unregisterFRS()

	log.Info("Starting replicafed", "raftID", n.ServerID(), "raftAddress", n.Address())
	for _, w := range metricsWarnings(cfg.Metrics) {
		log.Info("WARNING: " + w)
	}
	return runManager(ctx, mgr, n, log)
}

// hubLink is what the hub reconciler and the member side share.
type hubLink struct {
	// targets are the per-member targets, kept in raft.
	targets *targetStore
	// rollouts adapts the raft node to hub.RolloutStore.
	rollouts *rolloutStore
	// triggers queue FederatedReplicaSets for the hub reconciler; every
	// trigger is kept (a workqueue, not a bounded channel).
	triggers *hub.Triggers
	// reports carry member statuses to the hub reconciler.
	reports *hub.Reports
	// source tells the member engine what the hub wants.
	source *hub.Workloads
	// replan asks the hub reconciler to look at every FederatedReplicaSet.
	replan func()
}

// members is the member side of a replica, as setupMembers builds it.
type members struct {
	reg     *registry.Registry
	monitor *health.Monitor
	tracker *capacity.Tracker
	// podsCached says whether this replica caches a member's pods (nil:
	// every member's; sharding.ownedPodsOnly: the owned ones), and counted
	// engages the tracker accordingly (nil without ownedPodsOnly).
	podsCached func(member string) bool
	counted    *ownedCapacity
	pruner     *prune.Pruner
	// problems holds, per cluster, why it is not prepared.
	problems *sync.Map
	// forgetHealth forgets a member's last health; set by
	// setupHealthRecording before the manager starts.
	forgetHealth func(cluster string)
}

// loadHubConfig returns the scheme and the hub client configuration.
func loadHubConfig(cfg *config.Config) (*runtime.Scheme, *rest.Config, error) {
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, nil, fmt.Errorf("building the scheme: %w", err)
	}
	hubCfg, err := hubConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	return scheme, hubCfg, nil
}

// startRaft starts the raft node and the expectations store replicated
// through it.
func startRaft(cfg *config.Config, log logr.Logger) (*node.Node, *raftexp.Store, error) {
	// Before the node starts, so its first state changes are counted.
	if err := metrics.RegisterRaft(); err != nil {
		return nil, nil, fmt.Errorf("registering raft metrics: %w", err)
	}
	n, err := node.New(nodeConfig(cfg), log.WithName("raft"))
	if err != nil {
		return nil, nil, fmt.Errorf("starting raft node: %w", err)
	}
	raftNode.Store(n)
	return n, raftexp.New(n, log.WithName("expectations")), nil
}

// stopRaft shuts the raft node down, the last step of shutdown.
func stopRaft(n *node.Node, log logr.Logger) {
	if err := n.Shutdown(); err != nil {
		log.Error(err, "Stopping raft")
	}
}

// newMemberAccess returns the registry options (with the member health
// monitor) and the provider of members from kubeconfig Secrets and the
// static list.
func newMemberAccess(cfg *config.Config, scheme *runtime.Scheme, n *node.Node, shard *sharding, log logr.Logger) (registry.Options, *registry.SecretProvider, error) {
	opts := registryOptions(cfg, scheme, health.NewMonitor(healthOptions(cfg.Failover.HealthProbe)), n)
	if shard != nil {
		// Each member's pod writes are fenced by its own owner lease.
		opts.RESTOptions = []func(*rest.Config) error{memberLimits(cfg.Controller)}
		opts.RESTOptionsFor = shard.writeFences(cfg.Controller, n)
	}
	for _, w := range credentials.Warnings(opts.Credentials) {
		log.Info("WARNING: " + w)
	}
	provider, err := registry.NewProvider(opts)
	if err != nil {
		return registry.Options{}, nil, fmt.Errorf("clusters.secretSelector: %w", err)
	}
	return opts, provider, nil
}

// newManager returns the multicluster manager over the hub, with the raft
// node's liveness and readiness checks.
func newManager(cfg *config.Config, hubCfg *rest.Config, scheme *runtime.Scheme, provider *registry.SecretProvider, n *node.Node, log logr.Logger) (mcmanager.Manager, error) {
	secretSel, err := labels.Parse(cfg.Clusters.SecretSelector)
	if err != nil {
		return nil, fmt.Errorf("clusters.secretSelector: %w", err)
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
		// The rollout history is read when a revision is added only: no
		// informer over every ControllerRevision in the hub.
		Client:                 client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&appsv1.ControllerRevision{}}}},
		Logger:                 log,
		Metrics:                metricsOptions(cfg),
		HealthProbeBindAddress: cfg.Health.ProbeAddress,
		// Leadership comes from raft, not a Lease: every replica runs the
		// informers, only the raft leader writes.
		LeaderElection: false,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("raft", func(*http.Request) error { return n.Live() }); err != nil {
		return nil, fmt.Errorf("adding liveness check: %w", err)
	}
	if err := mgr.AddReadyzCheck("raft", func(*http.Request) error { return n.Ready() }); err != nil {
		return nil, fmt.Errorf("adding readiness check: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding liveness check: %w", err)
	}
	return mgr, nil
}

// newHubLink returns what the hub reconciler and the member side share.
func newHubLink(ctx context.Context, cfg *config.Config, local manager.Manager, n *node.Node, store *raftexp.Store) hubLink {
	triggers := hub.NewTriggers()
	link := hubLink{
		targets:  &targetStore{n: n, shared: store},
		rollouts: &rolloutStore{n: n},
		triggers: triggers,
		reports:  hub.NewReports(triggers.Trigger),
		replan:   func() { enqueueAll(ctx, local, triggers.Trigger) },
	}
	link.source = &hub.Workloads{Hub: local.GetClient(), Targets: link.targets, Rollouts: link.rollouts, DefaultNodeCost: cfg.Controller.NodeCost.Spec()}
	return link
}

// newWorkers returns the manager of the per-member ReplicaSet workers.
func newWorkers(cfg *config.Config, store *raftexp.Store, n *node.Node, link hubLink, shard *sharding, owned func(string) bool) *worker.Manager {
	o := worker.Options{
		Workers: cfg.Controller.Workers,
		// The same bound as the member caches (registry.Options.MaxCachedPods);
		// Start refuses a member whose cache was built with another.
		MaxCachedPods:    cfg.Controller.MaxCachedPodsPerMember,
		BurstReplicas:    cfg.Controller.BurstReplicas,
		CreateNamespaces: cfg.Controller.CreateNamespaces,
		Store:            store,
		Source:           link.source,
		Sink:             link.reports,
		Gate:             n,
		GateFor:          shard.gateFor(),
		Owned:            owned,
		// Well inside the expectations TTL, so a key whose informer events
		// were lost is settled from a quorum list long before it expires.
		UnsatisfiedRequeue: min(cfg.Controller.ExpectationsTTL/10, engine.DefaultUnsatisfiedRequeue),
		// spec.propagateDependencies: pods wait until their dependencies
		// exist in the member (metadata-only live reads).
		Dependencies: func(cl cluster.Cluster) engine.DependencyChecker {
			return propagation.Presence{Reader: cl.GetAPIReader()}
		},
	}
	if shard != nil {
		// The leader reads the members it does not own from their
		// MemberReplicaSet status: a burst may not hold it back long.
		o.MaxStatusDeferral = engine.ShardedMaxStatusDeferral
		// The owners' reports stay in their own process: the leader's hub
		// reads a member it does not own from the MemberReplicaSet status
		// in its member cache, and re-plans when that status changes.
		o.MemberStatusChanged = func(key fedref.MemberObject, ref v1alpha1.HubReference) {
			if _, owned := shard.lease.Permitted(key.Cluster); owned {
				return // this replica's own reports have told the hub already
			}
			if _, _, leading := n.Leading(); leading {
				link.triggers.Trigger(key.Namespace, cmp.Or(ref.Name, key.Name))
			}
		}
	}
	return worker.NewManager(o)
}

// setupMembers sets up the member registry, the preparation of each member
// (CRDs) ahead of its workers, the capacity counters and the pruner of the
// state of members that left.
func setupMembers(ctx context.Context, mgr mcmanager.Manager, opts registry.Options, provider *registry.SecretProvider, workers *worker.Manager, link hubLink, n *node.Node, podsCached func(string) bool) (*members, error) {
	memberCRDs, err := crds.Member()
	if err != nil {
		return nil, fmt.Errorf("loading the member CRDs: %w", err)
	}
	m := &members{reg: registry.New(opts, provider), monitor: opts.Health, problems: &sync.Map{}, podsCached: podsCached}
	if err := m.reg.Setup(ctx, mgr); err != nil {
		return nil, fmt.Errorf("setting up the member registry: %w", err)
	}
	prep := &membersetup.Preparer{
		CRDs: memberCRDs,
		OnError: func(cluster string, err error) {
			m.problems.Store(cluster, "member not prepared: "+err.Error())
			link.replan()
		},
		OnReady: func(cluster string) {
			if _, had := m.problems.LoadAndDelete(cluster); had {
				link.replan()
			}
		},
	}
	// Capacity counters ride on the member informers the workers start;
	// they need no prepared member, so they are engaged directly.
	m.tracker = capacity.NewTracker()
	var counting multicluster.Aware = m.tracker
	if podsCached != nil {
		m.counted = newOwnedCapacity(m.tracker, podsCached)
		counting = m.counted
	}
	if err := mgr.Add(&awareRunnable{Aware: counting}); err != nil {
		return nil, fmt.Errorf("adding member capacity counters: %w", err)
	}
	prep.Next = append(prep.Next, workers)
	if err := mgr.Add(&awareRunnable{Aware: prep}); err != nil {
		return nil, fmt.Errorf("adding member preparation: %w", err)
	}
	m.pruner = prune.New(n, m.reg.Registered)
	if err := mgr.GetLocalManager().Add(m.pruner); err != nil {
		return nil, fmt.Errorf("adding member state pruner: %w", err)
	}
	return m, nil
}

// setupPropagation sets up the propagation of dependencies to members and
// returns it with the deletion intents it shares with the hub reconciler.
func setupPropagation(local manager.Manager, m *members, workers *worker.Manager, link hubLink, n *node.Node) (*propagation.Propagator, *hub.DeletionIntents, error) {
	intents := &hub.DeletionIntents{}
	prop := propagation.New(propagation.Options{
		Hub: local.GetClient(), HubLive: local.GetAPIReader(), Members: m.reg, Health: m.monitor, Targets: link.targets, Rollouts: link.rollouts,
		Gate: n, Poker: workers, Recorder: local.GetEventRecorder("replicafed"), Orphaned: intents.Orphans,
	})
	if err := prop.SetupWithManager(local); err != nil {
		return nil, nil, fmt.Errorf("setting up dependency propagation: %w", err)
	}
	return prop, intents, nil
}

// registerExpiryMetrics registers the member credential expiry metrics and
// returns how to unregister them.
func registerExpiryMetrics(reg *registry.Registry) (func(), error) {
	c := registry.ExpiryCollector{Registry: reg}
	if err := crmetrics.Registry.Register(c); err != nil {
		return nil, fmt.Errorf("registering member credential expiry metrics: %w", err)
	}
	return func() { crmetrics.Registry.Unregister(c) }, nil
}

// followMembership re-plans and resyncs propagation when a member joins or
// leaves, and forgets what is kept for a member that left.
func followMembership(m *members, link hubLink, prop *propagation.Propagator) {
	m.reg.OnChange(func(cluster string, joined bool) {
		if !joined {
			link.reports.ForgetCluster(cluster)
			m.tracker.ForgetUsage(cluster)
			m.pruner.Trigger()
			forgetMember(cluster, m.problems, m.forgetHealth)
		}
		link.replan()
		prop.Resync()
	})
}

// newHubReconciler returns the FederatedReplicaSet reconciler.
func newHubReconciler(cfg *config.Config, local manager.Manager, m *members, link hubLink, intents *hub.DeletionIntents, poker hub.Poker, store *raftexp.Store, n *node.Node) *hub.Reconciler {
	return &hub.Reconciler{
		Intents:        intents,
		Hub:            local.GetClient(),
		Registry:       m.reg,
		Health:         &health.Replicated{Local: m.monitor, Record: n},
		Registered:     m.reg.Registered,
		RecordedTaints: memberstatus.RecordedTaints(local.GetClient()),
		Targets:        link.targets,
		Rollouts:       link.rollouts,
		// The manager's client reads ControllerRevisions uncached (newManager).
		History:    local.GetClient(),
		Reports:    link.reports,
		Capacity:   m.tracker,
		PodsCached: m.podsCached,
		Gate:       n,
		// New targets may add or remove members that need copies.
		Poker:          poker,
		Expectations:   store,
		Recorder:       local.GetEventRecorder("replicafed"),
		StatusInterval: cfg.Controller.StatusUpdateInterval,
		// Count-only status changes take at most half the hub client's
		// QPS while many objects change, leaving the rest to planning.
		StatusBudget: float64(cfg.Hub.QPS) / 2,
		MemberProblems: func(cluster string) string {
			if p, ok := m.problems.Load(cluster); ok {
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
}

// setupHubControllers adds the MemberCluster status writer and the
// FederatedReplicaSet controller around rec, with planners workers
// (controller.hubWorkers). The work queue never gives one object to two
// passes, and the Reconciler's shared state is safe for concurrent passes
// (TestConcurrentPasses). Each pass waits for its SetTargets commit, which
// rides a reservation round (up to a crowded linger, 1 s, apart while pods
// are created), so planning runs at about planners objects per round; the
// hub client's QPS bounds the passes' writes either way.
func setupHubControllers(local manager.Manager, rec *hub.Reconciler, m *members, workers *worker.Manager, link hubLink, intents *hub.DeletionIntents, n *node.Node, planners int) error {
	if err := local.Add(&memberstatus.Writer{Hub: local.GetClient(), Registered: m.reg.Registered, Members: m.reg, Health: rec.Health, Gate: n, Capacity: m.tracker, PodsCached: m.podsCached,
		OnPlacementInputsChanged: link.replan,
		Conditions:               memberConditions(m.reg.Conditions, workers.Failing),
		Problem: func(ctx context.Context, c string) string {
			return cmp.Or(rec.MemberProblems(c), m.reg.SecretProblem(ctx, c))
		}}); err != nil {
		return fmt.Errorf("adding MemberCluster writer: %w", err)
	}
	err := ctrl.NewControllerManagedBy(local).
		// Orphan deletions leave their only trace on one watch event; catch
		// it here, before the hub's garbage collector removes it.
		For(&v1alpha1.FederatedReplicaSet{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			intents.Observe(o)
			return true
		}))).
		WatchesRawSource(link.triggers).
		Named("federatedreplicaset").
		WithOptions(controller.Options{MaxConcurrentReconciles: planners}).
		Complete(rec)
	if err != nil {
		return fmt.Errorf("creating FederatedReplicaSet controller: %w", err)
	}
	return nil
}

// setupHealthRecording records member health flips in raft and re-plans on
// them; a member that recovers gets fresh clients.
func setupHealthRecording(local manager.Manager, m *members, link hubLink, n *node.Node, log logr.Logger) error {
	recorder := health.NewRecorder(m.monitor, n, func() bool { _, ok := n.Allowed(); return ok }, time.Second)
	recorder.OnRecorded = func(string) { link.replan() }
	if err := local.Add(recorder); err != nil {
		return fmt.Errorf("adding member health recorder: %w", err)
	}
	m.forgetHealth = monitorChanges(m.monitor, recorder, link.replan, func(cluster string) {
		// Fresh informers instead of waiting out client-go's reconnect backoff.
		if err := m.reg.Refresh(cluster); err != nil {
			log.Error(err, "Refreshing member clients after recovery", "cluster", cluster)
		}
	})
	return nil
}

// setupAutoscaler adds the FederatedHorizontalPodAutoscaler controller when
// autoscaling.enabled; it runs on every replica and computes and writes on
// the raft leader only.
func setupAutoscaler(cfg *config.Config, local manager.Manager, m *members, n *node.Node) error {
	a := cfg.Autoscaling
	if !a.Enabled {
		return nil
	}
	r := &autoscaler.Reconciler{
		Hub: local.GetClient(), Members: &autoscaler.ClusterMembers{Engaged: engagedClusters{m.reg}, PodsCached: m.podsCached}, Gate: n,
		Recorder: local.GetEventRecorder("replicafed-autoscaler"),
		Settings: autoscale.Settings{
			Tolerance: float64(a.Tolerance), CPUInitializationPeriod: a.CPUInitializationPeriod,
			InitialReadinessDelay: a.InitialReadinessDelay, DownscaleStabilization: a.DownscaleStabilization,
		},
		SyncPeriod: a.SyncPeriod, MemberTimeout: a.MemberTimeout, Clock: clock.RealClock{},
	}
	if err := r.SetupWithManager(local); err != nil {
		return fmt.Errorf("setting up the FederatedHorizontalPodAutoscaler controller: %w", err)
	}
	return nil
}

// engagedClusters gives the autoscaler the registry's member clusters.
type engagedClusters struct{ reg *registry.Registry }

// Cluster implements autoscaler.Engaged.
func (e engagedClusters) Cluster(name string) (cluster.Cluster, bool) {
	m, ok := e.reg.Get(name)
	if !ok {
		return nil, false
	}
	return m.Cluster, true
}

// addLeadership adds what runs with raft leadership: the expectations
// flusher, the takeover of a new leader and, when configured, the leader
// Lease writer.
func addLeadership(cfg *config.Config, local manager.Manager, store *raftexp.Store, workers *worker.Manager, link hubLink, n *node.Node, sharded bool, log logr.Logger) error {
	if err := local.Add(manager.RunnableFunc(func(ctx context.Context) error {
		store.Run(ctx)
		return nil
	})); err != nil {
		return fmt.Errorf("adding expectations flusher: %w", err)
	}
	if err := local.Add(&takeover{node: n, store: store, workers: workers, trigger: link.replan, sharded: sharded, log: log}); err != nil {
		return fmt.Errorf("adding leadership handler: %w", err)
	}
	if l := cfg.Hub.LeaderLease; l.Name != "" {
		if err := local.Add(&leaderlease.Writer{Reader: local.GetAPIReader(), Writer: local.GetClient(), Namespace: cfg.Hub.Namespace, Name: l.Name,
			Identity: n.ServerID(), Leader: n, Interval: l.RenewInterval, Clock: clock.RealClock{}, Log: log.WithName("leader-lease")}); err != nil {
			return fmt.Errorf("adding the leader Lease writer: %w", err)
		}
	}
	return nil
}

// addAdminServer adds the raft admin endpoint unless raft.adminAddress is
// empty or "0".
func addAdminServer(cfg *config.Config, local manager.Manager, n *node.Node) error {
	if cfg.Raft.AdminAddress == "" || cfg.Raft.AdminAddress == "0" {
		return nil
	}
	if err := local.Add(adminServer(cfg.Raft.AdminAddress, n)); err != nil {
		return fmt.Errorf("adding admin server: %w", err)
	}
	return nil
}

// registerFRSMetrics registers the per-FederatedReplicaSet metrics unless
// metrics.perFRS is off, and returns how to unregister them.
func registerFRSMetrics(cfg *config.Config, local manager.Manager, m *members, link hubLink, n *node.Node, log logr.Logger) (func(), error) {
	if cfg.Metrics.PerFRS == config.PerFRSOff {
		return func() {}, nil
	}
	c := &frsmetrics.Collector{Reader: local.GetCache(), Targets: link.targets, Registered: m.reg.Registered, Leader: n,
		PerMember: cfg.Metrics.PerFRS == config.PerFRSMembers, Log: log.WithName("frs-metrics")}
	if err := crmetrics.Registry.Register(c); err != nil {
		return nil, fmt.Errorf("registering per-FederatedReplicaSet metrics: %w", err)
	}
	return func() { crmetrics.Registry.Unregister(c) }, nil
}

// runManager runs the manager until ctx ends and the node has stepped down.
// The manager outlives ctx until then, so member writes drain and
// leadership moves while informers still run.
func runManager(ctx context.Context, mgr mcmanager.Manager, n *node.Node, log logr.Logger) error {
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
	err := mgr.Start(mgrCtx)
	stopMgr()
	<-stepped
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("running manager: %w", err)
	}
	return nil
}
