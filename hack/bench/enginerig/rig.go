// Package enginerig runs replicafed's member engine against one member
// cluster the way a replicafed replica does, with the hub left out: a
// single-node raft node with the raft-backed expectations store and its
// write gate, the member client with the product's rate limit (or none),
// write deadline, in-flight bound and lease fence, the member cache with
// slim pods and the product's pod bound, and worker.Manager. Workloads and
// their targets come from the caller (Source), not from a planner. The
// side-by-side bench's engine child and the engine CPU benchmark both use
// it.
package enginerig

import (
	"context"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/internal/clientlimit"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/node"
	"github.com/replicafed/replicafed/replica/writefence"
)

// Member is the member name the rig's engine serves.
const Member = "member"

// Options configure a Rig. The zero value is the product's defaults with
// the member client's rate limit off.
type Options struct {
	// Member is the member cluster's client configuration (copied).
	Member *rest.Config
	// DataDir holds the raft data.
	DataDir string
	// QPS and Burst set the member client's rate limit; QPS <= 0 turns
	// it off (controller.memberRateLimit=false).
	QPS   float32
	Burst int
	// BurstReplicas is controller.burstReplicas; 0 keeps the default.
	BurstReplicas int
	// WriteTimeout is controller.memberWriteTimeout; negative keeps the
	// default, 0 turns the deadline off.
	WriteTimeout time.Duration
	// MaxInFlight bounds member writes in flight (writefence.Bounded);
	// 0 keeps writefence.DefaultMaxInFlight, negative means no bound.
	MaxInFlight int
	// Tolerations are added to every workload's pod template.
	Tolerations []corev1.Toleration
	// Log receives the engine's and raft's logs; empty discards them.
	Log logr.Logger
}

// Rig is a running member engine.
type Rig struct {
	// Node is the raft node; Source the workloads the engine serves.
	Node    *node.Node
	Source  *Source
	manager *worker.Manager
	member  cluster.Cluster
	cancel  context.CancelFunc
	done    sync.WaitGroup
}

// Start starts the engine and returns once the raft node leads and the
// worker is engaged (its caches sync in the background).
func Start(ctx context.Context, o Options) (_ *Rig, err error) {
	cfg, err := ProductConfig(o.DataDir)
	if err != nil {
		return nil, err
	}
	if o.BurstReplicas > 0 {
		cfg.Controller.BurstReplicas = o.BurstReplicas
	}
	if o.WriteTimeout >= 0 {
		cfg.Controller.MemberWriteTimeout = o.WriteTimeout
	}
	cfg.Controller.MemberRateLimit = o.QPS > 0
	cfg.Controller.MemberQPS, cfg.Controller.MemberBurst = o.QPS, o.Burst
	log := o.Log
	if log.GetSink() == nil {
		log = logr.Discard()
	}

	ctx, cancel := context.WithCancel(ctx)
	r := &Rig{Source: &Source{tolerations: o.Tolerations, workloads: map[fedref.MemberObject]*engine.Workload{}}, cancel: cancel}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	if r.Node, err = node.New(raftNodeConfig(cfg), log.WithName("raft")); err != nil {
		return nil, fmt.Errorf("starting raft node: %w", err)
	}
	store := raftexp.New(r.Node, log.WithName("expectations"))
	r.done.Go(func() { store.Run(ctx) })
	if err := waitGate(ctx, r.Node, time.Minute); err != nil {
		return nil, err
	}

	rc := rest.CopyConfig(o.Member)
	maxInFlight := o.MaxInFlight
	if maxInFlight == 0 {
		maxInFlight = writefence.DefaultMaxInFlight
	}
	if err := memberClient(rc, cfg.Controller, r.Node, maxInFlight); err != nil {
		return nil, fmt.Errorf("configuring the member client: %w", err)
	}
	cl, err := cluster.New(rc, func(co *cluster.Options) {
		co.Scheme = kubescheme.Must()
		worker.CacheOptionsFor(cfg.Controller.MaxCachedPodsPerMember)(co)
	})
	if err != nil {
		return nil, fmt.Errorf("creating member cluster: %w", err)
	}
	r.done.Go(func() {
		if err := cl.Start(ctx); err != nil {
			log.Error(err, "Member cluster stopped")
		}
	})
	// Engaged once its cache has started, as the product's providers do.
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Minute)
	started := cl.GetCache().WaitForCacheSync(wctx)
	wcancel()
	if !started {
		return nil, fmt.Errorf("starting the member cache: not started within 2m")
	}
	r.manager = worker.NewManager(worker.Options{
		Workers: cfg.Controller.Workers, BurstReplicas: cfg.Controller.BurstReplicas, CreateNamespaces: cfg.Controller.CreateNamespaces,
		Store: store, Source: r.Source, Gate: r.Node, MaxCachedPods: cfg.Controller.MaxCachedPodsPerMember,
		UnsatisfiedRequeue: min(cfg.Controller.ExpectationsTTL/10, engine.DefaultUnsatisfiedRequeue),
		Sink:               r.Source,
	})
	r.member = cl
	if err := r.manager.Engage(ctx, Member, cl); err != nil {
		return nil, fmt.Errorf("engaging the member: %w", err)
	}
	r.done.Go(func() { resync(ctx, r.manager) })
	return r, nil
}

// Enqueue asks the engine to sync key.
func (r *Rig) Enqueue(key fedref.MemberObject) { r.manager.Enqueue(key) }

// SetTarget sets the target of key's workload (created from Workload on
// first use) and enqueues it.
func (r *Rig) SetTarget(key fedref.MemberObject, run string, target int32) {
	r.Source.setTarget(key, run, target)
	r.manager.Enqueue(key)
}

// CreateOwner creates key's MemberReplicaSet as the engine would (its
// workload set with SetTarget first). The engine creates none for a target
// of zero; a benchmark that measures a scale-up from an existing owner at
// zero, as kube-controller-manager's ReplicaSet is created at zero, makes
// it here.
func (r *Rig) CreateOwner(ctx context.Context, key fedref.MemberObject) error {
	w, ok := r.Source.Workload(key)
	if !ok {
		return fmt.Errorf("no workload %s: set its target first", key)
	}
	nn := types.NamespacedName{Namespace: key.Namespace, Name: key.Name}
	if err := r.member.GetClient().Create(ctx, engine.NewOwner(nn, w)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating MemberReplicaSet %s: %w", nn, err)
	}
	return nil
}

// Stop stops the engine and the raft node and waits for them.
func (r *Rig) Stop() {
	r.cancel()
	if r.manager != nil {
		r.manager.Stop()
	}
	r.done.Wait()
	if r.Node != nil {
		_ = r.Node.Shutdown()
	}
}

// Key is the expectations key of the MemberReplicaSet name in namespace.
func Key(namespace, name string) fedref.MemberObject {
	return fedref.MemberObject{Cluster: Member, Namespace: namespace, Name: name}
}

// PodLabels are the labels of one run's pods; run keeps runs apart.
func PodLabels(run string) map[string]string {
	return map[string]string{"app": "sidebyside", "run": run}
}

// PodTemplate is the template of one run's pods: a pause container that
// tolerates tolerations (kwok's taint, for example), with no grace period.
func PodTemplate(run string, tolerations ...corev1.Toleration) corev1.PodTemplateSpec {
	zero := int64(0)
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: PodLabels(run)},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations:                   tolerations,
			TerminationGracePeriodSeconds: &zero,
		},
	}
}

// Source is the hub's answer for the rig's workloads, with targets the
// caller sets; it also keeps each workload's last status report.
type Source struct {
	tolerations []corev1.Toleration

	mu        sync.Mutex
	workloads map[fedref.MemberObject]*engine.Workload
	reports   map[fedref.MemberObject]engine.MemberStatus
	changed   chan struct{}
}

// Workload implements engine.WorkloadSource.
func (s *Source) Workload(k fedref.MemberObject) (*engine.Workload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[k]
	if !ok {
		return nil, false
	}
	c := *w
	return &c, true
}

func (s *Source) setTarget(k fedref.MemberObject, run string, n int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.workloads[k]
	if !ok {
		w = &engine.Workload{
			Key: k, Selector: &metav1.LabelSelector{MatchLabels: PodLabels(run)}, Template: PodTemplate(run, s.tolerations...),
			Hub: v1alpha1.HubReference{Namespace: "hub", Name: k.Name, UID: types.UID("hub-" + k.Name)},
		}
		s.workloads[k] = w
	}
	w.Target = n
}

// Report implements engine.StatusSink.
func (s *Source) Report(_ context.Context, k fedref.MemberObject, st engine.MemberStatus) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.reports == nil {
		s.reports = map[fedref.MemberObject]engine.MemberStatus{}
	}
	s.reports[k] = st
	if s.changed != nil {
		close(s.changed)
		s.changed = nil
	}
}

// WaitReport waits until key's last report satisfies ok, or ctx ends.
func (s *Source) WaitReport(ctx context.Context, k fedref.MemberObject, ok func(engine.MemberStatus) bool) error {
	for {
		s.mu.Lock()
		st, have := s.reports[k]
		if have && ok(st) {
			s.mu.Unlock()
			return nil
		}
		if s.changed == nil {
			s.changed = make(chan struct{})
		}
		ch := s.changed
		s.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("waiting for a status report of %s (last %+v): %w", k, st, ctx.Err())
		}
	}
}

// ProductConfig is replicafed's default configuration (config.Load with
// no file and no environment) for a single replica with its raft data in
// dir.
func ProductConfig(dir string) (*config.Config, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	// Required by the configuration, never served here.
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	fs := pflag.NewFlagSet("replicafed", pflag.ContinueOnError)
	config.BindFlags(fs)
	flag := func(key, val string) string { return "--" + config.FlagName(key) + "=" + val }
	args := []string{
		flag("raft.id", "bench"), flag("raft.peers", "bench="+addr), flag("raft.bindAddress", addr),
		flag("raft.dataDir", dir), flag("raft.tls.insecure", "true"), flag("raft.adminAddress", admin),
		flag("metrics.bindAddress", "0"), flag("health.probeAddress", "0"),
	}
	cfg, err := config.Load(fs, args, nil)
	if err != nil {
		return nil, fmt.Errorf("loading replicafed's default configuration: %w", err)
	}
	return cfg, nil
}

// freeAddr is a loopback address with a port that was free a moment ago.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// raftNodeConfig maps the configuration onto the raft node, as a replica
// does.
func raftNodeConfig(cfg *config.Config) node.NodeConfig {
	r := cfg.Raft
	nc := node.NodeConfig{
		ID: r.ID, ClusterID: r.ClusterID, BindAddr: r.BindAddress, AdvertiseAddr: r.AdvertiseAddress, DataDir: r.DataDir,
		HeartbeatTimeout: r.HeartbeatTimeout, ElectionTimeout: r.ElectionTimeout, LeaderLeaseTimeout: r.LeaderLeaseTimeout,
		CommitTimeout: r.CommitTimeout, MaxAppendEntries: r.MaxAppendEntries, SnapshotInterval: r.SnapshotInterval,
		SnapshotThreshold: uint64(r.SnapshotThreshold), TrailingLogs: uint64(r.TrailingLogs), ApplyTimeout: r.ApplyTimeout,
		ObservationBatchSize: r.ObservationBatchSize, ObservationFlushInterval: r.ObservationFlushInterval,
		ExpectationsTTL: cfg.Controller.ExpectationsTTL, DeadServerTimeout: r.DeadServerTimeout,
		TLS: node.TLSFiles{Insecure: r.TLS.Insecure},
	}
	for _, p := range r.Peers {
		nc.Peers = append(nc.Peers, node.Peer{ID: p.ID, Address: p.Address})
	}
	return nc
}

// waitGate waits until the single raft node leads and may write to members.
func waitGate(ctx context.Context, n *node.Node, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, ok := n.Allowed(); ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("raft node not leading after %v", timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// memberClient sets up the member client as a replica does: the member
// rate limit (or none), the user agent, and every write bounded by
// controller.memberWriteTimeout (renewed while the lease covers it, up to
// controller.memberWriteMaxDuration) with pod writes sent only under the
// raft write lease, at most maxInFlight at once (<= 0: no bound).
func memberClient(rc *rest.Config, c config.Controller, n *node.Node, maxInFlight int) error {
	clientlimit.Apply(rc, c.MemberRateLimit, c.MemberQPS, c.MemberBurst)
	rc.UserAgent = "replicafed"
	d := c.MemberWriteTimeout
	permitted := func(context.Context) bool { return n.WriteLease(d) }
	step := writefence.RenewalStep(d)
	r := writefence.Renewal{Covers: func(context.Context) bool { return n.LeaseCovers(step) }, Step: step, Max: c.MemberWriteMaxDuration}
	return writefence.Renewed(d, permitted, r, maxInFlight)(rc)
}

// resync re-enqueues every MemberReplicaSet every 10 s, as the leader does.
func resync(ctx context.Context, mgr *worker.Manager) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			mgr.EnqueueAll(ctx)
		}
	}
}
