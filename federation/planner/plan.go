package planner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// API defaults, applied when the spec leaves a field unset.
const (
	DefaultUnreachableGracePeriod = 60 * time.Second
	DefaultUnschedulableThreshold = 60 * time.Second
)

var (
	defaultMaxSurge       = intstr.FromString("25%")
	defaultMaxUnavailable = intstr.FromInt32(0)
)

type memberKind uint8

const (
	kindHealthy memberKind = iota
	kindHeld
	kindFailed
)

// slot is one candidate member while planning.
//
// It holds no pointers (the member is an index into planner.members), so
// filling thousands of them costs no write barriers and no GC scanning.
type slot struct {
	mi   int32 // index of the member in planner.members
	kind memberKind
	prev int32
	lo   int32
	hi   int32
	// capacity is Current+FreeCapacity, lowered to the schedulable pods when
	// pods are unschedulable past the threshold; unbounded when unknown.
	capacity int32
	capKnown bool
	stale    bool // pods unschedulable past the threshold
	// Seats a member may keep, cumulative: ready pods, + scheduled not-ready
	// pods, + unscheduled pods; all within the previous target, max and capacity.
	keep, keepSched, keepAll int32
	w, ws                    uint64 // effective and static weight
	cost                     int32
	hash                     uint64
	hashed                   bool
	seats                    int32
	ideal                    int32 // the weighted division without history (OnRecovery)
	base                     int32 // seats before the move-back step
}

type planner struct {
	members   []Member // Input.Members of the plan in progress
	slots     []slot
	room      []int32
	ids       []int32
	entries   []entry
	heap      []entry
	tied      []int32
	keys      []tieKey
	prefOf    []int32
	pairs     []labelPair
	order     []int
	remaining int64
	seed      uint64
	// floors and kept are the sums of lo and keepAll over the slots: when one
	// is 0, the bands it bounds are empty and are skipped. notReady and
	// unscheduled say whether some slot has keepSched > keep, keepAll >
	// keepSched: without them those bands add nothing to the keep band.
	floors, kept          int64
	notReady, unscheduled bool
}

// plannerPool recycles the scratch slices: planning 10,000 FRS otherwise
// spends most of its time allocating and collecting them.
var plannerPool = sync.Pool{New: func() any { return new(planner) }}

func (p *planner) release() {
	p.members = nil // the pool must hold no input alive
	clear(p.pairs)
	p.pairs = p.pairs[:0]
	p.slots = p.slots[:0]
	p.remaining = 0
	plannerPool.Put(p)
}

// Plan divides in.Replicas among the candidate members of in.Placement. It is
// a pure function of its input: no clock, no clients, the same Result for the
// same Input whatever the order of in.Members. See the package documentation
// for the rules.
func Plan(in Input) Result {
	var res Result
	grace := durationOr(in.Failover.UnreachableGracePeriod, DefaultUnreachableGracePeriod)
	threshold := durationOr(in.Failover.UnschedulableThreshold, DefaultUnschedulableThreshold)
	replicas := int64(max(in.Replicas, 0))

	p := plannerPool.Get().(*planner)
	defer p.release()
	p.seed = uidSeed(in.UID)
	p.members = in.Members
	var sel Selection
	prevFound := 0
	p.slots = slices.Grow(p.slots[:0], len(in.Members))
	p.forEachCandidate(&in.Placement, in.Members, &sel, func(c Candidate, mi int) {
		var prev int32
		if len(in.Previous) > 0 {
			v, ok := in.Previous[c.Member.Name]
			if ok {
				prevFound++
			}
			prev = v
		}
		p.slots = p.slots[:len(p.slots)+1] // initSlot sets every field
		initSlot(&p.slots[len(p.slots)-1], &c, int32(mi), max(prev, 0), in.Now, grace, threshold)
	}, func() {
		p.slots, prevFound = p.slots[:0], 0
	})
	res.Unregistered = sel.Unregistered
	res.SelectorError = sel.SelectorError
	for _, d := range sel.Duplicates {
		res.Notes = append(res.Notes, fmt.Sprintf("member %q is registered more than once; the first entry was used", d))
	}
	if in.Placement.Strategy == v1alpha1.StrategyAvailableCapacity {
		p.capacityWeights()
	}
	p.room = slices.Grow(p.room[:0], len(p.slots))[:len(p.slots)]
	p.ids = slices.Grow(p.ids[:0], len(p.slots))

	var minSum, kept int64
	p.notReady, p.unscheduled = false, false
	for i := range p.slots {
		s := &p.slots[i]
		minSum += int64(s.lo)
		kept += int64(s.keepAll)
		p.notReady = p.notReady || s.keepSched > s.keep
		p.unscheduled = p.unscheduled || s.keepAll > s.keepSched
	}
	p.floors, p.kept = minSum, kept
	if minSum > replicas {
		res.MinimumsExceedReplicas = true
		res.Notes = append(res.Notes, fmt.Sprintf(
			"minReplicas add up to %d, more than the %d replicas: replicas divided in proportion to the minimums", minSum, replicas))
	}

	onRecovery := in.Failover.MoveBack == v1alpha1.MoveBackOnRecovery
	if onRecovery {
		p.fillIdeal(replicas)
	}
	p.fill(replicas, onRecovery)
	res.Unplaced = int32(p.remaining)
	for i := range p.slots {
		p.slots[i].base = p.slots[i].seats
	}
	if onRecovery {
		surge, unavailable, notes := resolveBudget(in.MoveBudget, int32(replicas))
		res.Notes = append(res.Notes, notes...)
		res.MovesPending = p.moveBack(replicas, surge, unavailable)
	}
	p.result(&res, &in, replicas, prevFound, grace, threshold)
	return res
}

func initSlot(s *slot, c *Candidate, mi, prev int32, now time.Time, grace, threshold time.Duration) {
	m := c.Member
	// Zero, then set fields one by one: a composite literal is built on the
	// stack and copied over with wide loads that stall on the fresh stores.
	*s = slot{}
	s.mi, s.prev = mi, prev
	s.lo, s.hi, s.cost = c.MinReplicas, c.MaxReplicas, c.DeletionCost
	s.ws, s.capacity = uint64(c.Weight), unbounded
	s.w = s.ws
	switch {
	case m.Health == Healthy:
		s.kind = kindHealthy
	case m.Health == Unhealthy && !m.UnhealthySince.IsZero() && now.Sub(m.UnhealthySince) >= grace:
		s.kind = kindFailed
	default:
		s.kind = kindHeld
	}
	switch s.kind {
	case kindFailed:
		s.lo, s.hi = 0, 0
	case kindHeld:
		// Nothing is known about its pods: keep the previous target as if
		// ready, never grow it.
		s.keep = min(prev, s.hi)
		if s.ws == 0 {
			s.keep = min(s.keep, s.lo)
		}
		s.keepSched, s.keepAll = s.keep, s.keep
		s.lo = min(s.lo, s.keep)
		s.hi = s.keep
	case kindHealthy:
		cur := max(m.Current, 0)
		if m.FreeCapacity != nil {
			s.capacity = sat32(int64(cur) + int64(max(*m.FreeCapacity, 0)))
			s.capKnown = true
		}
		unsched := min(max(m.Unschedulable, 0), cur)
		if unsched > 0 && !m.UnschedulableSince.IsZero() && now.Sub(m.UnschedulableSince) >= threshold {
			s.stale = true
			s.capacity = min(s.capacity, cur-unsched)
			s.capKnown = true
			unsched = 0 // no longer inside the capacity, so not kept either
		}
		limit := min(prev, s.hi, s.capacity)
		if s.ws == 0 {
			limit = min(limit, s.lo) // weight 0: replicas only for the minimum
		}
		ready := min(max(m.Ready, 0), cur)
		s.keep = min(ready, limit)
		s.keepSched = max(s.keep, min(cur-unsched, limit))
		s.keepAll = max(s.keepSched, min(cur, limit))
	}
}

// capacityWeights replaces static weights by capacity (pods of this FRS plus
// free room) for AvailableCapacity. Members of unknown capacity get the
// largest known capacity, so they are neither starved nor flooded; when no
// capacity is known at all the static weights stay.
func (p *planner) capacityWeights() {
	var known bool
	var most int32
	for i := range p.slots {
		s := &p.slots[i]
		if s.kind == kindHealthy && s.capKnown && s.ws > 0 {
			known = true
			most = max(most, s.capacity)
		}
	}
	if !known {
		return
	}
	for i := range p.slots {
		s := &p.slots[i]
		switch {
		case s.ws == 0:
			s.w = 0
		case s.kind == kindHealthy && s.capKnown:
			s.w = uint64(s.capacity)
		default:
			s.w = uint64(most)
		}
	}
}

// Limits of the bands. Each returns the cumulative seats a slot may reach in
// that band.
func limitFloor(s *slot) int32       { return s.lo }
func limitKeep(s *slot) int32        { return s.keep }
func limitKeepSched(s *slot) int32   { return s.keepSched }
func limitKeepAll(s *slot) int32     { return s.keepAll }
func limitHeldKeep(s *slot) int32    { return s.keep * b2i(s.kind == kindHeld) }
func limitKeepInIdeal(s *slot) int32 { return min(s.keep, s.ideal) }
func limitKeepSchedInIdeal(s *slot) int32 {
	return min(s.keepSched, max(s.keep, s.ideal))
}
func limitKeepAllInIdeal(s *slot) int32 { return min(s.keepAll, max(s.keep, s.ideal)) }
func limitGrow(s *slot) int32 {
	if s.kind != kindHealthy {
		return 0
	}
	return min(s.hi, s.capacity)
}
func limitOverflow(s *slot) int32 {
	if s.kind != kindHealthy {
		return 0
	}
	return s.hi
}
func limitIdeal(s *slot) int32 {
	if s.kind != kindHealthy {
		return 0
	}
	return s.ideal
}

func b2i(b bool) int32 {
	if b {
		return 1
	}
	return 0
}

func (p *planner) reset(replicas int64) {
	for i := range p.slots {
		p.slots[i].seats = 0
	}
	p.remaining = replicas
}

// fillIdeal computes the division the weights ask for, ignoring where pods
// run today (held members keep their seats): the goal of moveBack OnRecovery.
func (p *planner) fillIdeal(replicas int64) {
	p.reset(replicas)
	if p.floors > 0 {
		p.band(limitFloor, byFloors)
	}
	if p.kept > 0 {
		p.band(limitHeldKeep, byCostThenWeight)
	}
	p.band(limitGrow, byWeight)
	p.band(limitOverflow, byStaticWeight)
	for i := range p.slots {
		p.slots[i].ideal = p.slots[i].seats
	}
}

// fill is the main division: the seat sequence is minimums, then pods that
// exist (ready, then not ready, then unscheduled), then new seats by weight
// within capacity, then new seats by weight beyond capacity. Scale-down is the
// same sequence cut shorter, so it removes seats in exactly reverse order.
func (p *planner) fill(replicas int64, onRecovery bool) {
	p.reset(replicas)
	if p.floors > 0 {
		p.band(limitFloor, byFloors)
	}
	switch {
	case p.kept == 0:
		// Nothing runs or is held: every keep band is empty.
		p.band(limitGrow, byWeight)
	case !onRecovery:
		p.band(limitKeep, byCostThenWeight)
		// Once the keep band is placed, whole or up to the last replica, a
		// band whose limit equals keep on every slot has nothing to add.
		if p.notReady {
			p.band(limitKeepSched, byCostThenWeight)
		}
		if p.unscheduled {
			p.band(limitKeepAll, byCostThenWeight)
		}
		p.band(limitGrow, byWeight)
	default:
		// Existing pods above the ideal come after those within it, so a
		// scale-down (or a finished move) removes them first; not-ready pods
		// above the ideal even yield to new seats of members below it.
		p.band(limitKeepInIdeal, byCostThenWeight)
		p.band(limitKeep, byCostThenWeight)
		if p.notReady {
			p.band(limitKeepSchedInIdeal, byCostThenWeight)
		}
		if p.notReady || p.unscheduled {
			p.band(limitKeepAllInIdeal, byCostThenWeight)
		}
		p.band(limitGrow, byWeight)
		if p.notReady {
			p.band(limitKeepSched, byCostThenWeight)
		}
		if p.unscheduled {
			p.band(limitKeepAll, byCostThenWeight)
		}
	}
	p.band(limitOverflow, byStaticWeight)
}

// moveBack moves the division towards the ideal within the budget and returns
// how many seats still have to move afterwards. New seats in members below
// the ideal may take the fleet total up to replicas+surge; ready seats above
// the ideal are removed beyond that only up to unavailable (the rest leave in
// a later plan, when fill sees the new pods ready and drops the surplus).
func (p *planner) moveBack(replicas int64, surge, unavailable int32) int32 {
	var need, total int64
	for i := range p.slots {
		s := &p.slots[i]
		total += int64(s.seats)
		if s.kind == kindHealthy && s.ideal > s.seats {
			need += int64(s.ideal - s.seats)
		}
	}
	if need == 0 {
		return p.pendingAbove()
	}
	for cut := int64(0); cut < min(int64(unavailable), need); cut++ {
		victim := int32(-1)
		for i := range p.slots {
			s := &p.slots[i]
			if s.kind != kindHealthy || s.seats <= s.ideal || s.seats <= s.lo {
				continue
			}
			// The member whose last seat has the lowest priority gives it up.
			if victim < 0 || p.lastSeatBelow(int32(i), victim) {
				victim = int32(i)
			}
		}
		if victim < 0 {
			break
		}
		p.slots[victim].seats--
		total--
	}
	p.remaining = min(replicas+int64(surge)-total, need)
	p.band(limitIdeal, byWeight)
	p.remaining = 0
	// Still to move: the larger of what is missing below the ideal and what
	// is left above it (the surplus leaves once its replacements are ready).
	var under, over int64
	for i := range p.slots {
		s := &p.slots[i]
		if s.kind != kindHealthy {
			continue
		}
		under += int64(max(s.ideal-s.seats, 0))
		over += int64(max(s.seats-s.ideal, 0))
	}
	return sat32(max(under, over))
}

// pendingAbove counts seats above the ideal when nothing is missing below it
// (only possible when capacity or held members skew the ideal).
func (p *planner) pendingAbove() int32 {
	var over int64
	for i := range p.slots {
		s := &p.slots[i]
		if s.kind == kindHealthy {
			over += int64(max(s.seats-s.ideal, 0))
		}
	}
	return sat32(over)
}

// lastSeatBelow reports whether slot a's last seat ranks below slot b's,
// which is the reverse of the order in which award hands seats out.
func (p *planner) lastSeatBelow(a, b int32) bool {
	p.slots[a].seats--
	p.slots[b].seats--
	below := p.outranks(b, a, byWeight)
	p.slots[a].seats++
	p.slots[b].seats++
	return below
}

// resolveBudget turns maxSurge / maxUnavailable into counts for replicas,
// falling back to the defaults on invalid values. When both are 0 nothing
// could ever move, so the surge becomes 1 (a Deployment forbids that pair;
// surging is the choice that never lowers availability).
func resolveBudget(b v1alpha1.MoveBudget, replicas int32) (surge, unavailable int32, notes []string) {
	scaled := func(field string, v *intstr.IntOrString, def intstr.IntOrString, roundUp bool) int32 {
		if v == nil {
			v = &def
		}
		n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), roundUp)
		if err != nil || n < 0 {
			notes = append(notes, fmt.Sprintf("moveBudget.%s %q is invalid; using %s", field, v.String(), def.String()))
			n, _ = intstr.GetScaledValueFromIntOrPercent(&def, int(replicas), roundUp)
		}
		return sat32(int64(n))
	}
	surge = scaled("maxSurge", b.MaxSurge, defaultMaxSurge, true)
	unavailable = scaled("maxUnavailable", b.MaxUnavailable, defaultMaxUnavailable, false)
	if surge == 0 && unavailable == 0 {
		surge = 1
	}
	return surge, unavailable, notes
}

// ResolveBudget returns the surge and unavailability counts Plan uses for a
// MoveBudget and a number of replicas, with the API defaults applied.
func ResolveBudget(b v1alpha1.MoveBudget, replicas int32) (maxSurge, maxUnavailable int32) {
	s, u, _ := resolveBudget(b, max(replicas, 0))
	return s, u
}

func (p *planner) result(res *Result, in *Input, replicas int64, prevFound int, grace, threshold time.Duration) {
	res.Targets = make([]Target, len(p.slots))
	var total, over int64
	changes := 0
	for i := range p.slots {
		if p.slots[i].seats != p.slots[i].prev {
			changes++
		}
	}
	if changes > 0 {
		res.Changes = make([]Change, 0, changes)
	}
	for i := range p.slots {
		s := &p.slots[i]
		name := p.members[s.mi].Name
		// Filled in place, field by field (see initSlot), and never read
		// back: the fresh memory is usually not in cache yet, and a load
		// would wait for it where stores do not.
		t := &res.Targets[i]
		t.Cluster, t.Replicas, t.Previous = name, s.seats, s.prev
		total += int64(s.seats)
		switch s.kind {
		case kindHeld:
			t.State = StateHeld
		case kindFailed:
			t.State = StateFailedOver
		}
		var overCap int32
		if s.kind == kindHealthy && s.capKnown && s.seats > s.capacity {
			overCap = s.seats - s.capacity
			t.OverCapacity = overCap
			over += int64(overCap)
		}
		if s.kind != kindHealthy || s.stale || overCap > 0 {
			res.MemberNotes = append(res.MemberNotes, MemberNote{Cluster: name, Message: p.note(s, t, in.Now, grace, threshold)})
		}
		if s.seats != s.prev {
			res.Changes = res.Changes[:len(res.Changes)+1]
			c := &res.Changes[len(res.Changes)-1]
			c.Cluster, c.From, c.To, c.Reason = name, s.prev, s.seats, reasonFor(s)
		}
	}
	res.Shortfall = sat32(over + int64(res.Unplaced))
	res.Surge = sat32(max(total-replicas, 0))
	if prevFound < len(in.Previous) {
		extra := false
		for name, v := range in.Previous {
			if v == 0 {
				continue
			}
			if _, ok := findTarget(res.Targets, name); !ok {
				res.Changes = append(res.Changes, Change{Cluster: name, From: v, To: 0, Reason: ReasonNotSelected})
				extra = true
			}
		}
		if extra {
			slices.SortFunc(res.Changes, func(a, b Change) int { return strings.Compare(a.Cluster, b.Cluster) })
		}
	}
}

func reasonFor(s *slot) Reason {
	switch {
	case s.kind == kindFailed:
		return ReasonFailover
	case s.seats != s.base:
		return ReasonRebalance
	case s.stale && s.seats < s.prev:
		return ReasonUnschedulable
	case s.seats > s.prev:
		return ReasonScaleUp
	default:
		return ReasonScaleDown
	}
}

func (p *planner) note(s *slot, t *Target, now time.Time, grace, threshold time.Duration) string {
	m := &p.members[s.mi]
	var parts []string
	switch {
	case s.kind == kindFailed:
		parts = append(parts, fmt.Sprintf("unreachable for %s, longer than the %s grace period: replicas planned elsewhere",
			now.Sub(m.UnhealthySince).Round(time.Second), grace))
	case s.kind == kindHeld && m.Health == Unhealthy && !m.UnhealthySince.IsZero():
		parts = append(parts, fmt.Sprintf("unreachable for %s, within the %s grace period: target held",
			now.Sub(m.UnhealthySince).Round(time.Second), grace))
	case s.kind == kindHeld && m.Health == Unhealthy:
		parts = append(parts, "unreachable (since unknown): target held")
	case s.kind == kindHeld:
		parts = append(parts, "health unknown: target held")
	}
	if s.stale {
		parts = append(parts, fmt.Sprintf("%d pods unschedulable for over %s: capped at %d schedulable pods",
			m.Unschedulable, threshold, s.capacity))
	}
	if t.OverCapacity > 0 {
		parts = append(parts, fmt.Sprintf("%d replicas exceed the free capacity and will stay Pending", t.OverCapacity))
	}
	return strings.Join(parts, "; ")
}

func durationOr(d *metav1.Duration, def time.Duration) time.Duration {
	if d == nil || d.Duration < 0 {
		return def
	}
	return d.Duration
}

func sat32(v int64) int32 {
	if v > unbounded {
		return unbounded
	}
	if v < 0 {
		return 0
	}
	return int32(v)
}
