package capacity

import (
	"iter"

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
	used := usageByNode(pods)
	all := func(yield func(string, *corev1.Node) bool) {
		for i := range nodes {
			if !yield(nodes[i].Name, &nodes[i]) {
				return
			}
		}
	}
	return summarize(all, func(node string) corev1.ResourceList {
		if u := used[node]; u != nil {
			return u.withPods()
		}
		return nil
	})
}

// summarize sums the nodes given, with used giving what the pods bound to
// a node take (pods as a resource too).
func summarize(nodes iter.Seq2[string, *corev1.Node], used func(node string) corev1.ResourceList) Summary {
	s := Summary{Allocatable: corev1.ResourceList{}, Free: corev1.ResourceList{}}
	for name, n := range nodes {
		s.Nodes++
		if !ready(n) || n.Spec.Unschedulable {
			continue
		}
		s.Ready++
		u := used(name)
		for _, res := range summarised {
			alloc, ok := n.Status.Allocatable[res]
			if !ok {
				continue
			}
			addTo(s.Allocatable, corev1.ResourceList{res: alloc})
			free := alloc.DeepCopy()
			free.Sub(u[res])
			if free.Sign() < 0 {
				free = *resource.NewQuantity(0, alloc.Format)
			}
			addTo(s.Free, corev1.ResourceList{res: free})
		}
	}
	return s
}

// withPods is the usage as a resource list with the pod count as "pods".
func (u *usage) withPods() corev1.ResourceList {
	out := make(corev1.ResourceList, len(u.requests)+1)
	addTo(out, u.requests)
	addTo(out, corev1.ResourceList{corev1.ResourcePods: *resource.NewQuantity(u.pods, resource.DecimalSI)})
	return out
}

func addTo(dst, src corev1.ResourceList) {
	for name, q := range src {
		cur := dst[name]
		cur.Add(q)
		dst[name] = cur
	}
}
