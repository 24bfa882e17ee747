package autoscaler

import (
	"context"
	"fmt"
	"sync"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/autoscale"
)

// Engaged finds members by name, such as the member registry.
type Engaged interface {
	// Cluster returns the engaged member's clients and caches.
	Cluster(name string) (cluster.Cluster, bool)
}

// ClusterMembers adapts engaged member clusters to Members: pods from the
// member cache the workers already keep, metrics and HorizontalPodAutoscalers
// read live, with the member's client configuration (and so its rate limits).
type ClusterMembers struct {
	Engaged Engaged

	mu      sync.Mutex
	metrics map[string]memberMetrics
}

// memberMetrics is a metrics client built for one member configuration; a
// refreshed member (new credentials) gets a new one.
type memberMetrics struct {
	cfg    *rest.Config
	client metricsclient.Interface
}

// Member implements Members.
func (c *ClusterMembers) Member(name string) (Member, bool) {
	cl, ok := c.Engaged.Cluster(name)
	if !ok {
		return nil, false
	}
	return &clusterMember{cl: cl, metrics: func() (metricsclient.Interface, error) { return c.metricsFor(name, cl.GetConfig()) }}, true
}

func (c *ClusterMembers) metricsFor(name string, cfg *rest.Config) (metricsclient.Interface, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.metrics[name]; ok && m.cfg == cfg {
		return m.client, nil
	}
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("building the metrics.k8s.io client of member %s: %w", name, err)
	}
	if c.metrics == nil {
		c.metrics = map[string]memberMetrics{}
	}
	c.metrics[name] = memberMetrics{cfg: cfg, client: mc}
	return mc, nil
}

type clusterMember struct {
	cl      cluster.Cluster
	metrics func() (metricsclient.Interface, error)
}

func (m *clusterMember) Pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := m.cl.GetCache().List(ctx, &list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (m *clusterMember) PodMetrics(ctx context.Context, namespace string, sel labels.Selector) (map[string]autoscale.Usage, error) {
	mc, err := m.metrics()
	if err != nil {
		return nil, err
	}
	list, err := mc.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("listing pod metrics: %w", err)
	}
	out := make(map[string]autoscale.Usage, len(list.Items))
	for _, pm := range list.Items {
		u := autoscale.Usage{Timestamp: pm.Timestamp.Time, Window: pm.Window.Duration, Containers: make(map[string]corev1.ResourceList, len(pm.Containers))}
		for _, c := range pm.Containers {
			u.Containers[c.Name] = c.Usage
		}
		out[pm.Name] = u
	}
	return out, nil
}

func (m *clusterMember) Autoscalers(ctx context.Context, namespace, name string) ([]string, error) {
	var list autoscalingv2.HorizontalPodAutoscalerList
	if err := m.cl.GetAPIReader().List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing HorizontalPodAutoscalers: %w", err)
	}
	var out []string
	for _, h := range list.Items {
		ref := h.Spec.ScaleTargetRef
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if ref.Kind == "MemberReplicaSet" && ref.Name == name && gv.Group == v1alpha1.GroupVersion.Group {
			out = append(out, h.Name)
		}
	}
	return out, nil
}
