package worker

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// LullCheck is how often a worker looks whether its member's rate limit has
// fallen idle, to wake the keys whose status writes wait for that
// (engine.Result.AwaitLull). One look a second per member replaces a sync a
// second per waiting key: a burst of 1,000 small workloads had about as
// many keys per member synced again each second only to wait once more.
const LullCheck = time.Second

// parked holds the keys whose status writes wait for a lull.
type parked struct {
	mu   sync.Mutex
	keys map[types.NamespacedName]struct{}
}

// add parks k.
func (p *parked) add(k types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.keys == nil {
		p.keys = map[types.NamespacedName]struct{}{}
	}
	p.keys[k] = struct{}{}
}

// remove unparks k: a sync wrote its status, or no longer needs to.
func (p *parked) remove(k types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.keys, k)
}

// take unparks and returns up to n keys (n <= 0: all of them).
func (p *parked) take(n int) []types.NamespacedName {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n <= 0 || n > len(p.keys) {
		n = len(p.keys)
	}
	out := make([]types.NamespacedName, 0, n)
	for k := range p.keys {
		if len(out) == n {
			break
		}
		out = append(out, k)
		delete(p.keys, k)
	}
	return out
}

// len is how many keys are parked.
func (p *parked) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.keys)
}

// wakeBatch is how many parked keys a lull wakes at once: about a second of
// the member's rate limit, so that the woken status writes never hold more
// than a second of the queue ahead of a new workload's sync (0: all, for a
// member without a limit, where nothing parks anyway).
func wakeBatch(rc *rest.Config) int {
	if rc == nil {
		return 0
	}
	qps := rc.QPS
	if rc.RateLimiter != nil {
		qps = rc.RateLimiter.QPS()
	}
	if qps <= 0 {
		return 0
	}
	return max(1, int(qps))
}

// wakeParked syncs again up to a batch of the parked keys when the
// member's rate limit is not busy; while it is, they keep waiting (each
// key's own RequeueAfter still comes at its deferral's bound).
func (w *Worker) wakeParked(ctx context.Context) {
	if w.parked.len() == 0 || (w.busy != nil && w.busy()) {
		return
	}
	keys := w.parked.take(w.batch)
	for _, k := range keys {
		w.queue.Add(k)
	}
	ctrl.LoggerFrom(ctx).V(4).Info("Woke status writes waiting for a lull", "keys", len(keys))
}
