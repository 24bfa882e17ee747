// Package ranking orders a ReplicaSet's active pods for deletion exactly as the
// upstream ReplicaSet controller does (LogarithmicScaleDown and PodDeletionCost
// both on), optionally with one extra rule, node cost tiers (see NodeTier and
// controller/doc.go for where it sits), and picks the pods to delete when
// scaling down.
package ranking

import (
	"math"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/replicafed/replicafed/controller/podstate"
)

// DeletionCostAnnotation is the pod annotation that makes a pod cheaper (lower)
// or dearer (higher) to delete.
const DeletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost"

// DeletionCost parses the pod-deletion-cost annotation the way the API server
// validates it: missing, empty, "+n", leading zeros, non-integers and values
// outside int32 all count as 0.
func DeletionCost(annotations map[string]string) int32 {
	v, ok := annotations[DeletionCostAnnotation]
	if !ok || !validFirstChar(v) {
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		return 0
	}
	return int32(n)
}

func validFirstChar(s string) bool {
	if s == "" {
		return false
	}
	return s[0] == '-' || s == "0" || (s[0] >= '1' && s[0] <= '9')
}

// phaseOrdinal puts pods in earlier phases first; unknown and empty phases
// count as Pending.
func phaseOrdinal(p corev1.PodPhase) int {
	switch p {
	case corev1.PodUnknown:
		return 1
	case corev1.PodRunning:
		return 2
	default:
		return 0
	}
}

// Ranked is a sortable view of pods with their colocation ranks; Less(i, j)
// means pod i should be deleted before pod j.
type Ranked struct {
	Pods []*corev1.Pod
	// Ranks[i] is the number of active related pods on Pods[i]'s node.
	Ranks []int
	// Tiers[i] is how cheap Pods[i]'s node is to free; nil leaves the node
	// cost rule out (upstream order).
	Tiers []NodeTier
	// Now anchors the logarithmic time buckets; zero compares times directly.
	Now time.Time
}

// Len implements sort.Interface.
func (r Ranked) Len() int { return len(r.Pods) }

// Swap implements sort.Interface.
func (r Ranked) Swap(i, j int) {
	r.Pods[i], r.Pods[j] = r.Pods[j], r.Pods[i]
	r.Ranks[i], r.Ranks[j] = r.Ranks[j], r.Ranks[i]
	if r.Tiers != nil {
		r.Tiers[i], r.Tiers[j] = r.Tiers[j], r.Tiers[i]
	}
}

// Less implements sort.Interface with upstream's rules, each consulted only
// when the earlier ones tie, and the node cost rule when Tiers is set.
func (r Ranked) Less(i, j int) bool {
	if r.Tiers == nil {
		return less(r.Pods[i], r.Pods[j], r.Ranks[i], r.Ranks[j], nil, nil, r.Now)
	}
	return less(r.Pods[i], r.Pods[j], r.Ranks[i], r.Ranks[j], &r.Tiers[i], &r.Tiers[j], r.Now)
}

// less reports whether a should be deleted before b: upstream's rules in
// order, and the node cost rule after the deletion-cost annotation unless
// the tiers are nil.
func less(a, b *corev1.Pod, rankA, rankB int, tierA, tierB *NodeTier, now time.Time) bool {
	// 1. Unassigned before assigned.
	na, nb := a.Spec.NodeName, b.Spec.NodeName
	if na != nb && (na == "" || nb == "") {
		return na == ""
	}
	// 2. Pending < Unknown < Running.
	if pa, pb := phaseOrdinal(a.Status.Phase), phaseOrdinal(b.Status.Phase); pa != pb {
		return pa < pb
	}
	// 3. Not ready before ready.
	ra, rb := podstate.IsReady(a), podstate.IsReady(b)
	if ra != rb {
		return !ra
	}
	// 4. Lower deletion cost first.
	if ca, cb := DeletionCost(a.Annotations), DeletionCost(b.Annotations); ca != cb {
		return ca < cb
	}
	// 4b. (replicafed, optional) Cheaper-to-free node first. After the
	// annotation, so an explicit deletion cost still wins over the tier.
	if tierA != nil && tierB != nil {
		if first, decided := cheaperFirst(*tierA, *tierB); decided {
			return first
		}
	}
	// 5. More colocated first.
	if rankA != rankB {
		return rankA > rankB
	}
	// 6. Ready more recently first, in log buckets.
	if ra && rb {
		ta, tb := podstate.ReadySince(a), podstate.ReadySince(b)
		if !ta.Equal(tb) {
			return newerFirst(a, b, ta, tb, now)
		}
	}
	// 7. More restarts first (regular containers, then sidecars).
	if res, decided := moreRestarts(a, b); decided {
		return res
	}
	// 8. Created more recently first, in log buckets.
	ta, tb := a.CreationTimestamp.Time, b.CreationTimestamp.Time
	if !ta.Equal(tb) {
		return newerFirst(a, b, ta, tb, now)
	}
	return false
}

// newerFirst compares two different times: a zero time comes first; with no
// anchor the later time comes first; otherwise the younger log2 bucket comes
// first and equal buckets fall back to the UID so equivalent pods are spread
// pseudo-randomly rather than always by age.
func newerFirst(a, b *corev1.Pod, ta, tb, now time.Time) bool {
	if now.IsZero() || ta.IsZero() || tb.IsZero() {
		if ta.IsZero() || tb.IsZero() {
			return ta.IsZero()
		}
		return ta.After(tb)
	}
	ba, bb := bucket(now.Sub(ta)), bucket(now.Sub(tb))
	if ba == bb {
		return a.UID < b.UID
	}
	return ba < bb
}

func bucket(d time.Duration) int64 {
	if d <= 0 {
		return -1
	}
	return int64(math.Log2(float64(d)))
}

func maxRestarts(p *corev1.Pod) (regular, sidecar int32) {
	for _, c := range p.Status.ContainerStatuses {
		regular = max(regular, c.RestartCount)
	}
	var sidecars map[string]bool
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			if sidecars == nil {
				sidecars = map[string]bool{}
			}
			sidecars[c.Name] = true
		}
	}
	for _, c := range p.Status.InitContainerStatuses {
		if sidecars[c.Name] {
			sidecar = max(sidecar, c.RestartCount)
		}
	}
	return regular, sidecar
}

func moreRestarts(a, b *corev1.Pod) (aFirst, decided bool) {
	ra, sa := maxRestarts(a)
	rb, sb := maxRestarts(b)
	if ra != rb {
		return ra > rb, true
	}
	if sa != sb {
		return sa > sb, true
	}
	return false, false
}

// ColocationRanks returns, for each pod, the number of active pods in related
// that run on the same node (the pod itself included when it is in related).
func ColocationRanks(pods, related []*corev1.Pod) []int {
	onNode := make(map[string]int, len(related))
	for _, p := range related {
		if podstate.IsActive(p) {
			onNode[p.Spec.NodeName]++
		}
	}
	ranks := make([]int, len(pods))
	for i, p := range pods {
		ranks[i] = onNode[p.Spec.NodeName]
	}
	return ranks
}

// PodsToDelete returns the n pods of active to delete first. When n covers all
// of active nothing is sorted, as upstream. Otherwise active is sorted in place.
// tierOf, when not nil, adds the node cost rule; it is called once per pod.
func PodsToDelete(active, related []*corev1.Pod, n int, now time.Time, tierOf func(*corev1.Pod) NodeTier) []*corev1.Pod {
	if n >= len(active) {
		return active
	}
	r := Ranked{Pods: active, Ranks: ColocationRanks(active, related), Now: now}
	if tierOf != nil {
		r.Tiers = make([]NodeTier, len(active))
		for i, p := range active {
			r.Tiers[i] = tierOf(p)
		}
	}
	sort.Sort(r)
	return active[:n]
}
