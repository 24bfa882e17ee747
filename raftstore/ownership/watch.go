package ownership

import (
	"time"

	"k8s.io/utils/clock"
)

// Watch is the raft leader's view of which owners still renew, measured on
// the leader's own monotonic clock. An owner may write to its members until
// a lease has passed since it SENT its latest renewal that committed; the
// leader saw that renewal commit after it was sent, so once lease plus a
// drift margin has passed on the leader's clock since the leader first saw
// it, the owner's lease has lapsed by the owner's clock too, and its
// members may go to another replica. A new leader cannot know when the
// renewals it inherited were seen, so it counts them as seen at its
// election (NewWatch): it moves nothing away from anyone before a full
// lease plus margin.
type Watch struct {
	clock clock.PassiveClock
	grace time.Duration
	// damping is how long an owner must renew without a lapse before
	// it is Stable (WithDamping).
	damping time.Duration
	start   time.Time
	seen    map[string]sighting
	// primed is set after the first Observe: what it found was committed
	// before this leadership, so it does not show the owner alive now.
	primed bool
}

// sighting is the latest renewal of one owner the leader saw and when.
type sighting struct {
	index uint64
	at    time.Time
	// fresh is set for a renewal that changed during this leadership.
	fresh bool
	// since is when this leader first saw the owner's current run of
	// renewals, each seen less than lease plus margin after the one
	// before (zero while fresh is not set).
	since time.Time
}

// NewWatch starts a watch at clk's now: call it when this replica starts
// leading. lease is the owners' lease, margin the allowance for clock-rate
// drift between replicas. Its damping period is twice the lease.
func NewWatch(clk clock.PassiveClock, lease, margin time.Duration) *Watch {
	return &Watch{clock: clk, grace: lease + margin, damping: 2 * lease, start: clk.Now(), seen: map[string]sighting{}}
}

// WithDamping sets how long an owner must have renewed without a lapse,
// as this leader saw it, before it is Stable: before that it receives no
// members moved from a live owner (Assign). d <= 0 keeps the default,
// twice the lease. It returns w.
func (w *Watch) WithDamping(d time.Duration) *Watch {
	if d > 0 {
		w.damping = d
	}
	return w
}

// Observe records the raft index of each owner's latest committed renewal
// (fsm.FSM.Renewals): an index that changed since the last call was seen
// now. Owners missing from renewals keep what was seen of them.
func (w *Watch) Observe(renewals map[string]uint64) {
	now := w.clock.Now()
	for owner, idx := range renewals {
		s, ok := w.seen[owner]
		if ok && s.index == idx {
			continue
		}
		next := sighting{index: idx, at: now, fresh: w.primed}
		switch {
		case !next.fresh:
		case ok && s.fresh && now.Sub(s.at) < w.grace:
			next.since = s.since // the run goes on
		default:
			next.since = now // the first renewal seen, or the first after a lapse
		}
		w.seen[owner] = next
	}
	w.primed = true
}

// Live reports whether owner may still hold a lease: less than lease plus
// margin has passed since this leader saw its latest renewal (or since the
// election, for one it has not seen renew).
func (w *Watch) Live(owner string) bool {
	last := w.start
	if s, ok := w.seen[owner]; ok && s.at.After(last) {
		last = s.at
	}
	return w.clock.Since(last) < w.grace
}

// Renewed reports whether this leader saw owner renew since its election
// (a renewal that changed after the first Observe) and it may still hold a
// lease: only such a replica is given members; one that never renewed
// would only lose them again once the grace passed.
func (w *Watch) Renewed(owner string) bool {
	s, ok := w.seen[owner]
	return ok && s.fresh && w.Live(owner)
}

// Stable reports whether owner is Renewed and this leader has seen it
// renew without a lapse (every renewal less than lease plus margin after
// the one before) for at least the damping period, on its own clock: a
// replica that just started, restarted or resumed after a pause is not
// stable until then. A new leader counts from the first renewal it sees.
func (w *Watch) Stable(owner string) bool {
	s, ok := w.seen[owner]
	return ok && w.Renewed(owner) && w.clock.Since(s.since) >= w.damping
}

// Candidates turns replica IDs into Assign's candidates. A replica is live
// when it renewed during this leadership and still may hold a lease; a
// current owner that has not renewed yet but whose grace has not passed
// stays live too, so nothing moves away from it early (owners). It is
// stable as Stable says.
func (w *Watch) Candidates(ids []string, owners map[string]string) []Candidate {
	owning := map[string]bool{}
	for _, o := range owners {
		owning[o] = true
	}
	out := make([]Candidate, 0, len(ids))
	for _, id := range ids {
		out = append(out, Candidate{ID: id, Live: w.Renewed(id) || (owning[id] && w.Live(id)), Stable: w.Stable(id)})
	}
	return out
}

// Handover reports whether the new owner of a moved member must wait a
// lease plus margin before writing: its previous owner may still hold a
// lease (it is live, and was moved for balance or left the candidates
// while still renewing).
func (w *Watch) Handover(m Move) bool { return m.From != "" && w.Live(m.From) }
