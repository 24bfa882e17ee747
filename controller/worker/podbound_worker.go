package worker

import (
	"context"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/internal/metrics"
)

// PodCacheIncomplete says why this member's pod cache misses pods (it has
// more than Options.MaxCachedPods), nil when it holds every pod or has no
// bound. The hub can show it on the MemberCluster.
func (w *Worker) PodCacheIncomplete() error {
	w.mu.Lock()
	b := w.bound
	w.mu.Unlock()
	if b == nil {
		return nil
	}
	return b.Incomplete()
}

// watchBound keeps the member's metrics in line with its pod bound and
// queues every key when the view turns incomplete (each then reports why)
// or complete again (each then syncs what it skipped). The returned
// function stops that and removes the member's series.
func (w *Worker) watchBound(ctx context.Context, b *PodBound) func() {
	log := ctrl.LoggerFrom(ctx)
	// mu orders the updates and the removal of the series at the end.
	var mu sync.Mutex
	var wasIncomplete, stopped bool
	var wg sync.WaitGroup
	b.setNotify(func(cached, left int) {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		metrics.MemberPodCachePods.WithLabelValues(w.name).Set(float64(cached))
		incomplete := left > 0
		flipped := incomplete != wasIncomplete
		wasIncomplete = incomplete
		if !flipped {
			return
		}
		if incomplete {
			metrics.MemberPodCacheIncomplete.WithLabelValues(w.name).Set(1)
			log.Info("Member pod cache is full; nothing is created or deleted in this member until it is complete again",
				"maximum", b.Max(), "cached", cached, "notCached", left)
		} else {
			metrics.MemberPodCacheIncomplete.WithLabelValues(w.name).Set(0)
			log.Info("Member pod cache is complete again", "cached", cached)
		}
		// Not on the informer's goroutine: listing waits for the cache.
		wg.Go(func() {
			if err := w.EnqueueAll(ctx); err != nil && ctx.Err() == nil {
				log.Error(err, "Queueing every MemberReplicaSet after the pod cache changed")
			}
		})
	})
	mu.Lock()
	cached, left := b.Counts()
	metrics.MemberPodCachePods.WithLabelValues(w.name).Set(float64(cached))
	wasIncomplete = left > 0
	v := 0.0
	if wasIncomplete {
		v = 1
	}
	metrics.MemberPodCacheIncomplete.WithLabelValues(w.name).Set(v)
	mu.Unlock()
	return func() {
		b.setNotify(nil)
		mu.Lock()
		stopped = true
		metrics.MemberPodCachePods.DeleteLabelValues(w.name)
		metrics.MemberPodCacheIncomplete.DeleteLabelValues(w.name)
		mu.Unlock()
		wg.Wait()
	}
}
