package hub

import (
	"sync"
	"time"
)

// statusPacer spaces out FederatedReplicaSet status writes. Each object
// writes at most once per minInterval. When many objects change at once (a
// thousand FederatedReplicaSets scaling up, each member report changing a
// count), every object with a change waiting also shares a fleet-wide
// budget: with n of them waiting, each writes at most once per n/budget
// seconds, so together they stay within budget writes per second and the
// hub client keeps room for the writes planning needs (finalizers, plan
// marks, deletion). A write in between coalesces every change since the
// last one. Significant changes (see aggregate.Significant) only respect
// minInterval.
//
// A count-only change is also held for up to a hold from when it first
// waited (countHold, the caller's choice): the counts of a small
// FederatedReplicaSet move in a burst per member (created, bound, ready)
// and its status that ends the change is written at once
// (aggregate.Converged), so holding the counts in between spares the hub
// a write or two per object and hides nothing a user waits on; a large
// one shows its counts every hold while it scales.
type statusPacer struct {
	mu      sync.Mutex
	last    map[string]time.Time
	waiting map[string]bool
	// pending is when a count-only change of key first waited since its
	// last write.
	pending map[string]time.Time
}

// wait returns how long key must wait before writing a changed status;
// zero means write now. A positive wait marks key as waiting. hold applies
// to count-only changes (not significant) only.
func (p *statusPacer) wait(key string, now time.Time, significant bool, minInterval, hold time.Duration, budget float64) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	interval := minInterval
	if !significant && budget > 0 {
		n := len(p.waiting)
		if !p.waiting[key] {
			n++
		}
		interval = max(interval, time.Duration(float64(n)/budget*float64(time.Second)))
	}
	var w time.Duration
	if last, ok := p.last[key]; ok && interval > 0 {
		w = interval - now.Sub(last)
	}
	if !significant && hold > 0 {
		since, ok := p.pending[key]
		if !ok {
			since, p.pending[key] = now, now
		}
		w = max(w, hold-now.Sub(since))
	}
	if w > 0 {
		p.waiting[key] = true
		return w
	}
	return 0
}

// written records a status write of key.
func (p *statusPacer) written(key string, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	p.last[key] = now
	delete(p.waiting, key)
	delete(p.pending, key)
}

// settled records that key's status needs no write (it matches what the
// hub holds).
func (p *statusPacer) settled(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	delete(p.waiting, key)
	delete(p.pending, key)
}

// forget drops everything known of key (the object is gone).
func (p *statusPacer) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	delete(p.last, key)
	delete(p.waiting, key)
	delete(p.pending, key)
}

func (p *statusPacer) init() {
	if p.last == nil {
		p.last, p.waiting, p.pending = map[string]time.Time{}, map[string]bool{}, map[string]time.Time{}
	}
}
