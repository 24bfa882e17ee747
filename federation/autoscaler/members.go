package autoscaler

import (
	"context"
	"fmt"
	"sync"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	custommetrics "k8s.io/metrics/pkg/client/custom_metrics"
	externalmetrics "k8s.io/metrics/pkg/client/external_metrics"
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
// member cache the workers already keep (read live for a member whose pods
// are not cached here), metrics and HorizontalPodAutoscalers read live,
// with the member's client configuration (and so its rate limits).
type ClusterMembers struct {
	Engaged Engaged
	// PodsCached says whether this replica caches a member's pods; nil
	// means every member's. The pods of a member whose pods are not cached
	// (sharding: another replica owns it) are listed from its API server,
	// by namespace and selector: a list from its cache would start a pod
	// informer caching every pod of the member.
	PodsCached func(member string) bool
	// Timeout bounds one request to a member's custom or external metrics
	// API, whose clients take no context; 10 s when zero.
	Timeout time.Duration

	mu      sync.Mutex
	metrics map[string]*memberMetrics
}

// memberMetrics are the metrics clients built for one member
// configuration; a refreshed member (new credentials) gets new ones.
type memberMetrics struct {
	cfg       *rest.Config
	client    metricsclient.Interface
	discovery discovery.DiscoveryInterface
	external  externalmetrics.ExternalMetricsClient
	// custom are custom.metrics.k8s.io clients by API version; the member
	// says which it serves.
	custom map[schema.GroupVersion]custommetrics.CustomMetricsClient
	mapper meta.RESTMapper
	// bounded is cfg with the request timeout, for the clients that take
	// no context.
	bounded *rest.Config
}

// Member implements Members.
func (c *ClusterMembers) Member(name string) (Member, bool) {
	cl, ok := c.Engaged.Cluster(name)
	if !ok {
		return nil, false
	}
	return &clusterMember{
		cl: cl, parent: c, clients: func() (*memberMetrics, error) { return c.clientsFor(name, cl) },
		podsCached: c.PodsCached == nil || c.PodsCached(name),
	}, true
}

func (c *ClusterMembers) clientsFor(name string, cl cluster.Cluster) (*memberMetrics, error) {
	cfg := cl.GetConfig()
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.metrics[name]; ok && m.cfg == cfg {
		return m, nil
	}
	m := &memberMetrics{cfg: cfg, mapper: cl.GetRESTMapper(), custom: map[schema.GroupVersion]custommetrics.CustomMetricsClient{}}
	var err error
	if m.client, err = metricsclient.NewForConfig(cfg); err != nil {
		return nil, fmt.Errorf("building the metrics.k8s.io client of member %s: %w", name, err)
	}
	m.bounded = rest.CopyConfig(cfg)
	m.bounded.Timeout = c.Timeout
	if m.bounded.Timeout == 0 {
		m.bounded.Timeout = 10 * time.Second
	}
	if m.discovery, err = discovery.NewDiscoveryClientForConfig(m.bounded); err != nil {
		return nil, fmt.Errorf("building the discovery client of member %s: %w", name, err)
	}
	if m.external, err = externalmetrics.NewForConfig(m.bounded); err != nil {
		return nil, fmt.Errorf("building the external.metrics.k8s.io client of member %s: %w", name, err)
	}
	if c.metrics == nil {
		c.metrics = map[string]*memberMetrics{}
	}
	c.metrics[name] = m
	return m, nil
}

// customFor returns the custom metrics client of one API version.
func (c *ClusterMembers) customFor(m *memberMetrics, gv schema.GroupVersion) (custommetrics.CustomMetricsClient, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if cc, ok := m.custom[gv]; ok {
		return cc, nil
	}
	cc, err := custommetrics.NewForVersionForConfig(rest.CopyConfig(m.bounded), m.mapper, gv)
	if err != nil {
		return nil, fmt.Errorf("building the %s client: %w", gv, err)
	}
	m.custom[gv] = cc
	return cc, nil
}

type clusterMember struct {
	cl      cluster.Cluster
	clients func() (*memberMetrics, error)
	parent  *ClusterMembers
	// groups is the member's discovery answer, read once per computation.
	groups *metav1.APIGroupList
	// podsCached: the member's pods are in its cache here.
	podsCached bool
}

// Pods lists the pods in namespace that sel matches: from the member cache,
// or, when the member's pods are not cached here, from its API server (an
// uncached read, so no informer starts).
func (m *clusterMember) Pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error) {
	var list corev1.PodList
	var from client.Reader = m.cl.GetCache()
	if !m.podsCached {
		from = m.cl.GetAPIReader()
	}
	if err := from.List(ctx, &list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	out := make([]*corev1.Pod, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (m *clusterMember) PodMetrics(ctx context.Context, namespace string, sel labels.Selector) (map[string]autoscale.Usage, error) {
	c, err := m.clients()
	if err != nil {
		return nil, err
	}
	list, err := c.client.MetricsV1beta1().PodMetricses(namespace).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
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
