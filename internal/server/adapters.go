package server

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/multicluster-runtime/pkg/multicluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/metrics"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// targetStore adapts the raft node to hub.TargetStore.
type targetStore struct{ n *node.Node }

func toFSM(r hub.FRSRef) fsm.FRSRef {
	return fsm.FRSRef{Namespace: r.Namespace, Name: r.Name, UID: r.UID}
}

func (t *targetStore) Targets(frs hub.FRSRef) (map[string]int32, int64, bool) {
	return t.n.Targets(toFSM(frs))
}

func (t *targetStore) SetTargets(ctx context.Context, frs hub.FRSRef, generation int64, targets map[string]int32) error {
	defer observe("set-targets", time.Now())
	return t.n.SetTargets(ctx, toFSM(frs), generation, targets)
}

func (t *targetStore) DeleteTargets(ctx context.Context, frs hub.FRSRef) error {
	defer observe("delete-targets", time.Now())
	return t.n.DeleteTargets(ctx, toFSM(frs))
}

func observe(op string, start time.Time) {
	metrics.RaftApplyDuration.WithLabelValues(op).Observe(time.Since(start).Seconds())
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
		logr.FromContextOrDiscard(ctx).V(1).Info("listing FederatedReplicaSets to re-plan failed", "error", err.Error())
		return
	}
	for i := range list.Items {
		trigger(list.Items[i].Namespace, list.Items[i].Name)
	}
}

// takeover runs what a new leader must do before its workers write: settle
// the previous term's reservations from a fresh list of each member's pods
// (so nothing waits out a TTL), then re-plan every FederatedReplicaSet and
// re-sync every member key.
type takeover struct {
	node     *node.Node
	store    *raftexp.Store
	registry *registry.Registry
	workers  *worker.Manager
	trigger  func()
}

func (t *takeover) NeedLeaderElection() bool { return false }

func (t *takeover) Start(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx).WithName("takeover")
	changes := t.node.LeaderChanges()
	for {
		select {
		case <-ctx.Done():
			return nil
		case leading := <-changes:
			if !leading {
				metrics.RaftLeader.Set(0)
				log.V(1).Info("raft leadership lost; member writes stop")
				continue
			}
			lctx, term, ok := t.node.Leading()
			if !ok {
				continue
			}
			metrics.RaftLeader.Set(1)
			metrics.RaftTerm.Set(float64(term))
			log.Info("raft leadership gained", "term", term)
			t.settle(lctx, log)
			t.trigger()
			t.workers.EnqueueAll(lctx)
		}
	}
}

func (t *takeover) settle(ctx context.Context, log logr.Logger) {
	for _, m := range t.registry.Members() {
		keys := t.store.KeysToReconcile(m.Name)
		for _, key := range keys {
			live, err := livePods(ctx, m.Cluster.GetAPIReader(), key)
			if err != nil {
				log.V(1).Info("cannot list member pods to settle reservations", "cluster", m.Name, "key", key.String(), "error", err.Error())
				continue
			}
			done, released, err := t.store.ReconcileReservations(ctx, key, live)
			if err != nil {
				log.V(1).Info("settling reservations failed", "cluster", m.Name, "key", key.String(), "error", err.Error())
				continue
			}
			log.V(1).Info("reservations of the previous term settled", "cluster", m.Name, "key", key.String(),
				"completed", len(done), "released", len(released))
		}
	}
}

// livePods lists the namespace's pods with a quorum read, name -> UID.
func livePods(ctx context.Context, r client.Reader, key expectations.Key) (map[string]types.UID, error) {
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(key.Namespace)); err != nil {
		return nil, err
	}
	out := make(map[string]types.UID, len(pods.Items))
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			out[p.Name] = p.UID
		}
	}
	return out, nil
}

// adminServer serves raft membership administration and a status document
// used by tests and operators: GET /status.
func adminServer(addr string, n *node.Node) manager.Runnable {
	mux := http.NewServeMux()
	mux.Handle("/", n.AdminHandler())
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, _ *http.Request) {
		leaderAddr, leaderID := n.Leader()
		_, term, leading := n.Leading()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": n.ServerID(), "address": n.Address(), "leading": leading, "term": term,
			"leaderID": leaderID, "leaderAddress": leaderAddr, "ready": n.Ready() == nil,
		})
	})
	return manager.RunnableFunc(func(ctx context.Context) error {
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return err
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
