package planner

import (
	"math/bits"
	"slices"
)

// order says how the seats of a partially filled band are ranked.
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
)

// votes is the numerator of a slot's Webster priority under an order.
func (s *slot) votes(o order) uint64 {
	switch o {
	case byFloors:
		return uint64(s.lo)
	case byStaticWeight:
		return s.ws
	default:
		return s.w
	}
}

// hashOf returns the tie-break hash of slot i: FNV-1a over the FRS UID (the
// precomputed seed) and the member name, finished with a 64-bit mixer so that
// names differing in one byte land far apart. Computed lazily: only partially
// filled bands need it.
func (p *planner) hashOf(i int32) uint64 {
	s := &p.slots[i]
	if !s.hashed {
		h := p.seed
		for j := 0; j < len(s.name); j++ {
			h ^= uint64(s.name[j])
			h *= fnvPrime
		}
		h ^= h >> 33
		h *= 0xff51afd7ed558ccd
		h ^= h >> 33
		h *= 0xc4ceb9fe1a85ec53
		h ^= h >> 33
		s.hash, s.hashed = h, true
	}
	return s.hash
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

// outranks reports whether slot a's next seat comes before slot b's.
// Webster priority is votes/(2*seats+1); comparing cross products in 128 bits
// keeps it exact for any int32 seats and weights up to 2^63.
func (p *planner) outranks(a, b int32, o order) bool {
	sa, sb := &p.slots[a], &p.slots[b]
	va, vb := sa.votes(o), sb.votes(o)
	h1, l1 := bits.Mul64(va, 2*uint64(sb.seats)+1)
	h2, l2 := bits.Mul64(vb, 2*uint64(sa.seats)+1)
	if h1 != h2 {
		return h1 > h2
	}
	if l1 != l2 {
		return l1 > l2
	}
	if o == byFloors && sa.ws != sb.ws {
		return sa.ws > sb.ws
	}
	ha, hb := p.hashOf(a), p.hashOf(b)
	if ha != hb {
		return ha < hb
	}
	return sa.name < sb.name
}

// band gives up to p.remaining seats, raising each slot towards limit(slot).
// When the whole band fits, every slot is raised without any ranking (the
// common, cheap case); otherwise the seats go one by one in the band's order.
// Because each band's ranking depends only on the seats already held, the
// sequence of seats is the same whatever the number of replicas, which is what
// makes the division house-monotone.
func (p *planner) band(limit func(*slot) int32, o order) {
	if p.remaining <= 0 {
		return
	}
	var total int64
	for i := range p.slots {
		s := &p.slots[i]
		r := int64(limit(s)) - int64(s.seats)
		if r < 0 || (o != byCostThenWeight && s.votes(o) == 0) {
			r = 0
		}
		p.room[i] = int32(r)
		total += r
	}
	if total == 0 {
		return
	}
	if total <= p.remaining {
		for i := range p.slots {
			p.slots[i].seats += p.room[i]
		}
		p.remaining -= total
		return
	}
	ids := p.ids[:0]
	for i := range p.slots {
		if p.room[i] > 0 {
			ids = append(ids, int32(i))
		}
	}
	p.ids = ids
	if o != byCostThenWeight {
		p.award(ids, o)
		return
	}
	// Highest deletionCost first; the stable sort keeps name order inside a cost.
	slices.SortStableFunc(ids, func(a, b int32) int {
		ca, cb := p.slots[a].cost, p.slots[b].cost
		switch {
		case ca > cb:
			return -1
		case ca < cb:
			return 1
		}
		return 0
	})
	for start := 0; start < len(ids) && p.remaining > 0; {
		end := start
		var groupRoom int64
		for end < len(ids) && p.slots[ids[end]].cost == p.slots[ids[start]].cost {
			groupRoom += int64(p.room[ids[end]])
			end++
		}
		group := ids[start:end]
		if groupRoom <= p.remaining {
			for _, i := range group {
				p.slots[i].seats += p.room[i]
			}
			p.remaining -= groupRoom
		} else {
			p.award(group, byWeight)
		}
		start = end
	}
}

// award hands out p.remaining seats (less than the room of ids) one at a time
// to the highest-priority slot, using a binary max-heap over ids.
func (p *planner) award(ids []int32, o order) {
	h := ids
	less := func(i, j int) bool { return p.outranks(h[i], h[j], o) }
	down := func(i int) {
		n := len(h)
		for {
			l := 2*i + 1
			if l >= n {
				return
			}
			best := l
			if r := l + 1; r < n && less(r, l) {
				best = r
			}
			if !less(best, i) {
				return
			}
			h[i], h[best] = h[best], h[i]
			i = best
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		down(i)
	}
	for p.remaining > 0 && len(h) > 0 {
		top := h[0]
		p.slots[top].seats++
		p.room[top]--
		p.remaining--
		if p.room[top] == 0 {
			last := len(h) - 1
			h[0] = h[last]
			h = h[:last]
		}
		down(0)
	}
}
