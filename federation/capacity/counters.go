package capacity

import (
	"encoding/json"
	"maps"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// Counters keep one member's capacity facts up to date from informer
// events, so an estimate reads each node's running totals instead of
// listing and summing every pod of the member: per node its scheduling
// facts (the Node object as the informer holds it), and per node name the
// count and summed requests of the non-terminal pods bound to it (pods not
// bound yet under the empty name). Estimate
// gives exactly what the list-based Estimate gives for the same objects.
//
// Its handlers (PodHandler, NodeHandler) go on the member's shared
// informers; they never modify the objects. Any informer transform must
// keep what is read here: a pod's spec.nodeName, status.phase and the
// requests of its containers, init containers (with restartPolicy) and
// overhead; a node's labels, taints, unschedulable, Ready condition and
// allocatable. Safe for concurrent use.
type Counters struct {
	mu    sync.RWMutex
	nodes map[string]*corev1.Node
	used  map[string]*usage
	// version changes with every change an estimate could see.
	version uint64
	// usageSet is true once SetUsage replaced what pod events would count
	// (counters fed a published Usage instead of pods).
	usageSet bool

	memoMu sync.Mutex
	memo   map[string]memoEntry
}

type memoEntry struct {
	version uint64
	free    int32
}

// memoSize bounds the remembered estimates (one per template shape).
const memoSize = 256

// NewCounters returns empty counters.
func NewCounters() *Counters {
	return &Counters{nodes: map[string]*corev1.Node{}, used: map[string]*usage{}, memo: map[string]memoEntry{}}
}

// Estimate is Estimate over the nodes and pods the counters have seen. It
// walks the member's nodes, not its pods, and answers from memory while
// nothing changed since the last estimate for a template of the same
// scheduling shape (requests, tolerations, node selector and affinity).
func (c *Counters) Estimate(tmpl *corev1.PodTemplateSpec) int32 {
	key, keyed := shapeKey(tmpl)
	c.mu.RLock()
	v := c.version
	if keyed {
		c.memoMu.Lock()
		m, ok := c.memo[key]
		c.memoMu.Unlock()
		if ok && m.version == v {
			c.mu.RUnlock()
			return m.free
		}
	}
	e := newEstimator(tmpl)
	for name, n := range c.nodes {
		if e.add(n, c.used[name]) {
			break
		}
	}
	free := e.result(c.used[unbound])
	c.mu.RUnlock()
	if keyed {
		c.memoMu.Lock()
		if len(c.memo) >= memoSize {
			clear(c.memo)
		}
		c.memo[key] = memoEntry{version: v, free: free}
		c.memoMu.Unlock()
	}
	return free
}

// Summary is Summarize over the nodes and pods the counters have seen.
func (c *Counters) Summary() Summary {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return summarize(maps.All(c.nodes), func(node string) corev1.ResourceList {
		u := c.used[node]
		if u == nil {
			return nil
		}
		return u.withPods()
	})
}

// shapeKey names what of a template an estimate depends on.
func shapeKey(tmpl *corev1.PodTemplateSpec) (string, bool) {
	shape := struct {
		Requests    corev1.ResourceList  `json:"r,omitempty"`
		Tolerations []corev1.Toleration  `json:"t,omitempty"`
		Selector    map[string]string    `json:"s,omitempty"`
		Affinity    *corev1.NodeSelector `json:"a,omitempty"`
	}{Requests: podRequests(&tmpl.Spec), Tolerations: tmpl.Spec.Tolerations, Selector: tmpl.Spec.NodeSelector}
	if a := tmpl.Spec.Affinity; a != nil && a.NodeAffinity != nil {
		shape.Affinity = a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
	}
	raw, err := json.Marshal(shape)
	if err != nil {
		return "", false
	}
	return string(raw), true
}

// PodHandler returns the event handler for the member's pod informer.
func (c *Counters) PodHandler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok && counted(p) {
				c.mu.Lock()
				c.addPod(p)
				c.mu.Unlock()
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*corev1.Pod)
			cur, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 || sameContribution(old, cur) {
				return
			}
			c.mu.Lock()
			if counted(old) {
				c.removePod(old)
			}
			if counted(cur) {
				c.addPod(cur)
			}
			c.mu.Unlock()
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok && counted(p) {
				c.mu.Lock()
				c.removePod(p)
				c.mu.Unlock()
			}
		},
	}
}

// NodeHandler returns the event handler for the member's node informer.
func (c *Counters) NodeHandler() toolscache.ResourceEventHandler {
	set := func(obj any) {
		n, ok := obj.(*corev1.Node)
		if !ok {
			return
		}
		c.mu.Lock()
		old := c.nodes[n.Name]
		c.nodes[n.Name] = n
		if old == nil || !sameNodeFacts(old, n) {
			c.version++
		}
		c.mu.Unlock()
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				c.mu.Lock()
				delete(c.nodes, n.Name)
				c.version++
				c.mu.Unlock()
			}
		},
	}
}

// addPod counts a non-terminal pod; the caller holds mu. Usage is
// kept by node name whether or not the node is known yet: a pod's event may
// come before its node's.
func (c *Counters) addPod(p *corev1.Pod) {
	u := c.used[p.Spec.NodeName]
	if u == nil {
		u = &usage{requests: corev1.ResourceList{}}
		c.used[p.Spec.NodeName] = u
	}
	u.add(podRequests(&p.Spec))
	c.version++
}

// removePod takes back what addPod counted for the same pod; the caller
// holds mu.
func (c *Counters) removePod(p *corev1.Pod) {
	u := c.used[p.Spec.NodeName]
	if u == nil {
		return
	}
	u.remove(podRequests(&p.Spec))
	if u.pods <= 0 {
		delete(c.used, p.Spec.NodeName)
	}
	c.version++
}

// sameContribution reports whether two versions of a pod take the same
// room: both uncounted, or on the same node (or both unbound) with the same
// requests.
// Most pod updates (status, conditions) end here without any arithmetic.
func sameContribution(a, b *corev1.Pod) bool {
	ca, cb := counted(a), counted(b)
	if ca != cb {
		return false
	}
	if !ca {
		return true
	}
	return a.Spec.NodeName == b.Spec.NodeName && sameRequests(&a.Spec, &b.Spec)
}

// sameRequests compares what podRequests reads of two pod specs.
func sameRequests(a, b *corev1.PodSpec) bool {
	if len(a.Containers) != len(b.Containers) || len(a.InitContainers) != len(b.InitContainers) ||
		!sameList(a.Overhead, b.Overhead) {
		return false
	}
	for i := range a.Containers {
		if !sameList(a.Containers[i].Resources.Requests, b.Containers[i].Resources.Requests) {
			return false
		}
	}
	for i := range a.InitContainers {
		x, y := &a.InitContainers[i], &b.InitContainers[i]
		if !reflect.DeepEqual(x.RestartPolicy, y.RestartPolicy) || !sameList(x.Resources.Requests, y.Resources.Requests) {
			return false
		}
	}
	return true
}

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for name, q := range a {
		o, ok := b[name]
		if !ok || q.Cmp(o) != 0 {
			return false
		}
	}
	return true
}

// sameNodeFacts reports whether two versions of a node look alike to an
// estimate (heartbeats and other status churn do not).
func sameNodeFacts(a, b *corev1.Node) bool {
	return a.Spec.Unschedulable == b.Spec.Unschedulable && ready(a) == ready(b) &&
		maps.Equal(a.Labels, b.Labels) && reflect.DeepEqual(a.Spec.Taints, b.Spec.Taints) &&
		sameList(a.Status.Allocatable, b.Status.Allocatable)
}
