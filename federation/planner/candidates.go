package planner

import (
	"fmt"
	"math"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// unbounded stands for "no ceiling" in every int32 limit of this package.
const unbounded = math.MaxInt32

// Candidate is a member selected by a placement, with its preferences resolved.
type Candidate struct {
	// Member points into the slice given to Select.
	Member *Member
	// Listed is true when placement.clusters names the member.
	Listed bool
	// Weight is the static weight (default 1).
	Weight int32
	// MinReplicas is the floor (default 0), never above MaxReplicas.
	MinReplicas int32
	// MaxReplicas is the ceiling; math.MaxInt32 when unbounded.
	MaxReplicas int32
	// DeletionCost orders scale-down: lowest cost shrinks first (default 0).
	DeletionCost int32
}

// Selection is the outcome of Select.
type Selection struct {
	// Candidates sorted by member name.
	Candidates []Candidate
	// Unregistered names from placement.clusters that match no member.
	Unregistered []string
	// SelectorError is set when the cluster selector is invalid (it then
	// matches nothing; listed clusters are still candidates).
	SelectorError error
	// Duplicates are member names given more than once; the first wins.
	Duplicates []string
}

// Select picks the candidate members of a placement: the clusters it lists by
// name, plus the members its clusterSelector matches (weight 1, no bounds,
// unless also listed); every member when both are empty. Members need not be
// sorted.
func Select(p *v1alpha1.Placement, members []Member) Selection {
	var sc planner
	var sel Selection
	sel.Candidates = make([]Candidate, 0, len(members))
	sc.forEachCandidate(p, members, &sel, func(c Candidate, _ int) {
		sel.Candidates = append(sel.Candidates, c)
	}, func() { sel.Candidates = sel.Candidates[:0] })
	return sel
}

// sortedOrder returns member indexes in name order, or nil when the members
// are already sorted (the common case, checked in linear time), and whether
// two members may share a name (false only when the sorted check saw none).
func (sc *planner) sortedOrder(members []Member) (order []int, dups bool) {
	for i := 1; i < len(members); i++ {
		switch c := strings.Compare(members[i].Name, members[i-1].Name); {
		case c == 0:
			dups = true
		case c < 0:
			order = slices.Grow(sc.order[:0], len(members))[:len(members)]
			sc.order = order
			for j := range order {
				order[j] = j
			}
			slices.SortStableFunc(order, func(a, b int) int {
				return strings.Compare(members[a].Name, members[b].Name)
			})
			return order, true
		}
	}
	return nil, dups
}

// forEachCandidate calls emit for every candidate in name order, with its
// index in members, and fills the bookkeeping fields of sel. Its scratch
// space lives in sc; it allocates otherwise only for problems.
//
// Without listed clusters the members are checked for name order on the way
// rather than in a pass of their own (a pass over every member is a pass over
// cold memory when each plan has its own member slice); when they turn out
// unsorted, restart is called and the candidates are emitted again from the
// start, in name order.
func (sc *planner) forEachCandidate(p *v1alpha1.Placement, members []Member, sel *Selection, emit func(c Candidate, index int), restart func()) {
	var order []int
	dups := true
	checking := len(p.Clusters) == 0 // no binary search below: order checked in the loop
	if !checking {
		order, dups = sc.sortedOrder(members)
	}
	idx := func(i int) int {
		if order != nil {
			return order[i]
		}
		return i
	}
	at := func(i int) *Member { return &members[idx(i)] }
	n := len(members)
	all := len(p.Clusters) == 0 && p.ClusterSelector == nil
	var selector *metav1.LabelSelector
	if p.ClusterSelector != nil {
		if err := validateSelector(p.ClusterSelector); err != nil {
			sel.SelectorError = err
		} else {
			selector = p.ClusterSelector
			sc.pairs = labelPairs(sc.pairs[:0], selector)
		}
	}
	// prefOf[i] is the index in p.Clusters of member i's preference, or -1.
	// Binary search over the sorted members keeps this O(N log M).
	var prefOf []int32
	if len(p.Clusters) > 0 {
		prefOf = slices.Grow(sc.prefOf[:0], n)[:n]
		sc.prefOf = prefOf
		for i := range prefOf {
			prefOf[i] = -1
		}
		for j := range p.Clusters {
			name := p.Clusters[j].Name
			lo, hi := 0, n
			for lo < hi {
				mid := int(uint(lo+hi) >> 1)
				if at(mid).Name < name {
					lo = mid + 1
				} else {
					hi = mid
				}
			}
			switch {
			case lo == n || at(lo).Name != name:
				sel.Unregistered = append(sel.Unregistered, name)
			case prefOf[lo] < 0:
				prefOf[lo] = int32(j)
			}
			// A second preference for the same name is ignored (CEL forbids it).
		}
	}
	// Only listed members can be candidates: skip the others early.
	listedOnly := !all && selector == nil && len(p.Clusters) > 0
	for i := 0; i < n; i++ {
		m := at(i)
		if checking && i > 0 {
			switch c := strings.Compare(m.Name, members[i-1].Name); {
			case c < 0:
				restart()
				sel.Duplicates = sel.Duplicates[:0]
				order, _ = sc.sortedOrder(members)
				checking = false
				i = -1
				continue
			case c == 0:
				sel.Duplicates = append(sel.Duplicates, m.Name)
				continue
			}
		} else if !checking && dups && i > 0 && at(i-1).Name == m.Name {
			sel.Duplicates = append(sel.Duplicates, m.Name)
			continue
		}
		if listedOnly && prefOf[i] < 0 {
			continue
		}
		c := Candidate{Member: m, Weight: 1, MaxReplicas: unbounded}
		if len(p.Clusters) > 0 && prefOf[i] >= 0 {
			pref := &p.Clusters[prefOf[i]]
			c.Listed = true
			if pref.Weight != nil {
				c.Weight = max(*pref.Weight, 0)
			}
			if pref.MinReplicas != nil {
				c.MinReplicas = max(*pref.MinReplicas, 0)
			}
			if pref.MaxReplicas != nil {
				c.MaxReplicas = max(*pref.MaxReplicas, 0)
			}
			if pref.DeletionCost != nil {
				c.DeletionCost = *pref.DeletionCost
			}
		}
		c.MinReplicas = min(c.MinReplicas, c.MaxReplicas)
		if all || c.Listed || (selector != nil && matchCompiled(sc.pairs, selector.MatchExpressions, m.Labels)) {
			emit(c, idx(i))
		}
	}
}

// validateSelector refuses operators and value lists a LabelSelector does not
// allow, so matchSelector can stay allocation-free.
func validateSelector(s *metav1.LabelSelector) error {
	for _, e := range s.MatchExpressions {
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				return fmt.Errorf("cluster selector: key %q: operator %s needs values", e.Key, e.Operator)
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				return fmt.Errorf("cluster selector: key %q: operator %s takes no values", e.Key, e.Operator)
			}
		default:
			return fmt.Errorf("cluster selector: key %q: unknown operator %q", e.Key, e.Operator)
		}
	}
	return nil
}

// labelPair is one matchLabels entry of a selector.
type labelPair struct{ key, value string }

// labelPairs appends the matchLabels of s to dst, so that matching a selector
// against every member ranges over a slice instead of starting a map
// iteration per member.
func labelPairs(dst []labelPair, s *metav1.LabelSelector) []labelPair {
	for k, v := range s.MatchLabels {
		dst = append(dst, labelPair{k, v})
	}
	return dst
}

// matchSelector evaluates a validated LabelSelector against labels with the
// same meaning as metav1.LabelSelectorAsSelector, without building a
// labels.Selector per call (that dominated the benchmark). An empty selector
// matches everything.
func matchSelector(s *metav1.LabelSelector, lbls map[string]string) bool {
	return matchCompiled(labelPairs(nil, s), s.MatchExpressions, lbls)
}

// matchCompiled is matchSelector with the matchLabels already in a slice.
func matchCompiled(pairs []labelPair, exprs []metav1.LabelSelectorRequirement, lbls map[string]string) bool {
	for _, l := range pairs {
		if got, ok := lbls[l.key]; !ok || got != l.value {
			return false
		}
	}
	for _, e := range exprs {
		got, ok := lbls[e.Key]
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			if !ok || !slices.Contains(e.Values, got) {
				return false
			}
		case metav1.LabelSelectorOpNotIn:
			if ok && slices.Contains(e.Values, got) {
				return false
			}
		case metav1.LabelSelectorOpExists:
			if !ok {
				return false
			}
		case metav1.LabelSelectorOpDoesNotExist:
			if ok {
				return false
			}
		}
	}
	return true
}
