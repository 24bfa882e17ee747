package planner

import (
	"fmt"
	"math"
	"slices"
	"sort"
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
	var sel Selection
	sel.Candidates = make([]Candidate, 0, len(members))
	eachCandidate(p, members, &sel, func(_ int, c Candidate) {
		sel.Candidates = append(sel.Candidates, c)
	})
	return sel
}

// eachCandidate calls yield for every candidate of the placement in name
// order, with the member's index in members, and records in sel what was
// unregistered, duplicated or invalid. sel.Candidates is left alone.
func eachCandidate(p *v1alpha1.Placement, members []Member, sel *Selection, yield func(index int, c Candidate)) {
	order := nameOrder(members)
	at := func(k int) int { // index in members of the k-th member by name
		if order == nil {
			return k
		}
		return order[k]
	}
	everyMember := len(p.Clusters) == 0 && p.ClusterSelector == nil
	var selector *compiledSelector
	if p.ClusterSelector != nil {
		if err := validateSelector(p.ClusterSelector); err != nil {
			sel.SelectorError = err
		} else {
			selector = compileSelector(p.ClusterSelector)
		}
	}
	// listedAs[k] is 1 + the index in p.Clusters of the preference naming the
	// k-th member by name, or 0.
	var listedAs []int32
	if len(p.Clusters) > 0 {
		listedAs = make([]int32, len(members))
		for j := range p.Clusters {
			name := p.Clusters[j].Name
			k, found := sort.Find(len(members), func(k int) int { return strings.Compare(name, members[at(k)].Name) })
			switch {
			case !found:
				sel.Unregistered = append(sel.Unregistered, name)
			case listedAs[k] == 0: // CEL forbids a second entry for one name; ignore it
				listedAs[k] = int32(j) + 1
			}
		}
	}
	for k := range members {
		i := at(k)
		m := &members[i]
		if k > 0 && members[at(k-1)].Name == m.Name {
			sel.Duplicates = append(sel.Duplicates, m.Name)
			continue
		}
		c := Candidate{Member: m, Weight: 1, MaxReplicas: unbounded}
		if listedAs != nil && listedAs[k] > 0 {
			resolvePreference(&c, &p.Clusters[listedAs[k]-1])
		}
		if everyMember || c.Listed || (selector != nil && selector.matches(m.Labels)) {
			yield(i, c)
		}
	}
}

// resolvePreference applies a listed cluster's preference to its candidate.
func resolvePreference(c *Candidate, pref *v1alpha1.ClusterPreference) {
	c.Listed = true
	if pref.Weight != nil {
		c.Weight = max(*pref.Weight, 0)
	}
	if pref.MaxReplicas != nil {
		c.MaxReplicas = max(*pref.MaxReplicas, 0)
	}
	if pref.MinReplicas != nil {
		c.MinReplicas = min(max(*pref.MinReplicas, 0), c.MaxReplicas)
	}
	if pref.DeletionCost != nil {
		c.DeletionCost = *pref.DeletionCost
	}
}

// nameOrder returns the indexes of members sorted by name, or nil when they
// already are (as the registry keeps them). The sort is stable, so of two
// members with one name the first given comes first.
func nameOrder(members []Member) []int {
	sorted := true
	for i := 1; i < len(members) && sorted; i++ {
		sorted = members[i-1].Name <= members[i].Name
	}
	if sorted {
		return nil
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(members[a].Name, members[b].Name) })
	return order
}

// validateSelector refuses operators and value lists a LabelSelector does not
// allow, so that matching cannot fail.
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

// compiledSelector is a validated LabelSelector with its matchLabels in a
// slice, so matching it against every member ranges over a slice instead of
// starting a map iteration per member. It means what
// metav1.LabelSelectorAsSelector means, without building a labels.Selector per
// plan.
type compiledSelector struct {
	labels      []labelPair
	expressions []metav1.LabelSelectorRequirement
}

// labelPair is one matchLabels entry of a selector.
type labelPair struct{ key, value string }

func compileSelector(s *metav1.LabelSelector) *compiledSelector {
	c := &compiledSelector{expressions: s.MatchExpressions}
	for k, v := range s.MatchLabels {
		c.labels = append(c.labels, labelPair{k, v})
	}
	return c
}

func (s *compiledSelector) matches(labels map[string]string) bool {
	for _, l := range s.labels {
		if got, ok := labels[l.key]; !ok || got != l.value {
			return false
		}
	}
	for _, e := range s.expressions {
		got, ok := labels[e.Key]
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
