package ranking

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestTierOf(t *testing.T) {
	values := &v1alpha1.NodeCost{Key: "capacity", Values: []string{"spot", "on-demand", "reserved", "spot"}}
	integer := &v1alpha1.NodeCost{Key: "cost", Integer: true}
	cases := []struct {
		name   string
		nc     *v1alpha1.NodeCost
		labels map[string]string
		want   NodeTier
	}{
		{"feature off", nil, map[string]string{"capacity": "spot"}, NodeTier{}},
		{"first value", values, map[string]string{"capacity": "spot"}, NodeTier{Ranked: true, Cost: 0}},
		{"last value", values, map[string]string{"capacity": "reserved"}, NodeTier{Ranked: true, Cost: 2}},
		{"value not listed", values, map[string]string{"capacity": "preemptible"}, NodeTier{}},
		{"label missing", values, map[string]string{"other": "spot"}, NodeTier{}},
		{"no labels", values, nil, NodeTier{}},
		{"value match is exact", values, map[string]string{"capacity": "Spot"}, NodeTier{}},
		{"integer", integer, map[string]string{"cost": "42"}, NodeTier{Ranked: true, Cost: 42}},
		{"integer zero", integer, map[string]string{"cost": "0"}, NodeTier{Ranked: true, Cost: 0}},
		{"integer leading zeros", integer, map[string]string{"cost": "007"}, NodeTier{Ranked: true, Cost: 7}},
		{"integer not a number", integer, map[string]string{"cost": "cheap"}, NodeTier{}},
		{"integer out of range", integer, map[string]string{"cost": "99999999999999999999"}, NodeTier{}},
		{"integer label missing", integer, map[string]string{}, NodeTier{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := TierOf(c.nc, c.labels); got != c.want {
				t.Errorf("TierOf = %+v, want %+v", got, c.want)
			}
		})
	}
}

// TestLessByNodeCost checks where the node cost rule sits: after unassigned,
// phase, readiness and the deletion-cost annotation, before every later
// upstream rule.
func TestLessByNodeCost(t *testing.T) {
	t0 := now.Add(-time.Hour)
	spot := NodeTier{Ranked: true, Cost: 0}
	onDemand := NodeTier{Ranked: true, Cost: 1}
	unranked := NodeTier{}
	running := func(name string, opts ...podOpt) *corev1.Pod {
		return pod(name, append([]podOpt{onNode("n-" + name), phase(corev1.PodRunning)}, opts...)...)
	}
	cases := []struct {
		name          string
		first, second *corev1.Pod
		t1, t2        NodeTier
		r1, r2        int
	}{
		{name: "cheaper node first", first: running("z", readyAt(t0)), second: running("a", readyAt(t0)), t1: spot, t2: onDemand},
		{name: "ranked before unranked", first: running("z", readyAt(t0)), second: running("a", readyAt(t0)), t1: onDemand, t2: unranked},
		{name: "unassigned still first", first: pod("a", phase(corev1.PodRunning)), second: running("b"), t1: unranked, t2: spot},
		{name: "pending still first", first: pod("a", onNode("n"), phase(corev1.PodPending)), second: running("b", readyAt(t0)), t1: onDemand, t2: spot},
		{name: "unknown phase still first", first: pod("a", onNode("n"), phase(corev1.PodUnknown)), second: running("b", readyAt(t0)), t1: onDemand, t2: spot},
		{name: "not ready still first", first: running("a"), second: running("b", readyAt(t0)), t1: onDemand, t2: spot},
		{name: "explicit deletion cost wins over tier", first: running("a", readyAt(t0), cost("-1")), second: running("b", readyAt(t0)), t1: onDemand, t2: spot},
		{name: "higher explicit cost keeps pod on cheap node", first: running("a", readyAt(t0), cost("5")), second: running("b", readyAt(t0), cost("10")), t1: onDemand, t2: spot},
		{name: "equal explicit costs: tier decides", first: running("z", readyAt(t0), cost("7")), second: running("a", readyAt(t0), cost("7")), t1: spot, t2: onDemand},
		{name: "tier beats colocation", first: running("z", readyAt(t0)), second: running("a", readyAt(t0)), t1: spot, t2: onDemand, r1: 1, r2: 9},
		{name: "tier beats ready time", first: running("z", readyAt(now.Add(-10*time.Hour))), second: running("a", readyAt(now.Add(-time.Second))), t1: spot, t2: onDemand},
		{name: "tier beats restarts", first: running("z", readyAt(t0)), second: running("a", readyAt(t0), restarts(50)), t1: spot, t2: onDemand},
		{name: "same tier: colocation decides", first: running("z", readyAt(t0)), second: running("a", readyAt(t0)), t1: spot, t2: spot, r1: 3, r2: 1},
		{name: "same tier: restarts decide", first: running("z", readyAt(t0), restarts(2)), second: running("a", readyAt(t0)), t1: onDemand, t2: onDemand},
		{name: "both unranked: upstream order", first: running("z", readyAt(t0), restarts(2)), second: running("a", readyAt(t0)), t1: unranked, t2: unranked},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if !less(c.first, c.second, c.r1, c.r2, &c.t1, &c.t2, now) {
				t.Errorf("less(first, second) = false, want true")
			}
			if less(c.second, c.first, c.r2, c.r1, &c.t2, &c.t1, now) {
				t.Errorf("less(second, first) = true, want false")
			}
		})
	}
}

func TestPodsToDeleteByNodeCost(t *testing.T) {
	nc := &v1alpha1.NodeCost{Key: "capacity", Values: []string{"spot", "on-demand", "reserved"}}
	nodes := map[string]map[string]string{
		"spot-1": {"capacity": "spot"}, "spot-2": {"capacity": "spot"},
		"od-1": {"capacity": "on-demand"}, "res-1": {"capacity": "reserved"}, "bare": {},
	}
	tierOf := func(p *corev1.Pod) NodeTier { return TierOf(nc, nodes[p.Spec.NodeName]) }
	ready := func(name, node string, opts ...podOpt) *corev1.Pod {
		return pod(name, append([]podOpt{onNode(node), phase(corev1.PodRunning), readyAt(now.Add(-time.Hour))}, opts...)...)
	}
	cases := []struct {
		name   string
		active []*corev1.Pod
		n      int
		want   []string // in deletion order
		off    []string // upstream's choice for the same pods
	}{
		{
			name: "cheapest tiers first, colocation within a tier",
			active: []*corev1.Pod{
				ready("r1", "res-1"), ready("r2", "res-1"), ready("r3", "res-1"),
				ready("o1", "od-1"), ready("s1", "spot-1"), ready("s2", "spot-2"), ready("s3", "spot-2"),
			},
			n:    4,
			want: []string{"s2", "s3", "s1", "o1"},
			off:  []string{"r1", "r2", "r3", "s2"},
		},
		{
			name: "not ready reserved pod before ready spot pods",
			active: []*corev1.Pod{
				pod("r-nr", onNode("res-1"), phase(corev1.PodRunning)), ready("s1", "spot-1"), ready("r1", "res-1"),
			},
			n:    2,
			want: []string{"r-nr", "s1"},
			off:  []string{"r-nr", "r1"},
		},
		{
			name: "explicit cost keeps a spot pod",
			active: []*corev1.Pod{
				ready("s1", "spot-1", cost("100")), ready("s2", "spot-1"), ready("o1", "od-1"), ready("r1", "res-1", cost("-5")),
			},
			n:    3,
			want: []string{"r1", "s2", "o1"},
			off:  []string{"r1", "s2", "o1"},
		},
		{
			name:   "unlabelled node last",
			active: []*corev1.Pod{ready("b1", "bare"), ready("b2", "bare"), ready("r1", "res-1")},
			n:      1,
			want:   []string{"r1"},
			off:    []string{"b1"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, mode := range []struct {
				tierOf func(*corev1.Pod) NodeTier
				want   []string
			}{{tierOf, c.want}, {nil, c.off}} {
				active := append([]*corev1.Pod(nil), c.active...)
				got := PodsToDelete(active, c.active, c.n, now, mode.tierOf)
				if names := podNames(got); !equalStrings(names, mode.want) {
					t.Errorf("node cost on=%v: deleted %v, want %v", mode.tierOf != nil, names, mode.want)
				}
			}
		})
	}
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
