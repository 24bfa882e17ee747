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
		name := p.members[s.mi].Name
		for j := 0; j < len(name); j++ {
			h ^= uint64(name[j])
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
	return p.members[sa.mi].Name < p.members[sb.mi].Name
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

// entry is one slot while award ranks it: the priority v/d of the seat in
// question and the tie-break keys, copied out of the slot so that a
// comparison reads one small struct instead of chasing slots and orders.
type entry struct {
	v   uint64 // votes
	d   uint64 // 2*seats+1 for the ranked seat
	sec uint64 // secondary key, higher first: the static weight under byFloors, else 0
	h   uint64 // tie-break hash, lower first
	id  int32  // slot index
	n   int32  // seats left to give
	c   int32  // seats above the threshold jump tried last
}

// before reports whether entry a's seat comes before entry b's: the same
// order as outranks (exact 128-bit cross products, then sec, hash, name).
func (p *planner) before(a, b *entry) bool {
	h1, l1 := bits.Mul64(a.v, b.d)
	h2, l2 := bits.Mul64(b.v, a.d)
	if h1 != h2 {
		return h1 > h2
	}
	if l1 != l2 {
		return l1 > l2
	}
	if a.sec != b.sec {
		return a.sec > b.sec
	}
	if a.h != b.h {
		return a.h < b.h
	}
	return p.members[p.slots[a.id].mi].Name < p.members[p.slots[b.id].mi].Name
}

// award hands out p.remaining seats (less than the room of ids) in the order
// of the band: the result is the first p.remaining seats of the sequence in
// which the highest-priority slot always takes the next seat.
//
// Handing them out one by one costs O(log M) per seat, so award first jumps
// close to the end of that sequence: every seat whose Webster priority is
// above a threshold a/b comes before every seat at or below it, so the seats
// above the threshold are exactly a prefix of the sequence. extend then
// lengthens that prefix, or cut shortens it, until it holds exactly
// p.remaining seats. The threshold only decides how many seats those two
// handle, never which seats are given.
func (p *planner) award(ids []int32, o order) {
	want := uint64(p.remaining)
	es := slices.Grow(p.entries[:0], len(ids))[:len(ids)]
	var votes, held uint64
	exact := true
	for k, i := range ids {
		s := &p.slots[i]
		e := &es[k]
		// Field by field: a composite literal would be copied with wide
		// loads that stall on its fresh stores.
		e.v, e.d, e.h, e.id, e.n, e.c = s.votes(o), 2*uint64(s.seats)+1, p.hashOf(i), i, p.room[i], 0
		e.sec = 0
		if o == byFloors {
			e.sec = s.ws
		}
		var c uint64
		votes, c = bits.Add64(votes, e.v, 0)
		held += uint64(s.seats)
		exact = exact && c == 0
	}
	p.entries = es

	var given uint64
	if exact && votes > 0 && held < 1<<62 && want < 1<<62 {
		given = p.jump(es, votes, held, want)
	}
	for k := range es {
		p.slots[es[k].id].seats = int32((es[k].d - 1) / 2)
	}
	if given < want {
		p.extend(es, want-given)
	} else if given > want {
		p.cut(es, given-want)
	}
	p.remaining = 0
}

// jump gives every entry the seats whose priority is above a threshold chosen
// so that about want seats qualify, and returns how many it gave. Entries end
// with d at their next seat and n = room left; given seats are recorded in
// p.room. The threshold starts at Sainte-Laguë's votes/(2*(held+want)) and is
// refined once over the entries that did not reach their room.
func (p *planner) jump(es []entry, votes, held, want uint64) uint64 {
	a, b := votes, 2*(held+want)
	best, bestA, bestB := uint64(0), uint64(0), uint64(0)
	bestDist := want
	last := false // whether the counts in es are those of the best threshold
	for iter := 0; iter < 3; iter++ {
		var n, fullRoom, freeVotes, freeHeld uint64
		var carry uint64
		for k := range es {
			e := &es[k]
			c := seatsAbove(e.v, e.d, e.n, a, b)
			e.c = int32(c)
			n += c
			if c == uint64(e.n) {
				fullRoom += c
			} else {
				freeVotes, carry = bits.Add64(freeVotes, e.v, carry)
				freeHeld += (e.d - 1) / 2
			}
		}
		dist := max(n, want) - min(n, want)
		last = dist < bestDist
		if last {
			best, bestA, bestB, bestDist = n, a, b, dist
		}
		// Without a member at its room the refined threshold would be the
		// same one.
		if dist == 0 || fullRoom == 0 || carry != 0 || freeVotes == 0 || fullRoom >= want {
			break
		}
		a, b = freeVotes, 2*(freeHeld+want-fullRoom)
	}
	if best == 0 {
		return 0
	}
	for k := range es {
		e := &es[k]
		c := e.c
		if !last {
			c = int32(seatsAbove(e.v, e.d, e.n, bestA, bestB))
		}
		e.d += 2 * uint64(c)
		e.n -= c
		p.room[e.id] = c
	}
	return best
}

// seatsAbove counts the seats j >= s, where d = 2*s+1, whose priority
// v/(2*j+1) is above a/b, capped at room, compared exactly in 128 bits: the
// odd numbers o with o*a < v*b are those up to f = floor((v*b-1)/a).
func seatsAbove(v, d uint64, room int32, a, b uint64) uint64 {
	if v == 0 || room <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(v, b)
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	if hi >= a {
		return uint64(room) // f >= 2^64: every seat in the room qualifies
	}
	f, _ := bits.Div64(hi, lo, a)
	odd := f/2 + f&1 // odd numbers in [1, f]
	s := (d - 1) / 2
	if odd <= s {
		return 0
	}
	return min(odd-s, uint64(room))
}

// tieRounds bounds the rounds extend and cut spend one priority level at a
// time before they hand the rest to a heap.
const tieRounds = 4

// extend gives count more seats in the order of before. While the rest is
// short, it works a priority level at a time: every next seat at the highest
// priority left comes before every other seat left, and each member has at
// most one seat at that level (a member's priorities strictly fall, votes >
// 0), so either all of them are given or the first count by the tie-break
// keys. That settles the usual case, many members tied on equal weights, in
// O(M) instead of O(count log M).
func (p *planner) extend(es []entry, count uint64) {
	for round := 0; round < tieRounds && count > 0; round++ {
		top := -1
		for k := range es {
			if es[k].n > 0 && (top < 0 || abovePrio(&es[k], &es[top])) {
				top = k
			}
		}
		if top < 0 || es[top].v == 0 {
			// Zero votes: every seat of such a member has priority 0, so
			// one member can hold several seats of the level; use the heap.
			break
		}
		tied := p.tied[:0]
		for k := range es {
			if es[k].n > 0 && !abovePrio(&es[top], &es[k]) {
				tied = append(tied, int32(k))
			}
		}
		p.tied = tied
		if uint64(len(tied)) > count {
			p.selectTies(es, tied, int(count), false)
			tied = tied[:count]
		}
		for _, k := range tied {
			e := &es[k]
			e.d += 2
			e.n--
			p.slots[e.id].seats++
		}
		count -= uint64(len(tied))
	}
	if count > 0 {
		p.extendHeap(es, count)
	}
}

// cut takes back count of the seats jump gave (p.room holds how many per
// entry), last in the order of before first: a priority level at a time
// like extend, then with a heap.
func (p *planner) cut(es []entry, count uint64) {
	for round := 0; round < tieRounds && count > 0; round++ {
		// The last seat given to an entry is at d-2.
		low := -1
		for k := range es {
			if p.room[es[k].id] > 0 && (low < 0 || belowPrio(&es[k], &es[low])) {
				low = k
			}
		}
		if low < 0 {
			break
		}
		tied := p.tied[:0]
		for k := range es {
			if p.room[es[k].id] > 0 && !belowPrio(&es[low], &es[k]) {
				tied = append(tied, int32(k))
			}
		}
		p.tied = tied
		if uint64(len(tied)) > count {
			p.selectTies(es, tied, int(count), true)
			tied = tied[:count]
		}
		for _, k := range tied {
			e := &es[k]
			e.d -= 2
			e.n++
			p.room[e.id]--
			p.slots[e.id].seats--
		}
		count -= uint64(len(tied))
	}
	if count > 0 {
		p.cutHeap(es, count)
	}
}

// abovePrio reports whether the next seat of a has a higher Webster priority
// than the next seat of b (exact, ignoring tie-breaks).
func abovePrio(a, b *entry) bool {
	h1, l1 := bits.Mul64(a.v, b.d)
	h2, l2 := bits.Mul64(b.v, a.d)
	return h1 > h2 || (h1 == h2 && l1 > l2)
}

// belowPrio reports whether the last seat given to a (at d-2) has a lower
// priority than the last seat given to b.
func belowPrio(a, b *entry) bool {
	h1, l1 := bits.Mul64(a.v, b.d-2)
	h2, l2 := bits.Mul64(b.v, a.d-2)
	return h1 < h2 || (h1 == h2 && l1 < l2)
}

// tieKey is an entry's tie-break keys, for selectTies: higher sec first,
// then lower hash, then name. For the reverse order both keys are
// complemented and the name order is reversed.
type tieKey struct {
	sec, h uint64
	k      int32 // index in es
}

func (p *planner) keyFirst(es []entry, a, b *tieKey, last bool) bool {
	if a.sec != b.sec {
		return a.sec > b.sec
	}
	if a.h != b.h {
		return a.h < b.h
	}
	na := p.members[p.slots[es[a.k].id].mi].Name
	nb := p.members[p.slots[es[b.k].id].mi].Name
	return (na < nb) != last
}

// selectTies reorders idx so that its first k entries are the k first in the
// tie-break order of before (the k last when last is set), in no particular
// order: a quickselect. The keys are distinct, so the chosen set is unique.
func (p *planner) selectTies(es []entry, idx []int32, k int, last bool) {
	keys := slices.Grow(p.keys[:0], len(idx))[:len(idx)]
	p.keys = keys
	for j, i := range idx {
		key := &keys[j]
		key.sec, key.h, key.k = es[i].sec, es[i].h, i
		if last {
			key.sec, key.h = ^key.sec, ^key.h
		}
	}
	lo, hi := 0, len(keys)-1
	for lo < hi {
		// Median of three as the pivot, moved to hi.
		mid := int(uint(lo+hi) >> 1)
		if p.keyFirst(es, &keys[mid], &keys[lo], last) {
			keys[mid], keys[lo] = keys[lo], keys[mid]
		}
		if p.keyFirst(es, &keys[hi], &keys[lo], last) {
			keys[hi], keys[lo] = keys[lo], keys[hi]
		}
		if p.keyFirst(es, &keys[mid], &keys[hi], last) {
			keys[mid], keys[hi] = keys[hi], keys[mid]
		}
		pivot := keys[hi]
		store := lo
		for i := lo; i < hi; i++ {
			if p.keyFirst(es, &keys[i], &pivot, last) {
				keys[i], keys[store] = keys[store], keys[i]
				store++
			}
		}
		keys[store], keys[hi] = keys[hi], keys[store]
		switch {
		case store == k || store == k-1:
			lo = hi // done
		case store < k:
			lo = store + 1
		default:
			hi = store - 1
		}
	}
	for j := range keys {
		idx[j] = keys[j].k
	}
}

// extendHeap gives count more seats one at a time to the entry ranked first,
// using a binary max-heap of the entries themselves.
func (p *planner) extendHeap(es []entry, count uint64) {
	h := p.heap[:0]
	for k := range es {
		if es[k].n > 0 {
			h = append(h, es[k])
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		p.siftFirst(h, i)
	}
	for ; count > 0 && len(h) > 0; count-- {
		e := &h[0]
		e.d += 2
		e.n--
		if e.n == 0 {
			p.slots[e.id].seats = int32((e.d - 1) / 2)
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		}
		p.siftFirst(h, 0)
	}
	for k := range h {
		p.slots[h[k].id].seats = int32((h[k].d - 1) / 2)
	}
	p.heap = h
}

// siftFirst restores the max-heap order (by before) below index i.
func (p *planner) siftFirst(h []entry, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		best := l
		if r := l + 1; r < n && p.before(&h[r], &h[l]) {
			best = r
		}
		if !p.before(&h[best], &h[i]) {
			return
		}
		h[i], h[best] = h[best], h[i]
		i = best
	}
}

// cutHeap takes back count seats given by jump, always the one ranked last
// among the last seats given, using a binary min-heap of the entries.
func (p *planner) cutHeap(es []entry, count uint64) {
	h := p.heap[:0]
	for k := range es {
		e := es[k]
		if e.n = p.room[e.id]; e.n > 0 {
			e.d -= 2 // rank the last seat given
			h = append(h, e)
		}
	}
	for i := len(h)/2 - 1; i >= 0; i-- {
		p.siftLast(h, i)
	}
	for ; count > 0 && len(h) > 0; count-- {
		e := &h[0]
		e.n--
		if e.n == 0 {
			// e.d is the seat just taken back, now its next seat.
			p.slots[e.id].seats = int32((e.d - 1) / 2)
			h[0] = h[len(h)-1]
			h = h[:len(h)-1]
		} else {
			e.d -= 2
		}
		p.siftLast(h, 0)
	}
	for k := range h {
		p.slots[h[k].id].seats = int32((h[k].d + 1) / 2) // d ranks the last seat held
	}
	p.heap = h
}

// siftLast restores the min-heap order (by before) below index i.
func (p *planner) siftLast(h []entry, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		worst := l
		if r := l + 1; r < n && p.before(&h[l], &h[r]) {
			worst = r
		}
		if !p.before(&h[i], &h[worst]) {
			return
		}
		h[i], h[worst] = h[worst], h[i]
		i = worst
	}
}
