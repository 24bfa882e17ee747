package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// targetStore adapts the raft node to hub.TargetStore. New targets are
// committed in the expectations store's rounds (raftexp.Store.Share) when
// shared is set: while pods are being created, the hub's targets of many
// FederatedReplicaSets then ride in the reservation entries instead of
// taking one raft entry each.
type targetStore struct {
	n      *node.Node
	shared *raftexp.Store
}

func (t *targetStore) Targets(frs fedref.FRS) (map[string]int32, int64, bool) {
	return t.n.Targets(fsm.FRSRefOf(frs))
}

func (t *targetStore) SetTargets(ctx context.Context, frs fedref.FRS, generation int64, targets map[string]int32) error {
	defer observe("set-targets", time.Now())
	if t.shared == nil {
		return t.n.SetTargets(ctx, fsm.FRSRefOf(frs), generation, targets)
	}
	cmd := &fsm.SetTargets{Meta: t.n.Meta(), FRS: fsm.FRSRefOf(frs), Generation: generation, Targets: targets}
	if _, err := t.shared.Share(ctx, cmd); err != nil {
		return fmt.Errorf("setting targets of %s: %w", frs, err)
	}
	return nil
}

func (t *targetStore) DeleteTargets(ctx context.Context, frs fedref.FRS) error {
	defer observe("delete-targets", time.Now())
	return t.n.DeleteTargets(ctx, fsm.FRSRefOf(frs))
}

// rolloutStore adapts the raft node to hub.RolloutStore: records travel
// and rest as JSON.
type rolloutStore struct{ n *node.Node }

func (r *rolloutStore) Rollout(frs fedref.FRS) (*rollout.Record, bool) {
	b, ok := r.n.Rollout(fsm.FRSRefOf(frs))
	if !ok {
		return nil, false
	}
	rec := &rollout.Record{}
	if err := json.Unmarshal(b, rec); err != nil {
		// Only this version writes records; one it cannot read is treated
		// as none, and the next pass writes a fresh one.
		return nil, false
	}
	return rec, true
}

func (r *rolloutStore) SetRollout(ctx context.Context, frs fedref.FRS, rec *rollout.Record) error {
	defer observe("set-rollout", time.Now())
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding the rollout of %s: %w", frs, err)
	}
	return r.n.SetRollout(ctx, fsm.FRSRefOf(frs), b)
}

func (r *rolloutStore) DeleteRollout(ctx context.Context, frs fedref.FRS) error {
	defer observe("delete-rollout", time.Now())
	return r.n.DeleteRollout(ctx, fsm.FRSRefOf(frs))
}

func observe(op string, start time.Time) {
	metrics.RaftApplyDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
}

// pokers passes every poke to each of its Pokers.
type pokers []hub.Poker

func (ps pokers) Enqueue(key fedref.MemberObject) {
	for _, p := range ps {
		p.Enqueue(key)
	}
}

// awareRunnable lets a multicluster.Aware join the manager: it is engaged with
// every member and its Start just waits.
type awareRunnable struct{ multicluster.Aware }

func (a *awareRunnable) Start(ctx context.Context) error { <-ctx.Done(); return nil }

// NeedLeaderElection is false: every replica keeps member caches warm.
func (a *awareRunnable) NeedLeaderElection() bool { return false }

// enqueueAll asks the hub reconciler to look at every FederatedReplicaSet.
func enqueueAll(ctx context.Context, mgr manager.Manager, trigger func(namespace, name string)) {
	list := &v1alpha1.FederatedReplicaSetList{}
	if err := mgr.GetCache().List(ctx, list); err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "Listing FederatedReplicaSets to re-plan")
		return
	}
	for i := range list.Items {
		trigger(list.Items[i].Namespace, list.Items[i].Name)
	}
}

// takeover runs what a new leader must do after its Barrier: re-plan every
// FederatedReplicaSet and sync every member key. Each key's first sync in
// the term settles the earlier terms' expectations from a quorum list and
// waits for the informer cache to catch up (engine.verify). Keys still
// holding earlier-term expectations are enqueued again every settleInterval
// until none is left (list errors, members engaged after the election) or
// leadership ends.
type takeover struct {
	node     *node.Node
	store    *raftexp.Store
	workers  *worker.Manager
	trigger  func()
	interval time.Duration
	// sharded: the members' owners sync and settle their own keys
	// (ownedSync); a new leader only re-plans.
	sharded bool
	// log is the replica's logger: the Runnable's context carries none.
	log logr.Logger
}

// resyncInterval is how often a leader re-enqueues every MemberReplicaSet of
// every member and every FederatedReplicaSet, so a key whose last event was
// dropped (it arrived while this replica could not write) is synced and its
// status refreshed without waiting for another event.
const resyncInterval = 10 * time.Second

// settleInterval is how often a new leader re-enqueues unsettled keys.
const settleInterval = time.Second

func (t *takeover) NeedLeaderElection() bool { return false }

func (t *takeover) Start(ctx context.Context) error {
	log := t.log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log = log.WithName("takeover")
	changes := t.node.LeaderChanges()
	for {
		select {
		case <-ctx.Done():
			return nil
		case leading := <-changes:
			if !leading {
				metrics.RaftLeader.Set(0)
				log.V(1).Info("Raft leadership lost; member writes stop")
				continue
			}
			lctx, term, ok := t.node.Leading()
			if !ok {
				continue
			}
			metrics.RaftLeader.Set(1)
			metrics.RaftTerm.Set(float64(term))
			log.Info("Raft leadership gained", "term", term)
			go t.resync(logr.NewContext(lctx, log.WithValues("term", term)))
			if !t.sharded {
				go t.settle(lctx, log.WithValues("term", term))
			}
		}
	}
}

// resync enqueues every MemberReplicaSet of every member and re-plans every
// FederatedReplicaSet at once and then every resyncInterval while this term
// lasts: a trigger that reached the hub reconciler before its gate opened
// must not leave a status stale until the next unrelated event.
func (t *takeover) resync(ctx context.Context) {
	tick := time.NewTicker(resyncInterval)
	defer tick.Stop()
	log := logr.FromContextOrDiscard(ctx)
	for {
		start := time.Now()
		t.trigger()
		if !t.sharded {
			t.workers.EnqueueAll(ctx)
		}
		log.V(2).Info("Resync enqueued every FederatedReplicaSet and MemberReplicaSet", "took", time.Since(start))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// settle re-enqueues keys with earlier-term expectations until there are none.
func (t *takeover) settle(ctx context.Context, log logr.Logger) {
	interval := t.interval
	if interval <= 0 {
		interval = settleInterval
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		keys := t.store.KeysToReconcile("")
		if len(keys) == 0 {
			log.V(1).Info("Earlier terms' expectations settled")
			return
		}
		for _, k := range keys {
			t.workers.Enqueue(k)
		}
		log.V(2).Info("Keys with earlier terms' expectations enqueued", "keys", len(keys))
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// adminServer serves the raft admin endpoint (node.AdminHandler: status and
// membership administration) over TLS with the raft certificates, unless
// raft.tls.insecure.
func adminServer(addr string, n *node.Node) manager.Runnable {
	mux := n.AdminHandler()
	return manager.RunnableFunc(func(ctx context.Context) error {
		srv := &http.Server{
			Handler: mux, ReadHeaderTimeout: 5 * time.Second, ReadTimeout: 30 * time.Second,
			MaxHeaderBytes: 64 << 10, TLSConfig: n.AdminTLSConfig(),
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listening for the admin endpoint on %s: %w", addr, err)
		}
		if srv.TLSConfig != nil {
			l = tls.NewListener(l, srv.TLSConfig)
		}
		go func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		}()
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
}
