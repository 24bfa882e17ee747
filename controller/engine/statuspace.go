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

// statusPace remembers when each key's status was last written.
type statusPace struct {
	mu   sync.Mutex
	last map[fedref.MemberObject]time.Time
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
}

// forget drops key.
func (p *statusPace) forget(k fedref.MemberObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.last, k)
}
