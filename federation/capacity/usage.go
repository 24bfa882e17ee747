package capacity

import (
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
)

// Usage is the part of a member's Counters that comes from its pods: per
// node name, what the non-terminal pods bound to it take, and what those
// not bound yet take. With the member's nodes it is everything Estimate and
// Summary read, so a replica that does not cache the member's pods can
// estimate from the member's nodes and a Usage its owner published. Its
// size grows with the member's nodes, never with its pods.
type Usage struct {
	// Nodes maps a node name to the usage of the pods bound to it. A node
	// the usage's publisher had not seen yet may be named: a pod's binding
	// can be seen before its node.
	Nodes map[string]NodeUsage
	// Pending is the usage of the pods not bound to a node yet.
	Pending NodeUsage
}

// NodeUsage is what a set of pods takes: their number and their summed
// requests (as the scheduler sums a pod's containers, init containers and
// overhead).
type NodeUsage struct {
	Pods     int64
	Requests corev1.ResourceList
}

// Usage returns a consistent snapshot of the pod-derived part of the
// counters: a copy, taken under their lock, that later events do not change.
func (c *Counters) Usage() Usage {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := Usage{Nodes: make(map[string]NodeUsage, len(c.used))}
	for name, u := range c.used {
		nu := NodeUsage{Pods: u.pods, Requests: copyList(u.requests)}
		if name == unbound {
			out.Pending = nu
			continue
		}
		out.Nodes[name] = nu
	}
	return out
}

// SetUsage replaces the pod-derived part of the counters by u (copied), for
// counters fed by node events only: their estimates and summary are then
// those of counters fed every pod u was taken from. It refuses a usage that
// Validate refuses, leaving the counters as they were.
func (c *Counters) SetUsage(u Usage) error {
	if err := u.Validate(); err != nil {
		return fmt.Errorf("setting the pod usage: %w", err)
	}
	used := make(map[string]*usage, len(u.Nodes)+1)
	for name, nu := range u.Nodes {
		used[name] = &usage{pods: nu.Pods, requests: copyList(nu.Requests)}
	}
	if u.Pending.Pods > 0 {
		used[unbound] = &usage{pods: u.Pending.Pods, requests: copyList(u.Pending.Requests)}
	}
	c.mu.Lock()
	c.used = used
	c.usageSet = true
	c.version++
	c.mu.Unlock()
	return nil
}

// hasUsage reports whether SetUsage has given the counters a usage.
func (c *Counters) hasUsage() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.usageSet
}

// Validate refuses what no counters could hold: an empty node name (it
// would stand for the pending pods), a negative pod count or a negative
// request, and requests without any pod taking them.
func (u Usage) Validate() error {
	for name, nu := range u.Nodes {
		if name == unbound {
			return fmt.Errorf("a node with an empty name")
		}
		if err := nu.validate(); err != nil {
			return fmt.Errorf("node %q: %w", name, err)
		}
	}
	if err := u.Pending.validate(); err != nil {
		return fmt.Errorf("pending pods: %w", err)
	}
	return nil
}

func (nu NodeUsage) validate() error {
	if nu.Pods < 0 {
		return fmt.Errorf("negative pod count %d", nu.Pods)
	}
	for name, q := range nu.Requests {
		if name == "" {
			return fmt.Errorf("a request with an empty resource name")
		}
		if q.Sign() < 0 {
			return fmt.Errorf("negative %s request %s", name, q.String())
		}
		if nu.Pods == 0 && !q.IsZero() {
			return fmt.Errorf("%s requested by no pod", name)
		}
	}
	return nil
}

// clone is a deep copy of u.
func (u Usage) clone() Usage {
	out := Usage{Pending: NodeUsage{Pods: u.Pending.Pods, Requests: copyList(u.Pending.Requests)}}
	if u.Nodes != nil {
		out.Nodes = make(map[string]NodeUsage, len(u.Nodes))
		for name, nu := range u.Nodes {
			out.Nodes[name] = NodeUsage{Pods: nu.Pods, Requests: copyList(nu.Requests)}
		}
	}
	return out
}

func copyList(l corev1.ResourceList) corev1.ResourceList {
	out := make(corev1.ResourceList, len(l))
	for name, q := range maps.All(l) {
		out[name] = q.DeepCopy()
	}
	return out
}
