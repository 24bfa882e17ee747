package ranking

import (
	"strconv"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// NodeTier is how cheap a pod's node is to free on scale-down. The zero value
// is an unranked node, which comes after every ranked one.
type NodeTier struct {
	// Ranked is false for a pod without a node, a node not in the cache, a
	// node without the label, and a value NodeCost does not rank.
	Ranked bool
	// Cost orders ranked nodes: lower is cheaper to free, so its pods go
	// first.
	Cost int64
}

// TierOf ranks a node by its labels under nc: the index of the label value in
// nc.Values (first occurrence), or the value itself when nc.Integer. A nil nc
// ranks nothing.
func TierOf(nc *v1alpha1.NodeCost, nodeLabels map[string]string) NodeTier {
	if nc == nil {
		return NodeTier{}
	}
	v, ok := nodeLabels[nc.Key]
	if !ok {
		return NodeTier{}
	}
	if nc.Integer {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return NodeTier{}
		}
		return NodeTier{Ranked: true, Cost: n}
	}
	for i, want := range nc.Values {
		if v == want {
			return NodeTier{Ranked: true, Cost: int64(i)}
		}
	}
	return NodeTier{}
}

// cheaperFirst compares two tiers: decided is false when they tie.
func cheaperFirst(a, b NodeTier) (aFirst, decided bool) {
	switch {
	case a.Ranked != b.Ranked:
		return a.Ranked, true
	case a.Cost != b.Cost:
		return a.Cost < b.Cost, true
	}
	return false, false
}
