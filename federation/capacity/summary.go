package capacity

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Summary is a member's size at a glance (MemberCluster status).
type Summary struct {
	// Nodes counts every node; Ready those Ready and not cordoned.
	Nodes, Ready int32
	// Allocatable sums the Ready nodes' allocatable cpu, memory and pods.
	Allocatable corev1.ResourceList
	// Free sums, over those nodes, what their allocatable leaves after the
	// requests (and pod count) of the non-terminal pods bound to them; an
	// overcommitted node adds nothing.
	Free corev1.ResourceList
}

// summarised are the resources a Summary reports.
var summarised = []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}

// Summarize sums nodes and what the pods bound to them request.
func Summarize(nodes []corev1.Node, pods []corev1.Pod) Summary {
	used := map[string]corev1.ResourceList{}
	for i := range pods {
		p := &pods[i]
		if p.Spec.NodeName == "" || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		u := used[p.Spec.NodeName]
		if u == nil {
			u = corev1.ResourceList{}
			used[p.Spec.NodeName] = u
		}
		addTo(u, podRequests(&p.Spec))
		addTo(u, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(1, resource.DecimalSI)})
	}
	s := Summary{Allocatable: corev1.ResourceList{}, Free: corev1.ResourceList{}}
	for i := range nodes {
		n := &nodes[i]
		s.Nodes++
		if !ready(n) || n.Spec.Unschedulable {
			continue
		}
		s.Ready++
		for _, name := range summarised {
			alloc, ok := n.Status.Allocatable[name]
			if !ok {
				continue
			}
			addTo(s.Allocatable, corev1.ResourceList{name: alloc})
			free := alloc.DeepCopy()
			free.Sub(used[n.Name][name])
			if free.Sign() < 0 {
				free = *resource.NewQuantity(0, alloc.Format)
			}
			addTo(s.Free, corev1.ResourceList{name: free})
		}
	}
	return s
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}
