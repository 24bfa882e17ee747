package clientlimit

import (
	"context"
	"sync"

	"k8s.io/client-go/util/flowcontrol"
)

// firstKey marks a context whose requests go first.
type firstKey struct{}

// First marks ctx's requests to take a shared bucket's tokens before any
// unmarked request waiting beside them. The member engine marks its pod
// creates and deletes, and MemberReplicaSet and namespace creates, so that
// on a member at its rate limit the pods come first and status writes,
// events and reads wait for a lull (a status written later is no worse:
// the hub reads the engine's reports, not the member's status).
func First(ctx context.Context) context.Context {
	return context.WithValue(ctx, firstKey{}, true)
}

// isFirst reports whether ctx was marked by First.
func isFirst(ctx context.Context) bool {
	v, _ := ctx.Value(firstKey{}).(bool)
	return v
}

// prioritized is a bucket whose marked requests go ahead of the others:
// an unmarked request waits until no marked one is waiting, and only one
// unmarked request at a time waits in the bucket itself, so a marked
// request arriving meanwhile is behind at most that one.
type prioritized struct {
	bucket flowcontrol.RateLimiter
	// ordinary holds the one unmarked request waiting in the bucket.
	ordinary chan struct{}

	mu    sync.Mutex
	first int           // marked requests waiting
	lull  chan struct{} // closed while first == 0
}

// newPrioritized puts bucket behind marked-first ordering.
func newPrioritized(bucket flowcontrol.RateLimiter) *prioritized {
	lull := make(chan struct{})
	close(lull)
	return &prioritized{bucket: bucket, ordinary: make(chan struct{}, 1), lull: lull}
}

// Wait blocks until the request may be sent, or ctx ends.
func (p *prioritized) Wait(ctx context.Context) error {
	if isFirst(ctx) {
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
	for {
		p.mu.Lock()
		lull, waiting := p.lull, p.first
		p.mu.Unlock()
		if waiting == 0 {
			return p.bucket.Wait(ctx)
		}
		select {
		case <-lull:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
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
	p.mu.Lock()
	waiting := p.first
	p.mu.Unlock()
	return waiting == 0 && p.bucket.TryAccept()
}

// Accept blocks until a token is taken, as an unmarked request.
func (p *prioritized) Accept() { _ = p.Wait(context.Background()) }

// Stop stops the bucket.
func (p *prioritized) Stop() { p.bucket.Stop() }

// QPS is the bucket's rate.
func (p *prioritized) QPS() float32 { return p.bucket.QPS() }
