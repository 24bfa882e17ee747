// Package capacity estimates how many more pods of a template fit in a member
// cluster, from that member's nodes and the pods bound to them. The planner
// uses the estimate to keep replicas away from members that cannot run them.
//
// The estimate is deliberately coarse, like the scheduler's first filters:
// node readiness and cordoning, NoSchedule/NoExecute taints the template does
// not tolerate, the template's nodeSelector and required node affinity, and
// the allocatable cpu, memory and pod count minus what bound pods request.
// Pods not bound yet (just created, or waiting for room) take room too: their
// summed requests are subtracted from the total in units of the template, so a
// member's own pods created a moment ago are never counted as both running and
// free. It ignores pod affinity, topology spread and extended resources other than
// those the template requests; the planner's unschedulable feedback covers
// what it misses.
package capacity

import (
	"math"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
)

// Estimate returns how many more pods of tmpl fit on nodes, given every pod
// currently known in the member (only non-terminal pods count; those not
// bound to a node yet take room from the total).
// The result is capped at math.MaxInt32. Counters give the same answer from
// informer events without the lists.
func Estimate(nodes []corev1.Node, pods []corev1.Pod, tmpl *corev1.PodTemplateSpec) int32 {
	used := usageByNode(pods)
	e := newEstimator(tmpl)
	for i := range nodes {
		if e.add(&nodes[i], used[nodes[i].Name]) {
			break
		}
	}
	return e.result(used[unbound])
}

// unbound is the node name under which usage of pods not yet bound to a node
// is kept.
const unbound = ""

// usageByNode sums what the counted pods take on each node; pods not bound
// yet are summed under unbound.
func usageByNode(pods []corev1.Pod) map[string]*usage {
	used := map[string]*usage{}
	for i := range pods {
		p := &pods[i]
		if !counted(p) {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = &usage{requests: corev1.ResourceList{}}
			used[p.Spec.NodeName] = u
		}
		u.add(podRequests(&p.Spec))
	}
	return used
}

// counted reports whether a pod takes room: not finished, as the scheduler
// counts it. A pod not bound yet will take room once it is.
func counted(p *corev1.Pod) bool {
	return p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// estimator sums, node by node, how many pods of one template fit.
type estimator struct {
	tmpl  *corev1.PodTemplateSpec
	req   corev1.ResourceList
	match eligibility
	total int64
}

func newEstimator(tmpl *corev1.PodTemplateSpec) *estimator {
	return &estimator{tmpl: tmpl, req: podRequests(&tmpl.Spec), match: newEligibility(tmpl)}
}

// add counts node n with usage u (nil: nothing bound to it); it reports
// true once the total reached the cap, when further nodes change nothing.
func (e *estimator) add(n *corev1.Node, u *usage) bool {
	if !e.match.eligible(n) {
		return false
	}
	if u == nil {
		u = &usage{}
	}
	e.total += fits(n.Status.Allocatable, u, e.req)
	return e.total >= math.MaxInt32
}

// result is the total less the room the pending pods (summed in pending,
// nil for none) will take once bound.
// A saturated total means unbounded room (nodes without a limit for the
// template) and stays saturated: how far past the cap it got depends on the
// order nodes were added in.
func (e *estimator) result(pending *usage) int32 {
	if e.total >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(max(e.total-displaced(pending, e.req), 0))
}

// displaced returns how many pods requesting req the pending pods take the
// room of: at least one each (a pod slot), and for every resource req names,
// their summed request in units of req, rounded up. Pending pods of the same
// template displace exactly their number.
func displaced(pending *usage, req corev1.ResourceList) int64 {
	if pending == nil || pending.pods <= 0 {
		return 0
	}
	n := pending.pods
	for name, want := range req {
		if want.IsZero() {
			continue
		}
		have, ok := pending.requests[name]
		if !ok || have.Sign() <= 0 {
			continue
		}
		w := want.MilliValue()
		n = max(n, (have.MilliValue()+w-1)/w)
	}
	return n
}

// usage is what the pods bound to one node take.
type usage struct {
	pods     int64
	requests corev1.ResourceList
}

// add counts one more pod requesting req.
func (u *usage) add(req corev1.ResourceList) {
	u.pods++
	for name, q := range req {
		cur := u.requests[name]
		cur.Add(q)
		u.requests[name] = cur
	}
}

// remove takes back what add counted for the same req. Quantity arithmetic
// is exact, so add then remove leaves the sums as they were.
func (u *usage) remove(req corev1.ResourceList) {
	u.pods--
	for name, q := range req {
		cur := u.requests[name]
		cur.Sub(q)
		u.requests[name] = cur
	}
}

// fits returns how many pods requesting req fit in what alloc leaves after u.
func fits(alloc corev1.ResourceList, u *usage, req corev1.ResourceList) int64 {
	best := int64(math.MaxInt32)
	if q, ok := alloc[corev1.ResourcePods]; ok {
		best = max(q.Value()-u.pods, 0)
	}
	for name, want := range req {
		if want.IsZero() {
			continue
		}
		have, ok := alloc[name]
		if !ok {
			return 0
		}
		free := have.DeepCopy()
		if used, ok := u.requests[name]; ok {
			free.Sub(used)
		}
		if free.Sign() <= 0 {
			return 0
		}
		// Milli-units keep cpu exact; memory in bytes stays well inside int64.
		n := free.MilliValue() / want.MilliValue()
		best = min(best, n)
	}
	return best
}

// eligibility says whether a pod of a template could be placed on a node at
// all (eligible): the node is Ready and not cordoned, its taints are
// tolerated and it matches the template's node selector and required node
// affinity. The template's selectors are built once, for checking many nodes.
type eligibility struct {
	tolerations []corev1.Toleration
	selector    labels.Selector // nil: no node selector
	affinity    *nodeaffinity.LazyErrorNodeSelector
}

func newEligibility(tmpl *corev1.PodTemplateSpec) eligibility {
	e := eligibility{tolerations: tmpl.Spec.Tolerations}
	if len(tmpl.Spec.NodeSelector) > 0 {
		e.selector = labels.SelectorFromSet(tmpl.Spec.NodeSelector)
	}
	if a := tmpl.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		e.affinity = nodeaffinity.NewLazyErrorNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution)
	}
	return e
}

func (e eligibility) eligible(n *corev1.Node) bool {
	if n.Spec.Unschedulable || !ready(n) {
		return false
	}
	// No logger: with comparison operators off the helper never logs.
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(logr.Discard(), n.Spec.Taints, e.tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); bad {
		return false
	}
	if e.selector != nil && !e.selector.Matches(labels.Set(n.Labels)) {
		return false
	}
	if e.affinity != nil {
		ok, err := e.affinity.Match(n)
		if err != nil || !ok {
			return false
		}
	}
	return true
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// podRequests sums container requests, takes the larger of that and any single
// init container (sidecars, with restartPolicy Always, add to the sum), and
// adds the pod overhead, as the scheduler does.
func podRequests(spec *corev1.PodSpec) corev1.ResourceList {
	sum := corev1.ResourceList{}
	add := func(dst corev1.ResourceList, src corev1.ResourceList) {
		for name, q := range src {
			cur := dst[name]
			cur.Add(q)
			dst[name] = cur
		}
	}
	for i := range spec.Containers {
		add(sum, spec.Containers[i].Resources.Requests)
	}
	sidecars := corev1.ResourceList{}
	initMax := corev1.ResourceList{}
	for i := range spec.InitContainers {
		c := &spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			add(sidecars, c.Resources.Requests)
			continue
		}
		// A regular init container runs alongside the sidecars started before it.
		need := corev1.ResourceList{}
		add(need, sidecars)
		add(need, c.Resources.Requests)
		for name, q := range need {
			if cur, ok := initMax[name]; !ok || q.Cmp(cur) > 0 {
				initMax[name] = q
			}
		}
	}
	add(sum, sidecars)
	for name, q := range initMax {
		if cur, ok := sum[name]; !ok || q.Cmp(cur) > 0 {
			sum[name] = q
		}
	}
	add(sum, spec.Overhead)
	return sum
}
