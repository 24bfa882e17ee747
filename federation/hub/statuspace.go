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
type statusPacer struct {
	mu      sync.Mutex
	last    map[string]time.Time
	waiting map[string]bool
}

// wait returns how long key must wait before writing a changed status;
// zero means write now. A positive wait marks key as waiting.
func (p *statusPacer) wait(key string, now time.Time, significant bool, minInterval time.Duration, budget float64) time.Duration {
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
	last, ok := p.last[key]
	if !ok || interval <= 0 {
		return 0
	}
	if w := interval - now.Sub(last); w > 0 {
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
}

// settled records that key's status needs no write (it matches what the
// hub holds).
func (p *statusPacer) settled(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	delete(p.waiting, key)
}

// forget drops everything known of key (the object is gone).
func (p *statusPacer) forget(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.init()
	delete(p.last, key)
	delete(p.waiting, key)
}

func (p *statusPacer) init() {
	if p.last == nil {
		p.last, p.waiting = map[string]time.Time{}, map[string]bool{}
	}
}
