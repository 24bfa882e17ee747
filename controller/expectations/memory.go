package expectations

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/internal/fedref"
)

// DefaultTTL is how long outstanding expectations block a sync before they are
// treated as lost, as upstream's ExpectationsTimeout.
const DefaultTTL = 5 * time.Minute

// Memory is an in-process Store with the semantics of upstream's
// UIDTrackingControllerExpectations: per key an add and a del counter plus the
// set of pod names expected to go away. It grants empty names, so pods are
// created with generateName.
type Memory struct {
	ttl   time.Duration
	clock clock.PassiveClock

	mu      sync.Mutex
	entries map[fedref.MemberObject]*entry
}

type entry struct {
	add, del int64
	since    time.Time
	// deleting holds the names of pods whose deletion is expected; each is
	// settled at most once so a DeletionTimestamp update followed by the final
	// delete event does not count twice.
	deleting map[string]struct{}
}

var _ Store = (*Memory)(nil)

// NewMemory returns an empty in-memory store. ttl <= 0 means DefaultTTL and a
// nil clk means the real clock.
func NewMemory(ttl time.Duration, clk clock.PassiveClock) *Memory {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Memory{ttl: ttl, clock: clk, entries: map[fedref.MemberObject]*entry{}}
}

// Satisfied is true when key has no entry, its counters are both at or below
// zero, or the entry is older than the TTL.
func (m *Memory) Satisfied(key fedref.MemberObject) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return true
	}
	if e.add <= 0 && e.del <= 0 {
		return true
	}
	return m.clock.Since(e.since) > m.ttl
}

// ExpectCreations replaces the counters of key with (intent.Count, 0) and grants
// intent.Count empty names. Like upstream, it keeps any set of expected
// deletions, whose late observations then drive del below zero harmlessly.
func (m *Memory) ExpectCreations(_ context.Context, key fedref.MemberObject, intent CreateIntent) ([]string, error) {
	if intent.Count <= 0 {
		return nil, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.entries[key]
	var deleting map[string]struct{}
	if e != nil {
		deleting = e.deleting
	}
	m.entries[key] = &entry{add: int64(intent.Count), since: m.clock.Now(), deleting: deleting}
	return make([]string, intent.Count), nil
}

// CreationObserved lowers the creation counter of key by one, if key has an entry.
func (m *Memory) CreationObserved(key fedref.MemberObject, _ string) { m.lower(key, 1, 0) }

// CreationFailed lowers the creation counter of key by one, if key has an entry.
func (m *Memory) CreationFailed(key fedref.MemberObject, _ string) { m.lower(key, 1, 0) }

// CreationUnknown is CreationFailed, as upstream: a counting store has no
// name to keep, so the informer's view decides.
func (m *Memory) CreationUnknown(key fedref.MemberObject, name string) { m.CreationFailed(key, name) }

func (m *Memory) lower(key fedref.MemberObject, add, del int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.entries[key]; ok {
		e.add -= add
		e.del -= del
	}
}

// ExpectDeletions replaces the entry of key with (0, number of distinct names).
func (m *Memory) ExpectDeletions(_ context.Context, key fedref.MemberObject, pods []PodRef) error {
	set := make(map[string]struct{}, len(pods))
	for _, p := range pods {
		set[p.Name] = struct{}{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.entries[key] = &entry{del: int64(len(set)), since: m.clock.Now(), deleting: set}
	return nil
}

// DeletionObserved settles podName's expected deletion once; unknown names are ignored.
func (m *Memory) DeletionObserved(key fedref.MemberObject, podName string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return
	}
	if _, expected := e.deleting[podName]; !expected {
		return
	}
	delete(e.deleting, podName)
	e.del--
}

// Delete forgets key.
func (m *Memory) Delete(key fedref.MemberObject) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.entries, key)
}

// DeleteCluster forgets every key of cluster.
func (m *Memory) DeleteCluster(cluster string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for k := range m.entries {
		if k.Cluster == cluster {
			delete(m.entries, k)
		}
	}
}

// Counts returns the outstanding creations and deletions of key and whether it
// has an entry; for tests and debugging.
func (m *Memory) Counts(key fedref.MemberObject) (add, del int64, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[key]
	if !ok {
		return 0, 0, false
	}
	return e.add, e.del, true
}
