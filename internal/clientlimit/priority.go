package clientlimit

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Patience is the longest an unmarked request waits for a lull in marked
// ones before it takes its place in the bucket anyway. It bounds how long
// events, informer relists and status writes can be held back by a burst
// of pod writes, while still giving marked requests nearly every token of
// the burst (one unmarked request per Patience at most).
const Patience = time.Second

// firstKey marks a context whose requests go first.
type firstKey struct{}

// First marks ctx's requests to take a shared bucket's tokens before the
// unmarked requests waiting beside them. The member engine marks its syncs,
// so that on a member at its rate limit pods and MemberReplicaSets come
// first, and events and other background requests use the lulls.
func First(ctx context.Context) context.Context {
	return context.WithValue(ctx, firstKey{}, true)
}

// IsFirst reports whether ctx was marked by First.
func IsFirst(ctx context.Context) bool {
	v, _ := ctx.Value(firstKey{}).(bool)
	return v
}

// Busy returns a function that reports whether requests marked by First
// are waiting for rc's bucket: the member's rate limit is the bottleneck
// right now, and a write that can wait should. It always reports false
// for a configuration without a shared bucket (no limit, or one per REST
// client).
func Busy(rc *rest.Config) func() bool {
	p, ok := rc.RateLimiter.(*prioritized)
	if !ok {
		return func() bool { return false }
	}
	return func() bool { return p.waitingFirst() > 0 }
}

// prioritized is a bucket whose marked requests go ahead of the others:
// an unmarked request waits until no marked one is waiting, or for
// Patience, and only one unmarked request at a time waits in the bucket
// itself, so a marked request arriving meanwhile is behind at most that one.
type prioritized struct {
	bucket flowcontrol.RateLimiter
	clock  clock.Clock
	// ordinary holds the one unmarked request waiting in the bucket.
	ordinary chan struct{}

	mu    sync.Mutex
	first int           // marked requests waiting
	lull  chan struct{} // closed while first == 0
}

// newPrioritized puts bucket behind marked-first ordering.
func newPrioritized(bucket flowcontrol.RateLimiter, c clock.Clock) *prioritized {
	lull := make(chan struct{})
	close(lull)
	return &prioritized{bucket: bucket, clock: c, ordinary: make(chan struct{}, 1), lull: lull}
}

// Wait blocks until the request may be sent, or ctx ends.
func (p *prioritized) Wait(ctx context.Context) error {
	if IsFirst(ctx) {
		p.arrive()
		defer p.leave()
		return p.bucket.Wait(ctx)
	}
	select {
	case p.ordinary <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.ordinary }()
	if err := p.awaitLull(ctx); err != nil {
		return err
	}
	return p.bucket.Wait(ctx)
}

// awaitLull returns when no marked request waits, or after Patience.
func (p *prioritized) awaitLull(ctx context.Context) error {
	var patience clock.Timer
	for {
		p.mu.Lock()
		lull, waiting := p.lull, p.first
		p.mu.Unlock()
		if waiting == 0 {
			return nil
		}
		if patience == nil {
			// Made only when there is something to wait for: most
			// requests find no marked one waiting.
			patience = p.clock.NewTimer(Patience)
			defer patience.Stop()
		}
		select {
		case <-lull:
		case <-patience.C():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitingFirst is how many marked requests wait.
func (p *prioritized) waitingFirst() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.first
}

// arrive counts a marked request waiting.
func (p *prioritized) arrive() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first == 0 {
		p.lull = make(chan struct{})
	}
	p.first++
}

// leave counts a marked request done waiting.
func (p *prioritized) leave() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.first--
	if p.first == 0 {
		close(p.lull)
	}
}

// TryAccept takes a token now if one is free and no marked request waits.
func (p *prioritized) TryAccept() bool {
	return p.waitingFirst() == 0 && p.bucket.TryAccept()
}

// Accept blocks until a token is taken, as an unmarked request.
func (p *prioritized) Accept() { _ = p.Wait(context.Background()) }

// Stop stops the bucket.
func (p *prioritized) Stop() { p.bucket.Stop() }

// QPS is the bucket's rate.
func (p *prioritized) QPS() float32 { return p.bucket.QPS() }
