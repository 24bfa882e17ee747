// Package ownership decides which replica owns which member cluster when
// member workers are sharded across the replicas (issue 27): the
// assignment (Assign, a pure function of the members, the candidate
// replicas and the current owners) and the leader's view of which owners
// still renew their lease (Watch). The replicated record of owners and
// epochs lives in raftstore/fsm; the owner's own lease in raftstore/node.
package ownership

import (
	"cmp"
	"slices"
)

// Candidate is a replica that may own members: a raft server ID, whether
// the leader counts it as live (see Watch), and whether it is stable: it
// has renewed without a lapse for at least the damping period
// (Watch.WithDamping). Only a stable candidate receives members moved from
// a live owner for balance; members without a live owner go to any live
// candidate at once. Stable without Live counts as neither.
type Candidate struct {
	ID     string
	Live   bool
	Stable bool
}

// Move is one member changing owner. From is "" for a member that had no
// owner (new, or its owner left the candidates).
type Move struct {
	Member string
	From   string
	To     string
}

// Plan is what Assign decided: the owner of every member, the members
// whose owner changes, and the members that left.
type Plan struct {
	// Owners maps every member that has a live owner to it.
	Owners map[string]string
	// Moves lists the members whose owner changes, sorted by member.
	Moves []Move
	// Dropped lists the members of current no longer among the members, sorted.
	Dropped []string
}

// Changed reports whether the plan changes anything.
func (p Plan) Changed() bool { return len(p.Moves) > 0 || len(p.Dropped) > 0 }

// Assign spreads members over the live candidates: every member gets a live
// owner, and a member stays with its live owner unless balance needs it
// elsewhere, so as few members move as possible. Members without a live
// owner (new, or their owner died or left) are assigned at once, first to
// the live candidates that are not stable, which may receive no other.
// Members of a live owner beyond its share move only to a stable
// candidate with room, and stay where they are while there is none: a
// replica that just started, restarted or resumed gets members moved to
// it only once it has renewed for the damping period, so one that comes
// and goes does not cost a handover each time. With every live candidate
// stable, owners' counts differ by at most one; the replicas that keep one
// member more than the others are those that already own most (ties:
// lower ID). Same inputs, same plan, whatever the order of the slices and
// maps. Without a live candidate nothing moves: members keep their owners.
func Assign(members []string, candidates []Candidate, current map[string]string) Plan {
	want := sortedUnique(members)
	plan := Plan{Owners: map[string]string{}}
	for _, m := range sortedKeys(current) {
		if _, ok := slices.BinarySearch(want, m); !ok {
			plan.Dropped = append(plan.Dropped, m)
		}
	}
	live := liveIDs(candidates)
	if len(live) == 0 {
		for _, m := range want {
			if o := current[m]; o != "" {
				plan.Owners[m] = o
			}
		}
		return plan
	}
	owned := map[string][]string{} // live replica -> its current members, sorted
	var orphans []string           // members without a live owner, sorted
	for _, m := range want {
		if o := current[m]; o != "" && slices.Contains(live, o) {
			owned[o] = append(owned[o], m)
		} else {
			orphans = append(orphans, m)
		}
	}
	caps := capacities(live, owned, len(want))
	var excess []string // members of live owners beyond their share
	for _, id := range live {
		keep := owned[id][:min(len(owned[id]), caps[id])]
		excess = append(excess, owned[id][len(keep):]...)
		for _, m := range keep {
			plan.Owners[m] = id
		}
		caps[id] -= len(keep)
	}
	stable, unstable := splitStable(candidates, live)
	place(&plan, orphans, append(unstable, stable...), caps, current)
	slices.Sort(excess)
	for _, m := range place(&plan, excess, stable, caps, current) {
		plan.Owners[m] = current[m] // no stable replica has room: it stays
	}
	slices.SortFunc(plan.Moves, func(a, b Move) int { return cmp.Compare(a.Member, b.Member) })
	return plan
}

// place gives each of members, in order, to the first of to that has room
// left in caps, recording the move; it returns the members that found no
// room.
func place(plan *Plan, members, to []string, caps map[string]int, current map[string]string) (left []string) {
	next := 0
	for _, m := range members {
		for next < len(to) && caps[to[next]] == 0 {
			next++
		}
		if next == len(to) {
			left = append(left, m)
			continue
		}
		plan.Owners[m] = to[next]
		caps[to[next]]--
		plan.Moves = append(plan.Moves, Move{Member: m, From: current[m], To: to[next]})
	}
	return left
}

// splitStable splits the sorted live IDs into the stable candidates and
// the others, each sorted.
func splitStable(cs []Candidate, live []string) (stable, unstable []string) {
	isStable := map[string]bool{}
	for _, c := range cs {
		isStable[c.ID] = isStable[c.ID] || (c.Live && c.Stable)
	}
	for _, id := range live {
		if isStable[id] {
			stable = append(stable, id)
		} else {
			unstable = append(unstable, id)
		}
	}
	return stable, unstable
}

// capacities gives each live replica the number of members it ends with:
// n/len(live), plus one for the n%len(live) replicas that own most now.
func capacities(live []string, owned map[string][]string, n int) map[string]int {
	byCount := slices.Clone(live)
	slices.SortStableFunc(byCount, func(a, b string) int {
		if c := cmp.Compare(len(owned[b]), len(owned[a])); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	caps := make(map[string]int, len(live))
	base, extra := n/len(live), n%len(live)
	for i, id := range byCount {
		caps[id] = base
		if i < extra {
			caps[id]++
		}
	}
	return caps
}

func liveIDs(cs []Candidate) []string {
	var out []string
	for _, c := range cs {
		if c.Live && c.ID != "" {
			out = append(out, c.ID)
		}
	}
	return sortedUnique(out)
}

func sortedUnique(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > 0 && out[0] == "" {
		out = out[1:]
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
