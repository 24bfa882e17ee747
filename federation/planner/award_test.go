package planner

import (
	"fmt"
	"math/rand"
	"testing"
)

// awardOneByOne is the definition award must match: each seat goes to the
// slot that outranks every other slot with room left.
func awardOneByOne(p *planner, ids []int32, o order) {
	for ; p.remaining > 0; p.remaining-- {
		best := int32(-1)
		for _, i := range ids {
			if p.room[i] > 0 && (best < 0 || p.outranks(i, best, o)) {
				best = i
			}
		}
		p.slots[best].seats++
		p.room[best]--
	}
}

// award (threshold jump, tie levels, heaps) gives exactly the seats of the
// one-by-one definition, on random slots built to tie often (equal votes,
// shared seats), with zero votes, caps and votes near the int32 limit.
func TestAwardMatchesOneByOne(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	members := make([]Member, 40)
	for i := range members {
		members[i].Name = fmt.Sprintf("m-%02d", i)
	}
	for run := range 4000 {
		n := 1 + rng.Intn(len(members))
		o := []order{byFloors, byWeight, byStaticWeight}[rng.Intn(3)]
		votePool := [][]uint64{{1}, {1, 2}, {1, 2, 3, 5}, {0, 1, 3}, {1 << 30, 1<<31 - 1, 3}, {7, 11, 13, 1000}}[rng.Intn(6)]
		build := func() *planner {
			p := &planner{members: members, seed: uidSeed(fmt.Sprint("uid-", run))}
			p.slots = make([]slot, n)
			p.room = make([]int32, n)
			return p
		}
		a, b := build(), build()
		ids := make([]int32, 0, n)
		var total int64
		for i := range n {
			s := slot{member: int32(i)}
			s.growthVotes = votePool[rng.Intn(len(votePool))]
			s.weight = uint64(rng.Intn(3))
			s.floor = int32(votePool[rng.Intn(len(votePool))] % 50)
			if o != byFloors && s.growthVotes == 0 && rng.Intn(2) == 0 {
				s.growthVotes = 1
			}
			if rng.Intn(3) == 0 {
				s.seats = int32(rng.Intn(20))
			}
			room := int32(1 + rng.Intn(40))
			if rng.Intn(4) == 0 {
				room = 1 << 20
			}
			a.slots[i], b.slots[i] = s, s
			a.room[i], b.room[i] = room, room
			ids = append(ids, int32(i))
			total += int64(room)
		}
		want := 1 + rng.Int63n(min(total-1, 3000)+1)
		if want >= total {
			want = total - 1
		}
		if want <= 0 {
			continue
		}
		a.remaining, b.remaining = want, want
		a.award(append([]int32(nil), ids...), o)
		awardOneByOne(b, ids, o)
		for i := range n {
			if a.slots[i].seats != b.slots[i].seats {
				t.Fatalf("run %d (order %d, %d seats): slot %d got %d, one by one %d", run, o, want, i, a.slots[i].seats, b.slots[i].seats)
			}
		}
		if a.remaining != 0 {
			t.Fatalf("run %d: %d seats left", run, a.remaining)
		}
	}
}
