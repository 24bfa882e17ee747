package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// group is the members sharing one value of a spread constraint's label.
type group struct {
	value string
	// kept is the seats its members keep (pods within previous targets);
	// score is the growth votes of its members that can grow.
	kept, score uint64
	slots       []int32
	eligible    bool
}

// kept is the seats a slot keeps whatever the plan: its pods within the
// previous target (a held member's previous target).
func (s *slot) kept() int32 {
	switch s.state {
	case StateActive, StateCordoned, StateHeld:
		return s.keepAll
	}
	return 0
}

// grows reports whether a slot can take new seats.
func (s *slot) grows() bool {
	return s.state == StateActive && s.ceiling > 0 && (s.weight > 0 || s.floor > 0)
}

// spread applies the spread constraints in order: each groups the members
// still in the running by its label, chooses the groups, excludes the members
// of the others (and those without the label) and gives every chosen group a
// floor of one seat. It returns one outcome per constraint. Duplicated
// placements run replicas in every member, so any replicas cover the groups.
func (p *planner) spread(constraints []v1alpha1.SpreadConstraint, replicas int64, duplicated bool) []SpreadOutcome {
	out := make([]SpreadOutcome, len(constraints))
	chosen := make([][]group, len(constraints))
	for k := range constraints {
		c := &constraints[k]
		o := &out[k]
		o.TopologyKey = c.TopologyKey
		o.MinGroups = 1
		if c.MinGroups != nil {
			o.MinGroups = max(*c.MinGroups, 1)
		}
		maxGroups := int32(unbounded)
		if c.MaxGroups != nil {
			maxGroups = max(*c.MaxGroups, 1)
			o.MaxGroups = maxGroups
		}
		groups := p.groupsBy(c.TopologyKey)
		eligible := groups[:0:0]
		for _, g := range groups {
			if g.eligible {
				eligible = append(eligible, g)
			}
		}
		o.Eligible = int32(len(eligible))
		// Groups that keep seats first, so running replicas are not moved by
		// a change of weights or capacity (or a member's recovery), then the
		// most votes, then the label value.
		slices.SortFunc(eligible, func(a, b group) int {
			if c := cmp.Compare(b.kept, a.kept); c != 0 {
				return c
			}
			if c := cmp.Compare(b.score, a.score); c != 0 {
				return c
			}
			return strings.Compare(a.value, b.value)
		})
		n := min(len(eligible), int(maxGroups))
		chosen[k] = eligible[:n]
		in := make(map[string]bool, n)
		for _, g := range chosen[k] {
			in[g.value] = true
			o.Groups = append(o.Groups, g.value)
		}
		for i := range p.slots {
			s := &p.slots[i]
			if s.state == StateExcluded {
				continue
			}
			if v, ok := p.members[s.member].Labels[c.TopologyKey]; !ok || !in[v] {
				s.state = StateExcluded
				s.clear()
			}
		}
	}
	// Recount after every constraint has excluded its members: a later
	// constraint may have emptied a group an earlier one chose.
	for k := range constraints {
		o := &out[k]
		var alive int32
		for _, g := range chosen[k] {
			anchor := int32(-1)
			var floors int64
			for _, i := range g.slots {
				s := &p.slots[i]
				if s.state == StateExcluded || (s.kept() == 0 && !s.grows()) {
					continue
				}
				floors += int64(s.floor)
				if anchor < 0 || p.betterAnchor(i, anchor) {
					anchor = i
				}
			}
			if anchor < 0 {
				continue
			}
			alive++
			if floors == 0 {
				p.slots[anchor].floor = 1
			}
		}
		o.Satisfied = true
		switch {
		case alive < o.MinGroups:
			o.Satisfied = false
			o.Message = fmt.Sprintf("spread by %s: %d groups can run replicas, minGroups is %d", o.TopologyKey, alive, o.MinGroups)
		case !duplicated && replicas > 0 && replicas < int64(o.MinGroups):
			o.Satisfied = false
			o.Message = fmt.Sprintf("spread by %s: %d replicas cannot cover minGroups %d", o.TopologyKey, replicas, o.MinGroups)
		}
	}
	return out
}

// groupsBy groups the slots not yet excluded by the value of a member label.
// Slots without the label are in no group.
func (p *planner) groupsBy(key string) []group {
	index := map[string]int{}
	var groups []group
	for i := range p.slots {
		s := &p.slots[i]
		if s.state == StateExcluded {
			continue
		}
		v, ok := p.members[s.member].Labels[key]
		if !ok {
			continue
		}
		k, found := index[v]
		if !found {
			k = len(groups)
			index[v] = k
			groups = append(groups, group{value: v})
		}
		g := &groups[k]
		g.slots = append(g.slots, int32(i))
		g.kept += uint64(s.kept())
		if s.grows() {
			g.score += s.growthVotes
			g.eligible = true
		}
		g.eligible = g.eligible || s.kept() > 0
	}
	return groups
}

// betterAnchor reports whether slot a is a better holder of its group's one
// seat than slot b: the one keeping more seats, then one that can grow, then
// the higher votes, then the name.
func (p *planner) betterAnchor(a, b int32) bool {
	sa, sb := &p.slots[a], &p.slots[b]
	if ka, kb := sa.kept(), sb.kept(); ka != kb {
		return ka > kb
	}
	if ga, gb := sa.grows(), sb.grows(); ga != gb {
		return ga
	}
	if sa.growthVotes != sb.growthVotes {
		return sa.growthVotes > sb.growthVotes
	}
	return p.members[sa.member].Name < p.members[sb.member].Name
}
