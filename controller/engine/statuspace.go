package engine

import (
	"sync"
	"time"

	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

// StatusInterval is the least time between two status writes of one
// MemberReplicaSet whose only news is counts still in flux (see
// replicastatus.Urgent). The hub learns counts from the engine's reports,
// not from this status, so pacing it costs the hub nothing; it spares the
// member QPS that pods need: a MemberReplicaSet of a few pods otherwise
// writes its status for each pod created, bound and made ready.
const StatusInterval = time.Second

// GenerationHold is how long a new generation's status waits for its pods
// to settle after they last moved (a condition change or settled pods are
// written at once). Written at once, a MemberReplicaSet of a few new pods
// writes its status twice: the new generation with no pods, then the
// settled pods a moment later. The hub reads the engine's reports, which
// carry the generation at once; the member's own status shows it later.
const GenerationHold = 5 * time.Second

// GenerationHoldMax is the default Options.GenerationHoldMax: how long in
// all a held generation waits while its pods keep moving. On a member
// whose QPS many new MemberReplicaSets share, a few pods' creates,
// bindings and readiness spread over more than GenerationHold, and a hold
// that ended while they still moved cost a second status write for most
// of them (a write that took a slot of the member's QPS the pods needed).
const GenerationHoldMax = 30 * time.Second

// statusPace remembers when each key's status was last written, and since
// when a generation's status has been held.
type statusPace struct {
	mu   sync.Mutex
	last map[fedref.MemberObject]time.Time
	held map[fedref.MemberObject]heldGeneration
}

// heldGeneration is a generation whose status is held, since when, and
// when its pods last moved (counts changed, or the sync created or
// deleted some).
type heldGeneration struct {
	generation int64
	since      time.Time
	moved      time.Time
	counts     holdCounts
}

// holdCounts are the status counts whose change shows pods moving.
type holdCounts struct {
	replicas, labeled, ready, available, terminating int32
}

// countsOf returns st's counts that mark progress.
func countsOf(st v1alpha1.MemberReplicaSetStatus) holdCounts {
	return holdCounts{
		replicas: st.Replicas, labeled: st.FullyLabeledReplicas, ready: st.ReadyReplicas,
		available: st.AvailableReplicas, terminating: ptr.Deref(st.TerminatingReplicas, 0),
	}
}

// holding reports whether key's status of generation is being held.
func (p *statusPace) holding(k fedref.MemberObject, generation int64) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[k]
	return ok && h.generation == generation
}

// holdGeneration returns how much longer key's status of generation may
// wait for its pods to settle: until GenerationHold after they last moved
// (acted, or counts other than the last seen), and no longer than
// holdMax since the hold began; 0 once either has passed.
func (p *statusPace) holdGeneration(k fedref.MemberObject, generation int64, counts holdCounts, acted bool, holdMax time.Duration, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	h, ok := p.held[k]
	if !ok || h.generation != generation {
		if p.held == nil {
			p.held = map[fedref.MemberObject]heldGeneration{}
		}
		p.held[k] = heldGeneration{generation: generation, since: now, moved: now, counts: counts}
		return min(GenerationHold, holdMax)
	}
	if acted || counts != h.counts {
		h.moved, h.counts = now, counts
		p.held[k] = h
	}
	return max(0, min(GenerationHold-now.Sub(h.moved), holdMax-now.Sub(h.since)))
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
