package testcluster

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// NodeName returns the name of the i-th fake node of a cluster.
func (c *Cluster) NodeName(i int) string { return fmt.Sprintf("%s-kwok-%d", c.Name, i) }

func (c *Cluster) createNodes(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building client for nodes: %w", err)
	}
	for i := 0; i < c.opts.Nodes; i++ {
		if err := c.AddNode(ctx, cs, c.NodeName(i)); err != nil {
			return err
		}
	}
	return c.waitNodesReady(ctx, cs)
}

// AddNode registers one more fake node with the cluster's node resources.
func (c *Cluster) AddNode(ctx context.Context, cs kubernetes.Interface, name string) error {
	cpu, mem, pods := c.opts.NodeCPU, c.opts.NodeMemory, c.opts.NodePods
	if cpu == "" {
		cpu = "32"
	}
	if mem == "" {
		mem = "256Gi"
	}
	if pods == 0 {
		pods = 110
	}
	res := corev1.ResourceList{}
	for k, v := range map[corev1.ResourceName]string{
		corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem, corev1.ResourcePods: strconv.Itoa(pods),
	} {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("node %s resource %s=%q: %w", name, k, v, err)
		}
		res[k] = q
	}
	labels := map[string]string{
		"type":                  "kwok",
		KwokNodeKey:             KwokNodeValue,
		corev1.LabelHostname:    name,
		"kubernetes.io/os":      "linux",
		"kubernetes.io/arch":    "amd64",
		"replicafed.io/cluster": c.Name,
	}
	for k, v := range c.opts.NodeLabels {
		labels[k] = v
	}
	annotations := map[string]string{KwokNodeKey: KwokNodeValue}
	if c.metrics != nil {
		annotations[resourceMetricsPathAnnotation] = "/metrics/nodes/" + name + "/metrics/resource"
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: annotations,
		},
		Spec: corev1.NodeSpec{
			Taints: []corev1.Taint{{Key: KwokNodeKey, Value: KwokNodeValue, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.NodeStatus{Capacity: res, Allocatable: res},
	}
	if _, err := cs.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating fake node %s: %w", name, err)
	}
	return nil
}

// waitNodesReady waits until every fake node is Ready and has lost the
// not-ready taint, so pods can be scheduled onto it.
func (c *Cluster) waitNodesReady(ctx context.Context, cs kubernetes.Interface) error {
	return waitFor(ctx, nil, "fake nodes Ready and untainted", func(ctx context.Context) error {
		nodes, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: KwokNodeKey + "=" + KwokNodeValue})
		if err != nil {
			return err
		}
		if len(nodes.Items) < c.opts.Nodes {
			return fmt.Errorf("%d of %d nodes exist", len(nodes.Items), c.opts.Nodes)
		}
		for _, n := range nodes.Items {
			if !NodeReady(&n) {
				return fmt.Errorf("node %s not Ready", n.Name)
			}
			for _, t := range n.Spec.Taints {
				if t.Key == corev1.TaintNodeNotReady || t.Key == corev1.TaintNodeUnreachable {
					return fmt.Errorf("node %s still tainted %s", n.Name, t.Key)
				}
			}
		}
		return nil
	})
}

// NodeReady reports whether n's Ready condition is True.
func NodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
