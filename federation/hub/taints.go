package hub

import (
	"sync"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/planner"
)

// taintClock stands in for the timeAdded of member taints registered
// without one: a NoExecute toleration's tolerationSeconds must count from
// somewhere, and "just now" on every pass would never let it run out.
//
// The time is the one recorded in the member's MemberCluster status (the
// leader stamps it there within seconds of first seeing the taint, see
// memberstatus), so a new leader continues the same window; until it is
// recorded, when this replica first saw the taint. A handover before the
// record restarts the window from the new leader's first sight, which only
// ever lengthens a toleration (replicas are never evicted early), the same
// rule as waitedOut. A taint that must run out on time carries its own
// timeAdded (registry.AnnotationTaints).
type taintClock struct {
	mu   sync.Mutex
	seen map[string]map[taintID]time.Time
}

type taintID struct {
	key, value string
	effect     v1alpha1.TaintEffect
}

// convert returns a member's taints for the planner, filling a missing
// timeAdded with the first sight, and forgets taints the member no longer
// has (a taint removed and added again starts a new window).
func (c *taintClock) convert(cluster string, taints, recorded []v1alpha1.ClusterTaint, now time.Time) []planner.Taint {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(taints) == 0 {
		delete(c.seen, cluster)
		return nil
	}
	if c.seen == nil {
		c.seen = map[string]map[taintID]time.Time{}
	}
	prev := c.seen[cluster]
	cur := make(map[taintID]time.Time, len(taints))
	out := make([]planner.Taint, 0, len(taints))
	for _, t := range taints {
		pt := planner.Taint{Key: t.Key, Value: t.Value, Effect: t.Effect}
		if t.TimeAdded != nil {
			pt.TimeAdded = t.TimeAdded.Time
		} else {
			id := taintID{t.Key, t.Value, t.Effect}
			first, ok := recordedTime(recorded, id)
			if !ok {
				if first, ok = prev[id]; !ok {
					first = now
				}
			}
			cur[id] = first
			pt.TimeAdded = first
		}
		out = append(out, pt)
	}
	c.seen[cluster] = cur
	return out
}

// recordedTime is the timeAdded recorded for the taint id, if any.
func recordedTime(recorded []v1alpha1.ClusterTaint, id taintID) (time.Time, bool) {
	for _, r := range recorded {
		if r.Key == id.key && r.Value == id.value && r.Effect == id.effect && r.TimeAdded != nil {
			return r.TimeAdded.Time, true
		}
	}
	return time.Time{}, false
}

// retain forgets the members not in names.
func (c *taintClock) retain(names map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for name := range c.seen {
		if !names[name] {
			delete(c.seen, name)
		}
	}
}

// warnings remembers the warning events last emitted for each
// FederatedReplicaSet, so a warning is emitted when its state changes, not
// on every pass. It is per replica: a new leader repeats each standing
// warning once.
type warnings struct {
	mu   sync.Mutex
	last map[string]map[string]string // frs key -> event key -> message
}

// changed records message under (frs, key) and reports whether it differs
// from the one recorded before.
func (w *warnings) changed(frs, key, message string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.last == nil {
		w.last = map[string]map[string]string{}
	}
	m := w.last[frs]
	if m == nil {
		m = map[string]string{}
		w.last[frs] = m
	}
	if old, ok := m[key]; ok && old == message {
		return false
	}
	m[key] = message
	return true
}

// keep forgets the warnings of frs whose keys are not in current (their
// state ended), so a recurrence is reported again.
func (w *warnings) keep(frs string, current map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.last[frs] {
		if !current[k] {
			delete(w.last[frs], k)
		}
	}
}

// forget drops everything about frs.
func (w *warnings) forget(frs string) {
	w.mu.Lock()
	delete(w.last, frs)
	w.mu.Unlock()
}
