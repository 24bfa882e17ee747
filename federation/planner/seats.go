package planner

import (
	"cmp"
	"slices"
)

// order says how the seats of a partly filled band are ranked.
type order uint8

const (
	// byFloors: Webster with the minimums as votes; ties to the higher static
	// weight, then the hash.
	byFloors order = iota
	// byWeight: Webster with the effective weight (static weight, or capacity
	// under AvailableCapacity).
	byWeight
	// byStaticWeight: Webster with the static weight (the overflow band).
	byStaticWeight
	// byCostThenWeight: members with the highest deletionCost keep their seats
	// first, so the lowest cost loses first; Webster by weight within a cost.
	byCostThenWeight
	// byTier: new seats under CostOrdered, tier by tier from the highest
	// deletionCost; Webster by weight within a tier, nothing for weight 0.
	byTier
	// byPack: new seats under Packed, one member filled before the next
	// (packOrder); nothing for weight 0.
	byPack
	// byCostThenPack: seats kept under Packed: the highest deletionCost
	// first, and within a cost the member keeping the most first, so
	// scale-down empties the smallest member before it touches the others.
	byCostThenPack
)

// keepsWithoutVotes reports whether an order gives seats to slots whose
// votes are zero: the keep orders do (existing pods of a weight-0 member
// within its minimum), the growth orders do not (Webster gives nothing to
// zero votes).
func (o order) keepsWithoutVotes() bool { return o == byCostThenWeight || o == byCostThenPack }

// votes is the numerator of a slot's Webster priority under an order.
func (s *slot) votes(o order) uint64 {
	switch o {
	case byFloors:
		return uint64(s.floor)
	case byStaticWeight:
		return s.weight
	default:
		return s.growthVotes
	}
}

// divisor is the denominator of the Webster priority of a slot's next seat.
func (s *slot) divisor() uint64 { return 2*uint64(s.seats) + 1 }

// outranks reports whether slot a's next seat comes before slot b's: the
// higher Webster priority votes/(2*seats+1), then (for the floors) the higher
// static weight, then the lower tie-break hash, then the name.
func (p *planner) outranks(a, b int32, o order) bool {
	p.ensureHash(a)
	p.ensureHash(b)
	return p.before(a, b, o)
}

// before is outranks for slots whose hash is already set. Priorities are
// compared as cross products: votes are below 2^31 and divisors below 2^32,
// so the products fit in 64 bits and the comparison is exact.
func (p *planner) before(a, b int32, o order) bool {
	sa, sb := &p.slots[a], &p.slots[b]
	if pa, pb := sa.votes(o)*sb.divisor(), sb.votes(o)*sa.divisor(); pa != pb {
		return pa > pb
	}
	if o == byFloors && sa.weight != sb.weight {
		return sa.weight > sb.weight
	}
	if sa.hash != sb.hash {
		return sa.hash < sb.hash
	}
	return p.members[sa.member].Name < p.members[sb.member].Name
}

// ensureHash sets the tie-break hash of slot i unless it is set. Only bands that
// are partly filled need it, so it is computed on first use.
func (p *planner) ensureHash(i int32) {
	if s := &p.slots[i]; !s.hashed {
		s.hash, s.hashed = memberHash(p.seed, p.members[s.member].Name), true
	}
}

// memberHash is FNV-1a over the FRS UID (the seed) and the member name,
// finished with a 64-bit mixer so that names differing in one byte land far
// apart.
func memberHash(seed uint64, name string) uint64 {
	h := seed
	for j := 0; j < len(name); j++ {
		h ^= uint64(name[j])
		h *= fnvPrime
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func uidSeed(uid string) uint64 {
	h := uint64(fnvOffset)
	for j := 0; j < len(uid); j++ {
		h ^= uint64(uid[j])
		h *= fnvPrime
	}
	// A separator so ("ab","c") and ("a","bc") differ.
	h ^= 0xff
	h *= fnvPrime
	return h
}

// band gives up to p.remaining seats, raising each slot towards its limit.
// When the whole band fits, every slot is raised without any ranking (the
// common, cheap case); otherwise award hands the seats out in the band's
// order. Because each band's ranking depends only on the seats already held,
// the sequence of seats is the same whatever the number of replicas, which is
// what makes the division house-monotone.
func (p *planner) band(limit limit, o order) {
	if p.remaining <= 0 {
		return
	}
	var total int64
	ids := p.ids[:0]
	for i := range p.slots {
		s := &p.slots[i]
		room := max(limit(s)-s.seats, 0)
		if !o.keepsWithoutVotes() && s.votes(o) == 0 {
			room = 0
		}
		p.room[i] = room
		total += int64(room)
		if room > 0 {
			ids = append(ids, int32(i))
		}
	}
	p.ids = ids
	switch o {
	case byPack, byCostThenPack:
		p.pack(ids, o)
		return
	case byCostThenWeight, byTier:
		// Ranked in tiers of deletionCost, below.
	default:
		p.fillOrAward(ids, total, o)
		return
	}
	// Highest deletionCost first; the stable sort keeps name order inside a
	// cost, and each cost is a band of its own, ranked by weight.
	slices.SortStableFunc(ids, func(a, b int32) int {
		return cmp.Compare(p.slots[b].deletionCost, p.slots[a].deletionCost)
	})
	for len(ids) > 0 && p.remaining > 0 {
		cost := p.slots[ids[0]].deletionCost
		end := 1
		total := int64(p.room[ids[0]])
		for end < len(ids) && p.slots[ids[end]].deletionCost == cost {
			total += int64(p.room[ids[end]])
			end++
		}
		p.fillOrAward(ids[:end], total, byWeight)
		ids = ids[end:]
	}
}

// pack hands out p.remaining seats to the slots ids one slot at a time,
// each taking all its room before the next gets any, in packOrder.
func (p *planner) pack(ids []int32, o order) {
	for _, i := range ids {
		p.ensureHash(i)
	}
	slices.SortFunc(ids, func(a, b int32) int { return p.packOrder(a, b, o) })
	for _, i := range ids {
		if p.remaining <= 0 {
			return
		}
		give := min(int64(p.room[i]), p.remaining)
		p.slots[i].seats += int32(give)
		p.remaining -= give
	}
}

// packOrder ranks two slots of a Packed band. Kept seats: the higher
// deletionCost, then the more pods the member runs, so a scale-down empties
// the smallest member first. New seats: the higher previous target (a member
// running replicas grows before another is opened; ignored for the division
// without history, p.noHistory), then the higher minimum. Then, for both,
// the higher static weight, the tie-break hash drawn from the FRS's UID (so
// small FRS of equal weights land on different members), and the name.
// Every key is an input of the plan, never the seats of an earlier band:
// the order is then the same whatever the number of replicas, which keeps
// the division house-monotone as Webster's is.
func (p *planner) packOrder(a, b int32, o order) int {
	sa, sb := &p.slots[a], &p.slots[b]
	var ka, kb [2]int32
	switch {
	case o == byCostThenPack:
		ka, kb = [2]int32{sa.deletionCost, sa.keepAll}, [2]int32{sb.deletionCost, sb.keepAll}
	case p.noHistory:
		ka, kb = [2]int32{0, sa.floor}, [2]int32{0, sb.floor}
	default:
		ka, kb = [2]int32{sa.previous, sa.floor}, [2]int32{sb.previous, sb.floor}
	}
	for k := range ka {
		if ka[k] != kb[k] {
			return cmp.Compare(kb[k], ka[k])
		}
	}
	if sa.weight != sb.weight {
		return cmp.Compare(sb.weight, sa.weight)
	}
	if sa.hash != sb.hash {
		return cmp.Compare(sa.hash, sb.hash)
	}
	return cmp.Compare(p.members[sa.member].Name, p.members[sb.member].Name)
}

// fillOrAward gives the slots ids all their room when it adds up to no more
// than p.remaining, and otherwise the p.remaining seats award picks.
func (p *planner) fillOrAward(ids []int32, total int64, o order) {
	if total > p.remaining {
		p.award(ids, o)
		return
	}
	for _, i := range ids {
		p.slots[i].seats += p.room[i]
	}
	p.remaining -= total
}

// award hands out p.remaining seats, fewer than the room of the slots ids, in
// the order of outranks: the seats that handing them out one at a time, each
// to the slot whose next seat ranks first, would give.
//
// It does not go one seat at a time. Seats are ranked by priority first, so
// for any threshold the seats whose priority is above it come before all
// others: they are a prefix of that sequence. awardAbove gives the longest
// such prefix that fits, which leaves fewer seats than slots with votes, at
// most one for each; those go to the slots whose next seat ranks first.
func (p *planner) award(ids []int32, o order) {
	p.awardAbove(ids, o)
	open, votes := ids[:0], false
	for _, i := range ids {
		if p.room[i] > 0 {
			p.ensureHash(i)
			open = append(open, i)
			votes = votes || p.slots[i].votes(o) > 0
		}
	}
	first := func(a, b int32) bool { return p.before(a, b, o) }
	if votes {
		k := int(p.remaining) // below len(open): see awardAbove
		selectFirst(open, k, first)
		for _, i := range open[:k] {
			p.slots[i].seats++
			p.room[i]--
		}
	} else {
		// Seats without votes all have priority 0, so a slot's seats rank
		// alike and it takes all it can before the next slot.
		slices.SortFunc(open, func(a, b int32) int {
			switch {
			case a == b:
				return 0
			case first(a, b):
				return -1
			}
			return 1
		})
		for _, i := range open {
			n := int32(min(int64(p.room[i]), p.remaining))
			p.slots[i].seats += n
			p.room[i] -= n
			p.remaining -= int64(n)
		}
	}
	p.remaining = 0
}

// selectFirst reorders s so that its first k elements are the k first under
// less, in no particular order: a quickselect, expected O(len(s)).
func selectFirst[T any](s []T, k int, less func(a, b T) bool) {
	lo, hi := 0, len(s)
	for hi-lo > 1 {
		// Partition s[lo:hi] around its middle element, moved to the end.
		last := hi - 1
		s[lo+(hi-lo)/2], s[last] = s[last], s[lo+(hi-lo)/2]
		pivot := lo
		for i := lo; i < last; i++ {
			if less(s[i], s[last]) {
				s[i], s[pivot] = s[pivot], s[i]
				pivot++
			}
		}
		s[pivot], s[last] = s[last], s[pivot]
		// Now s[:pivot] come before s[pivot], which comes before s[pivot+1:].
		switch {
		case k == pivot || k == pivot+1:
			return
		case k < pivot:
			hi = pivot
		default:
			lo = pivot + 1
		}
	}
}

// awardAbove gives every seat, within the slots' room, whose priority is
// above a threshold: the lowest threshold for which they fit p.remaining,
// among the priorities of the seats of the slot with the most votes,
// v/(2j+1). From one j to the next, every other slot gains at most one seat
// above the threshold (its votes are at most v), so what is left is fewer
// seats than slots with votes and room, at most one for each. When the top
// slot's whole room fits, it is given with everything above it and the
// search repeats without that slot; it stops early when only slots without
// votes have room.
func (p *planner) awardAbove(ids []int32, o order) {
	for p.remaining > 0 {
		top := int32(-1)
		for _, i := range ids {
			if p.room[i] > 0 && (top < 0 || p.slots[i].votes(o) > p.slots[top].votes(o)) {
				top = i
			}
		}
		if top < 0 || p.slots[top].votes(o) == 0 {
			return
		}
		votes := p.slots[top].votes(o)
		// above counts (and with give, gives) the seats above the priority
		// of the top slot's seat j. Nothing is above its seat 0.
		above := func(j int64, give bool) int64 {
			var n int64
			for _, i := range ids {
				n += p.seatsAbove(i, o, votes, uint64(2*j+1), give)
			}
			return n
		}
		// Every seat of the top slot's room is above its seat full.
		full := int64(p.slots[top].seats) + int64(p.room[top])
		if int64(p.room[top]) <= p.remaining && above(full, false) <= p.remaining {
			p.remaining -= above(full, true)
			continue
		}
		// The largest j with above(j) <= p.remaining: an exponential search
		// from 0, then bisection between lo and hi.
		lo, step := int64(0), int64(1)
		for lo+step < full && above(lo+step, false) <= p.remaining {
			lo += step
			step *= 2
		}
		for hi := min(lo+step, full); lo+1 < hi; {
			if mid := lo + (hi-lo)/2; above(mid, false) <= p.remaining {
				lo = mid
			} else {
				hi = mid
			}
		}
		p.remaining -= above(lo, true)
		return
	}
}

// seatsAbove counts slot i's seats, within its room, whose priority is above
// votes/divisor, and gives them when give is set. A seat k has priority
// v/(2k+1) > votes/divisor when 2k+1 < v*divisor/votes: the odd numbers up to
// (v*divisor-1)/votes. Both v and votes are below 2^31 and divisor below
// 2^32, so the product fits in 64 bits.
func (p *planner) seatsAbove(i int32, o order, votes, divisor uint64, give bool) int64 {
	s := &p.slots[i]
	v := s.votes(o)
	if v == 0 || p.room[i] == 0 {
		return 0
	}
	largest := (v*divisor - 1) / votes // the largest 2k+1 allowed
	n := min(max(int64((largest+1)/2)-int64(s.seats), 0), int64(p.room[i]))
	if give {
		s.seats += int32(n)
		p.room[i] -= int32(n)
	}
	return n
}
