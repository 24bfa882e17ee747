package hub

import (
	"context"
	"sync"
	"time"

	"github.com/replicafed/replicafed/federation/registry"
)

// DefaultMemberTimeout bounds how long one pass waits for a member's facts
// (its cached MemberReplicaSet, capacity and pods) when
// Reconciler.MemberTimeout is unset. A synced cache answers in microseconds;
// a member whose cache never syncs (an API server that accepts connections
// and never answers) would otherwise hold the hub's worker, and with it
// every FederatedReplicaSet, for ever.
const DefaultMemberTimeout = 5 * time.Second

// memberStallRetry is how long a member that did not answer in time is left
// out of fact reads before one pass tries it again: a stalled member costs
// the fleet one bounded wait per retry, not one per FederatedReplicaSet.
const memberStallRetry = 30 * time.Second

// stalls remembers the members that did not answer within the bound. While
// one is stalled, passes do not read it: its facts are unknown (target
// held, nothing moved on that basis) and nobody waits for them.
type stalls struct {
	mu    sync.Mutex
	until map[string]time.Time
	// running counts reads whose pass gave up on them and that have not
	// returned yet, by member (a refreshed member is a new *Member): a
	// member with such a read is not read again, so a hang that ignores its
	// context leaks at most one goroutine per member.
	running map[*registry.Member]int
}

// stalled reports whether m's facts are to be taken as unknown at now.
func (s *stalls) stalled(m *registry.Member, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[m] > 0 || now.Before(s.until[m.Name])
}

// timedOut records that m did not answer at now.
func (s *stalls) timedOut(m *registry.Member, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.until == nil {
		s.until = map[string]time.Time{}
	}
	s.until[m.Name] = now.Add(memberStallRetry)
}

// answered records that m answered: it is read normally again.
func (s *stalls) answered(m *registry.Member) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.until, m.Name)
}

// abandon counts a read of m that its pass stopped waiting for; the
// returned func is called when the read returns.
func (s *stalls) abandon(m *registry.Member) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running == nil {
		s.running = map[*registry.Member]int{}
	}
	s.running[m]++
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.running[m]--; s.running[m] <= 0 {
			delete(s.running, m)
		}
	}
}

// retain forgets the stall windows of members not in names.
func (s *stalls) retain(names map[string]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name := range s.until {
		if !names[name] {
			delete(s.until, name)
		}
	}
}

// boundedRead runs read for each member concurrently and waits for them at
// most timeout (wall time: this is a guard, not planning logic). It returns
// which members answered. A read still running at the deadline has its
// context cancelled and its member recorded as stalled at now; its result
// is dropped.
func boundedRead[T any](ctx context.Context, s *stalls, members []*registry.Member, timeout time.Duration, now time.Time, read func(ctx context.Context, m *registry.Member) T) map[*registry.Member]T {
	type answer struct {
		m *registry.Member
		v T
	}
	out := make(map[*registry.Member]T, len(members))
	if len(members) == 0 {
		return out
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Buffered: a read that outlives the wait never blocks on its send.
	ch := make(chan answer, len(members))
	for _, m := range members {
		go func() { ch <- answer{m, read(rctx, m)} }()
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	pending := make(map[*registry.Member]bool, len(members))
	for _, m := range members {
		pending[m] = true
	}
	for len(pending) > 0 {
		select {
		case a := <-ch:
			delete(pending, a.m)
			out[a.m] = a.v
			s.answered(a.m)
			continue
		case <-timer.C:
		case <-ctx.Done():
		}
		break
	}
	if len(pending) == 0 {
		return out
	}
	stalledOnTimeout := ctx.Err() == nil
	// The reads left are abandoned: each is counted until it returns, so
	// the member is not read again meanwhile.
	dones := make(map[*registry.Member]func(), len(pending))
	for m := range pending {
		dones[m] = s.abandon(m)
		if stalledOnTimeout {
			s.timedOut(m, now)
		}
	}
	go func() {
		for len(dones) > 0 {
			a := <-ch
			if done, ok := dones[a.m]; ok {
				done()
				delete(dones, a.m)
			}
		}
	}()
	return out
}
