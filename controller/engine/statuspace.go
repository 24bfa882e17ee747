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

// statusPace remembers when each key's status was last written, and since
// when a generation's status has been held.
type statusPace struct {
	mu   sync.Mutex
	last map[fedref.MemberObject]time.Time
	held map[fedref.MemberObject]heldGeneration
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
}

// forget drops key.
func (p *statusPace) forget(k fedref.MemberObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, k)
	delete(p.held, k)
}
