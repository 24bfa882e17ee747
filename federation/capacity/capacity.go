// Package capacity estimates how many more pods of a template fit in a member
// cluster, from that member's nodes and the pods bound to them. The planner
// uses the estimate to keep replicas away from members that cannot run them.
//
// The estimate is deliberately coarse, like the scheduler's first filters:
// node readiness and cordoning, NoSchedule/NoExecute taints the template does
// not tolerate, the template's nodeSelector and required node affinity, and
// the allocatable cpu, memory and pod count minus what bound pods request.
// It ignores pod affinity, topology spread and extended resources other than
// those the template requests; the planner's unschedulable feedback covers
// what it misses.
package capacity

import (
	"math"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1helpers "k8s.io/component-helpers/scheduling/corev1"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/klog/v2"
)

// Estimate returns how many more pods of tmpl fit on nodes, given every pod
// currently known in the member (only non-terminal pods bound to a node count).
// The result is capped at math.MaxInt32.
func Estimate(nodes []corev1.Node, pods []corev1.Pod, tmpl *corev1.PodTemplateSpec) int32 {
	req := podRequests(&tmpl.Spec)
	used := make(map[string]*usage, len(nodes))
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = &usage{requests: corev1.ResourceList{}}
			used[p.Spec.NodeName] = u
		}
		u.pods++
		for name, q := range podRequests(&p.Spec) {
			cur := u.requests[name]
			cur.Add(q)
			u.requests[name] = cur
		}
	}
	var total int64
	for i := range nodes {
		n := &nodes[i]
		if !Eligible(n, tmpl) {
			continue
		}
		u := used[n.Name]
		if u == nil {
			u = &usage{requests: corev1.ResourceList{}}
		}
		total += fits(n.Status.Allocatable, u, req)
		if total >= math.MaxInt32 {
			return math.MaxInt32
		}
	}
	return int32(total)
}

type usage struct {
	pods     int64
	requests corev1.ResourceList
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

// Eligible reports whether a pod of tmpl could be placed on n at all: the node
// is Ready and not cordoned, its taints are tolerated and it matches the
// template's node selector and required node affinity.
func Eligible(n *corev1.Node, tmpl *corev1.PodTemplateSpec) bool {
	if n.Spec.Unschedulable || !ready(n) {
		return false
	}
	if _, bad := corev1helpers.FindMatchingUntoleratedTaint(klog.Background(), n.Spec.Taints, tmpl.Spec.Tolerations, func(t *corev1.Taint) bool {
		return t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute
	}, false); bad {
		return false
	}
	if len(tmpl.Spec.NodeSelector) > 0 && !labels.SelectorFromSet(tmpl.Spec.NodeSelector).Matches(labels.Set(n.Labels)) {
		return false
	}
	if a := tmpl.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		ok, err := nodeaffinity.NewLazyErrorNodeSelector(a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution).Match(n)
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
