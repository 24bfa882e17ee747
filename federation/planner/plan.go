package planner

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

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

// slot is one candidate member while a plan is made: its limits, the seats it
// may keep, and the seats it holds so far. (Fields are ordered to keep it
// small: a plan allocates one per candidate.)
type slot struct {
	growthVotes uint64 // votes of the growth bands: the static weight, or the capacity under AvailableCapacity
	weight      uint64 // static weight: votes of the overflow band, tie-break of the floors band
	member      int32  // index of the member in planner.members
	floor       int32  // minReplicas, 0 once failed over, at most a held target

	hash uint64 // tie-break, set by ensureHash on first use

	previous int32 // previous target
	ceiling  int32 // maxReplicas, or a held member's previous target
	// capacity is current pods + free capacity, lowered to the schedulable
	// pods when pods are unschedulable past the threshold; unbounded when
	// unknown.
	capacity int32
	// Seats the member may keep, each within the previous target, the ceiling
	// and the capacity, and each including the one before: ready pods, then
	// scheduled pods that are not ready, then unscheduled pods.
	keepReady, keepScheduled, keepAll int32
	deletionCost                      int32
	maxReplicas                       int32 // the candidate's maxReplicas (Duplicated mode)

	seats          int32 // seats held so far
	ideal          int32 // the weighted division without history (moveBack OnRecovery)
	beforeMoveBack int32 // seats before the move-back step

	state         TargetState
	capacityKnown bool
	stuck         bool // pods unschedulable past the threshold
	hashed        bool
}

// planner holds one plan in progress.
type planner struct {
	members   []Member // Input.Members
	seed      uint64   // tie-break hash of the FRS UID
	slots     []slot   // the candidates, in name order
	room      []int32  // per slot, seats it may still take in the band being filled
	remaining int64    // seats still to hand out

	// Whether some slot has a floor, pods to keep, not-ready pods and
	// unscheduled pods: fill skips the bands that are empty for every slot.
	anyFloor, anyKept, anyNotReady, anyUnscheduled bool

	// growth is the order of the band of new seats within capacity: byWeight,
	// byTier under CostOrdered, byPack under Packed.
	growth order
	// keep is the order of the bands of existing pods: byCostThenWeight, or
	// byCostThenPack under Packed.
	keep order
	// noHistory is set while fillIdeal divides without history, and under
	// moveBack OnRecovery (whose new seats go towards that division):
	// Packed then opens members by minimum, weight and hash only.
	noHistory bool

	tolerations []v1alpha1.ClusterToleration // Input.Placement.Tolerations, for notes

	ids []int32 // scratch: the slots with room in a band
}

// planners recycles the planners' memory: planning 10,000 FRS otherwise
// spends more time allocating and collecting slots than planning.
var planners = sync.Pool{New: func() any { return new(planner) }}

// Plan divides in.Replicas among the candidate members of in.Placement. It is
// a pure function of its input: no clock, no clients, the same Result for the
// same Input whatever the order of in.Members. See the package documentation
// for the rules.
func Plan(in Input) Result {
	var res Result
	grace := durationOr(in.Failover.UnreachableGracePeriod, DefaultUnreachableGracePeriod)
	threshold := durationOr(in.Failover.UnschedulableThreshold, DefaultUnschedulableThreshold)
	replicas := int64(max(in.Replicas, 0))

	p := planners.Get().(*planner)
	defer func() {
		p.members, p.tolerations = nil, nil // hold no input alive in the pool
		planners.Put(p)
	}()
	*p = planner{members: in.Members, seed: uidSeed(in.UID), slots: p.slots[:0], room: p.room[:0], ids: p.ids[:0], growth: byWeight, keep: byCostThenWeight, tolerations: in.Placement.Tolerations}
	previousFound := p.addCandidates(&in, &res, grace, threshold)
	switch in.Placement.Strategy {
	case v1alpha1.StrategyAvailableCapacity:
		p.capacityWeights()
	case v1alpha1.StrategyCostOrdered:
		p.growth = byTier
	case v1alpha1.StrategyPacked:
		p.growth, p.keep = byPack, byCostThenPack
	}
	res.RequeueAt = p.deadline(in.Now, grace, threshold)
	if until := p.applyTaints(in.Placement.Tolerations, in.Now, in.Failover.MoveBack == v1alpha1.MoveBackOnRecovery); !until.IsZero() && (res.RequeueAt.IsZero() || until.Before(res.RequeueAt)) {
		res.RequeueAt = until
	}
	duplicated := in.Placement.Mode == v1alpha1.PlacementDuplicated
	floors := p.sumFloors()
	if floors > replicas && !duplicated {
		res.MinimumsExceedReplicas = true
		res.Notes = append(res.Notes, fmt.Sprintf(
			"minReplicas add up to %d, more than the %d replicas: replicas divided in proportion to the minimums", floors, replicas))
	}
	if len(in.Placement.SpreadConstraints) > 0 {
		res.Spread = p.spread(in.Placement.SpreadConstraints, replicas, duplicated)
		floors = p.sumFloors() // spread gives chosen groups a floor
	}
	p.noteKeptSeats()
	p.anyFloor = floors > 0

	onRecovery := in.Failover.MoveBack == v1alpha1.MoveBackOnRecovery && !duplicated
	p.noHistory = onRecovery
	p.place(replicas, duplicated, onRecovery)
	res.Unplaced = int32(p.remaining)
	for i := range p.slots {
		p.slots[i].beforeMoveBack = p.slots[i].seats
	}
	if onRecovery {
		surge, unavailable, notes := resolveBudget(in.MoveBudget, int32(replicas))
		res.Notes = append(res.Notes, notes...)
		res.MovesPending = p.moveBack(replicas, surge, unavailable)
	}
	p.result(&res, &in, replicas, previousFound, grace, threshold)
	if duplicated {
		res.Surge = 0 // every member runs replicas: the total is not a surge
	}
	return res
}

// addCandidates makes one slot per candidate member and records in res what
// the selection found wrong (unregistered names, a bad selector, duplicate
// members). It returns how many entries of in.Previous are candidates.
func (p *planner) addCandidates(in *Input, res *Result, grace, threshold time.Duration) int {
	var sel Selection
	previousFound := 0
	eachCandidate(&in.Placement, in.Members, &sel, func(index int, c Candidate) {
		previous, ok := in.Previous[c.Member.Name]
		if ok {
			previousFound++
		}
		p.slots = append(p.slots, slot{})
		p.slots[len(p.slots)-1].init(c, int32(index), max(previous, 0), in.Now, grace, threshold)
	})
	p.room = slices.Grow(p.room, len(p.slots))[:len(p.slots)]
	res.Unregistered = sel.Unregistered
	res.SelectorError = sel.SelectorError
	for _, d := range sel.Duplicates {
		res.Notes = append(res.Notes, fmt.Sprintf("member %q is registered more than once; the first entry was used", d))
	}
	return previousFound
}

// sumFloors returns the sum of the slots' floors (minReplicas).
func (p *planner) sumFloors() int64 {
	var floors int64
	for i := range p.slots {
		floors += int64(p.slots[i].floor)
	}
	return floors
}

// noteKeptSeats sets anyKept, anyNotReady and anyUnscheduled so fill can skip
// the bands that are empty for every slot.
func (p *planner) noteKeptSeats() {
	for i := range p.slots {
		s := &p.slots[i]
		p.anyKept = p.anyKept || s.keepAll > 0
		p.anyNotReady = p.anyNotReady || s.keepScheduled > s.keepReady
		p.anyUnscheduled = p.anyUnscheduled || s.keepAll > s.keepScheduled
	}
}

// place hands out the replicas: every member gets them under Duplicated;
// under moveBack OnRecovery the division without history is made first, as
// the move-back step needs it.
func (p *planner) place(replicas int64, duplicated, onRecovery bool) {
	switch {
	case duplicated:
		p.duplicate(replicas)
	case onRecovery:
		p.fillIdeal(replicas)
		p.fill(replicas, onRecovery)
	default:
		p.fill(replicas, onRecovery)
	}
}

// init resolves a candidate's health, capacity and pods into the slot's
// limits.
func (s *slot) init(c Candidate, mi, previous int32, now time.Time, grace, threshold time.Duration) {
	m := c.Member
	*s = slot{
		member: mi, floor: c.MinReplicas, growthVotes: uint64(c.Weight), weight: uint64(c.Weight),
		previous: previous, ceiling: c.MaxReplicas, capacity: unbounded, deletionCost: c.DeletionCost,
		maxReplicas: c.MaxReplicas,
	}
	switch {
	case m.Health == Healthy:
		s.state = StateActive
	case m.Health == Unhealthy && !m.UnhealthySince.IsZero() && now.Sub(m.UnhealthySince) >= grace:
		s.state = StateFailedOver
	default:
		s.state = StateHeld
	}
	switch s.state {
	case StateFailedOver:
		s.floor, s.ceiling = 0, 0
	case StateHeld:
		// Nothing is known about its pods: keep the previous target as if
		// ready, never grow it.
		s.keepReady = min(previous, s.ceiling)
		if s.weight == 0 {
			s.keepReady = min(s.keepReady, s.floor)
		}
		s.keepScheduled, s.keepAll = s.keepReady, s.keepReady
		s.floor = min(s.floor, s.keepReady)
		s.ceiling = s.keepReady
	case StateActive:
		current := max(m.Current, 0)
		if m.FreeCapacity != nil {
			s.capacity = sat32(int64(current) + int64(max(*m.FreeCapacity, 0)))
			s.capacityKnown = true
		}
		unscheduled := min(max(m.Unschedulable, 0), current)
		if unscheduled > 0 && !m.UnschedulableSince.IsZero() && now.Sub(m.UnschedulableSince) >= threshold {
			s.stuck = true
			s.capacity = min(s.capacity, current-unscheduled)
			s.capacityKnown = true
			unscheduled = 0 // no longer inside the capacity, so not kept either
		}
		limit := min(previous, s.ceiling, s.capacity)
		if s.weight == 0 {
			limit = min(limit, s.floor) // weight 0: replicas only for the minimum
		}
		ready := min(max(m.Ready, 0), current)
		s.keepReady = min(ready, limit)
		s.keepScheduled = max(s.keepReady, min(current-unscheduled, limit))
		s.keepAll = max(s.keepScheduled, min(current, limit))
	}
}

// deadline returns the earliest time after now at which a held member passes
// its grace period or a member's unschedulable pods pass their threshold
// (zero when there is none).
func (p *planner) deadline(now time.Time, grace, threshold time.Duration) time.Time {
	var next time.Time
	consider := func(at time.Time) {
		if at.After(now) && (next.IsZero() || at.Before(next)) {
			next = at
		}
	}
	for i := range p.slots {
		s := &p.slots[i]
		m := &p.members[s.member]
		switch {
		case s.state == StateHeld && m.Health == Unhealthy && !m.UnhealthySince.IsZero():
			consider(m.UnhealthySince.Add(grace))
		case s.state == StateActive && !s.stuck && min(m.Unschedulable, m.Current) > 0 && !m.UnschedulableSince.IsZero():
			consider(m.UnschedulableSince.Add(threshold))
		}
	}
	return next
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
		if s.state == StateActive && s.capacityKnown && s.weight > 0 {
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
		case s.weight == 0:
			s.growthVotes = 0
		case s.state == StateActive && s.capacityKnown:
			s.growthVotes = uint64(s.capacity)
		default:
			s.growthVotes = uint64(most)
		}
	}
}

// A limit is the seats a slot may hold at the end of a band.
type limit func(*slot) int32

// The bands' limits; see the package documentation for their order.
var (
	floor                limit = func(s *slot) int32 { return s.floor }
	keepReady            limit = func(s *slot) int32 { return s.keepReady }
	keepScheduled        limit = func(s *slot) int32 { return s.keepScheduled }
	keepAll              limit = func(s *slot) int32 { return s.keepAll }
	keepReadyInIdeal     limit = func(s *slot) int32 { return min(s.keepReady, s.ideal) }
	keepScheduledInIdeal limit = func(s *slot) int32 { return min(s.keepScheduled, max(s.keepReady, s.ideal)) }
	keepAllInIdeal       limit = func(s *slot) int32 { return min(s.keepAll, max(s.keepReady, s.ideal)) }
	// keepHeld: a held slot's keepAll is its keepReady (see init).
	keepHeld           limit = func(s *slot) int32 { return when(s.state == StateHeld || s.state == StateCordoned, s.keepAll) }
	growWithinCapacity limit = func(s *slot) int32 { return when(s.state == StateActive, min(s.ceiling, s.capacity)) }
	growBeyondCapacity limit = func(s *slot) int32 { return when(s.state == StateActive, s.ceiling) }
	growToIdeal        limit = func(s *slot) int32 { return when(s.state == StateActive, s.ideal) }
)

// when returns seats if the condition holds, else 0.
func when(condition bool, seats int32) int32 {
	if condition {
		return seats
	}
	return 0
}

// start clears every slot's seats before a division of replicas.
func (p *planner) start(replicas int64) {
	for i := range p.slots {
		p.slots[i].seats = 0
	}
	p.remaining = replicas
}

// fillIdeal computes the division the weights ask for, ignoring where pods
// run today (held members keep their seats): the goal of moveBack OnRecovery.
func (p *planner) fillIdeal(replicas int64) {
	defer func(was bool) { p.noHistory = was }(p.noHistory)
	p.noHistory = true
	p.start(replicas)
	if p.anyFloor {
		p.band(floor, byFloors)
	}
	if p.anyKept {
		p.band(keepHeld, p.keep)
	}
	p.band(growWithinCapacity, p.growth)
	p.band(growBeyondCapacity, byStaticWeight)
	for i := range p.slots {
		p.slots[i].ideal = p.slots[i].seats
	}
}

// fill is the main division: the seat sequence is minimums, then pods that
// exist (ready, then not ready, then unscheduled), then new seats by weight
// within capacity, then new seats by weight beyond capacity. Scale-down is the
// same sequence cut shorter, so it removes seats in exactly reverse order.
func (p *planner) fill(replicas int64, onRecovery bool) {
	p.start(replicas)
	if p.anyFloor {
		p.band(floor, byFloors)
	}
	// A keep band adds nothing when no slot has seats of its kind: the bands
	// before it already reached its limit.
	if !onRecovery {
		if p.anyKept {
			p.band(keepReady, p.keep)
		}
		if p.anyNotReady {
			p.band(keepScheduled, p.keep)
		}
		if p.anyUnscheduled {
			p.band(keepAll, p.keep)
		}
		p.band(growWithinCapacity, p.growth)
	} else {
		// Existing pods above the ideal come after those within it, so a
		// scale-down (or a finished move) removes them first; not-ready pods
		// above the ideal even yield to new seats of members below it.
		if p.anyKept {
			p.band(keepReadyInIdeal, p.keep)
			p.band(keepReady, p.keep)
		}
		if p.anyNotReady {
			p.band(keepScheduledInIdeal, p.keep)
		}
		if p.anyNotReady || p.anyUnscheduled {
			p.band(keepAllInIdeal, p.keep)
		}
		p.band(growWithinCapacity, p.growth)
		if p.anyNotReady {
			p.band(keepScheduled, p.keep)
		}
		if p.anyUnscheduled {
			p.band(keepAll, p.keep)
		}
	}
	p.band(growBeyondCapacity, byStaticWeight)
}

// moveBack moves the division towards the ideal within the budget and returns
// how many seats still have to move afterwards. New seats in members below
// the ideal may take the fleet total up to replicas+surge; ready seats above
// the ideal are removed beyond that only up to unavailable (the rest leave in
// a later plan, when fill sees the new pods ready and drops the surplus).
func (p *planner) moveBack(replicas int64, surge, unavailable int32) int32 {
	var below, total int64
	for i := range p.slots {
		s := &p.slots[i]
		total += int64(s.seats)
		if s.state == StateActive {
			below += int64(max(s.ideal-s.seats, 0))
		}
	}
	if below > 0 {
		for range min(int64(unavailable), below) {
			victim := p.lowestLastSeatAboveIdeal()
			if victim < 0 {
				break
			}
			p.slots[victim].seats--
			total--
		}
		p.remaining = min(replicas+int64(surge)-total, below)
		p.band(growToIdeal, p.growth)
		p.remaining = 0
	}
	// Still to move: the larger of what is missing below the ideal and what
	// is left above it (the surplus leaves once its replacements are ready).
	var under, over int64
	for i := range p.slots {
		s := &p.slots[i]
		if s.state == StateActive {
			under += int64(max(s.ideal-s.seats, 0))
			over += int64(max(s.seats-s.ideal, 0))
		}
	}
	return sat32(max(under, over))
}

// lowestLastSeatAboveIdeal returns the active slot above its ideal and its
// floor whose last seat ranks lowest (the reverse of award's order), or -1.
func (p *planner) lowestLastSeatAboveIdeal() int32 {
	victim := int32(-1)
	for i := range p.slots {
		s := &p.slots[i]
		if s.state != StateActive || s.seats <= s.ideal || s.seats <= s.floor {
			continue
		}
		if victim < 0 || p.lastSeatBelow(int32(i), victim) {
			victim = int32(i)
		}
	}
	return victim
}

// lastSeatBelow reports whether slot a's last seat ranks below slot b's (under
// CostOrdered and Packed, a lower deletionCost ranks below first; under
// Packed, then the slot opened later).
func (p *planner) lastSeatBelow(a, b int32) bool {
	if ca, cb := p.slots[a].deletionCost, p.slots[b].deletionCost; (p.growth == byTier || p.growth == byPack) && ca != cb {
		return ca < cb
	}
	if p.growth == byPack {
		p.ensureHash(a)
		p.ensureHash(b)
		return p.packOrder(a, b, byPack) > 0
	}
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

// result writes the slots' seats into res as targets, changes and notes.
func (p *planner) result(res *Result, in *Input, replicas int64, previousFound int, grace, threshold time.Duration) {
	res.Targets = make([]Target, len(p.slots))
	changed := 0
	for i := range p.slots {
		if p.slots[i].seats != p.slots[i].previous {
			changed++
		}
	}
	if changed > 0 {
		res.Changes = make([]Change, 0, changed)
	}
	var total, overCapacity int64
	for i := range p.slots {
		s := &p.slots[i]
		name := p.members[s.member].Name
		t := Target{Cluster: name, Replicas: s.seats, Previous: s.previous, State: s.state}
		total += int64(s.seats)
		if s.state == StateActive && s.capacityKnown && s.seats > s.capacity {
			t.OverCapacity = s.seats - s.capacity
			overCapacity += int64(t.OverCapacity)
		}
		res.Targets[i] = t
		if s.state != StateActive || s.stuck || t.OverCapacity > 0 {
			res.MemberNotes = append(res.MemberNotes, MemberNote{Cluster: name, Message: p.note(s, t, in.Now, grace, threshold)})
		}
		if s.seats != s.previous {
			res.Changes = append(res.Changes, Change{Cluster: name, From: s.previous, To: s.seats, Reason: reasonFor(s)})
		}
	}
	res.Shortfall = sat32(overCapacity + int64(res.Unplaced))
	res.Surge = sat32(max(total-replicas, 0))
	if previousFound == len(in.Previous) {
		return // every previous member is still a candidate
	}
	unselected := false
	for name, v := range in.Previous {
		if _, ok := slices.BinarySearchFunc(res.Targets, name, func(t Target, name string) int {
			return strings.Compare(t.Cluster, name)
		}); v != 0 && !ok {
			res.Changes = append(res.Changes, Change{Cluster: name, From: v, To: 0, Reason: ReasonNotSelected})
			unselected = true
		}
	}
	if unselected {
		slices.SortFunc(res.Changes, func(a, b Change) int { return strings.Compare(a.Cluster, b.Cluster) })
	}
}

func reasonFor(s *slot) Reason {
	switch {
	case s.state == StateFailedOver:
		return ReasonFailover
	case s.state == StateEvicted:
		return ReasonTaintEviction
	case s.state == StateExcluded:
		return ReasonSpreadConstraint
	case s.seats != s.beforeMoveBack:
		return ReasonRebalance
	case s.stuck && s.seats < s.previous:
		return ReasonUnschedulable
	case s.seats > s.previous:
		return ReasonScaleUp
	default:
		return ReasonScaleDown
	}
}

func (p *planner) note(s *slot, t Target, now time.Time, grace, threshold time.Duration) string {
	m := &p.members[s.member]
	var parts []string
	switch {
	case s.state == StateFailedOver:
		parts = append(parts, fmt.Sprintf("unreachable for %s, longer than the %s grace period: replicas planned elsewhere",
			now.Sub(m.UnhealthySince).Round(time.Second), grace))
	case s.state == StateHeld && m.Health == Unhealthy && !m.UnhealthySince.IsZero():
		parts = append(parts, fmt.Sprintf("unreachable for %s, within the %s grace period: target held",
			now.Sub(m.UnhealthySince).Round(time.Second), grace))
	case s.state == StateHeld && m.Health == Unhealthy:
		parts = append(parts, "unreachable (since unknown): target held")
	case s.state == StateHeld:
		parts = append(parts, "health unknown: target held")
	case s.state == StateEvicted || s.state == StateCordoned:
		parts = append(parts, taintNote(m, p.tolerations, now, s.state))
	case s.state == StateExcluded:
		parts = append(parts, "outside the groups chosen by the spread constraints")
	}
	if s.stuck {
		parts = append(parts, fmt.Sprintf("%d pods unschedulable for over %s: capped at %d schedulable pods",
			m.Unschedulable, threshold, s.capacity))
	}
	if t.OverCapacity > 0 {
		parts = append(parts, fmt.Sprintf("%d replicas exceed the free capacity and will stay Pending", t.OverCapacity))
	}
	return strings.Join(parts, "; ")
}

func durationOr(d *v1alpha1.Duration, def time.Duration) time.Duration {
	if d == nil {
		return def
	}
	// A value that does not parse (stored under an older schema) takes the
	// default here; the hub reports it through FederatedReplicaSet.Validate.
	v, err := d.Parse()
	if err != nil {
		return def
	}
	return v
}

// sat32 clamps v to [0, math.MaxInt32].
func sat32(v int64) int32 {
	return int32(min(max(v, 0), unbounded))
}
