package engine

import (
	"sync"
	"time"

	"github.com/replicafed/replicafed/internal/fedref"
)

// StatusInterval is the least time between two status writes of one
// MemberReplicaSet whose only news is counts still in flux (see
// replicastatus.Urgent). The hub learns counts from the engine's reports,
// not from this status, so pacing it costs the hub nothing; it spares the
// member QPS that pods need: a MemberReplicaSet of a few pods otherwise
// writes its status for each pod created, bound and made ready.
const StatusInterval = time.Second

// GenerationHold is the longest a new generation's status waits for its
// pods to settle (a condition change or settled pods are written at once).
// Written at once, a MemberReplicaSet of a few new pods writes its status
// twice: the new generation with no pods, then the settled pods a moment
// later. The hub reads the engine's reports, which carry the generation at
// once; the member's own status shows it up to this much later.
const GenerationHold = 5 * time.Second

// DefaultMaxStatusDeferral is the default Options.MaxStatusDeferral: the
// longest a status write waits while the member's rate limit is busy with
// pod and MemberReplicaSet writes (Options.Busy). The hub reads the
// engine's reports, so only the member's own status trails, and the
// deferred writes are woken as soon as the member's rate limit falls idle
// (Result.AwaitLull): the bound matters only for a burst longer than it.
// A minute was too short for a large burst (1,000 small workloads take
// about three minutes of a member's QPS): from its second minute the
// deferred writes took tokens the pods needed.
const DefaultMaxStatusDeferral = 5 * time.Minute

// ShardedMaxStatusDeferral is Options.MaxStatusDeferral with sharding on:
// the leader reads a member it does not own from the MemberReplicaSet
// status, so that status must not trail the pods for long.
const ShardedMaxStatusDeferral = time.Minute

// statusPace remembers when each key's status was last written, since when
// a generation's status has been held, and since when a write has waited
// for a busy member.
type statusPace struct {
	mu       sync.Mutex
	last     map[fedref.MemberObject]time.Time
	held     map[fedref.MemberObject]heldGeneration
	deferred map[fedref.MemberObject]time.Time
}

// heldGeneration is a generation whose status is held, and since when.
type heldGeneration struct {
	generation int64
	since      time.Time
}

// holding reports whether key's status of generation is being held.
func (p *statusPace) holding(k fedref.MemberObject, generation int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[k]
	return ok && h.generation == generation
}

// holdGeneration returns how much longer key's status of generation may
// wait for its pods to settle: GenerationHold from the first time it was
// asked for that generation, 0 once that has passed.
func (p *statusPace) holdGeneration(k fedref.MemberObject, generation int64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[k]
	if !ok || h.generation != generation {
		if p.held == nil {
			p.held = map[fedref.MemberObject]heldGeneration{}
		}
		p.held[k] = heldGeneration{generation: generation, since: now}
		return GenerationHold
	}
	return max(0, GenerationHold-now.Sub(h.since))
}

// deferBusy returns how much longer key's status write may wait for a busy
// member: bound from the first time it was deferred, 0 once that has
// passed.
func (p *statusPace) deferBusy(k fedref.MemberObject, now time.Time, bound time.Duration) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	since, ok := p.deferred[k]
	if !ok {
		if p.deferred == nil {
			p.deferred = map[fedref.MemberObject]time.Time{}
		}
		p.deferred[k], since = now, now
	}
	return max(0, bound-now.Sub(since))
}

// settled forgets that key's status write was deferred: the status written
// is current again, so a later deferral starts its bound afresh.
func (p *statusPace) settled(k fedref.MemberObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.deferred, k)
}

// wait returns how long key's next count-only status write must wait.
func (p *statusPace) wait(k fedref.MemberObject, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	last, ok := p.last[k]
	if !ok {
		return 0
	}
	return max(0, StatusInterval-now.Sub(last))
}

// wrote records a status write of key at now.
func (p *statusPace) wrote(k fedref.MemberObject, now time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = map[fedref.MemberObject]time.Time{}
	}
	p.last[k] = now
	delete(p.held, k)
	delete(p.deferred, k)
}

// forget drops key.
func (p *statusPace) forget(k fedref.MemberObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, k)
	delete(p.held, k)
	delete(p.deferred, k)
}
