package autoscaler

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/metrics/pkg/apis/custom_metrics/v1beta2"
	externalv1beta1 "k8s.io/metrics/pkg/apis/external_metrics/v1beta1"
	custommetrics "k8s.io/metrics/pkg/client/custom_metrics"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/autoscale"
)

// The aggregated metrics APIs a member may serve.
const (
	customMetricsGroup   = "custom.metrics.k8s.io"
	externalMetricsGroup = "external.metrics.k8s.io"
)

// CustomMetric reads a Pods or Object metric from the member's
// custom.metrics.k8s.io, or an External metric from its
// external.metrics.k8s.io, after checking (by discovery) that the member
// serves that API. An object the member does not have is no value and no
// error.
func (m *clusterMember) CustomMetric(ctx context.Context, namespace string, sel labels.Selector, spec v1alpha1.MetricSpec) (autoscale.Values, error) {
	c, err := m.clients()
	if err != nil {
		return autoscale.Values{}, err
	}
	switch {
	case spec.Pods != nil:
		cc, err := m.custom(ctx, c)
		if err != nil {
			return autoscale.Values{}, err
		}
		msel, err := metricSelector(spec.Pods.Metric.Selector)
		if err != nil {
			return autoscale.Values{}, err
		}
		list, err := bounded(ctx, func() (*v1beta2.MetricValueList, error) {
			return cc.NamespacedMetrics(namespace).GetForObjects(schema.GroupKind{Kind: "Pod"}, sel, spec.Pods.Metric.Name, msel)
		})
		if err != nil {
			return autoscale.Values{}, fmt.Errorf("reading pods metric %s: %w", spec.Pods.Metric.Name, err)
		}
		out := autoscale.Values{Pods: make(map[string]autoscale.PodValue, len(list.Items))}
		for _, it := range list.Items {
			if it.DescribedObject.Kind == "Pod" {
				out.Pods[it.DescribedObject.Name] = autoscale.PodValue{Value: it.Value.MilliValue(), Timestamp: it.Timestamp.Time}
			}
		}
		return out, nil
	case spec.Object != nil:
		return m.objectMetric(ctx, c, namespace, spec.Object)
	case spec.External != nil:
		if err := m.serves(ctx, c, externalMetricsGroup); err != nil {
			return autoscale.Values{}, err
		}
		msel, err := metricSelector(spec.External.Metric.Selector)
		if err != nil {
			return autoscale.Values{}, err
		}
		list, err := bounded(ctx, func() (*externalv1beta1.ExternalMetricValueList, error) {
			return c.external.NamespacedMetrics(namespace).List(spec.External.Metric.Name, msel)
		})
		if err != nil {
			return autoscale.Values{}, fmt.Errorf("reading external metric %s: %w", spec.External.Metric.Name, err)
		}
		if len(list.Items) == 0 {
			// As upstream's metrics client: no series is no data.
			return autoscale.Values{}, fmt.Errorf("external metric %s: no series returned", spec.External.Metric.Name)
		}
		out := autoscale.Values{}
		for _, it := range list.Items {
			out.Values = append(out.Values, it.Value.MilliValue())
		}
		return out, nil
	}
	return autoscale.Values{}, fmt.Errorf("metric of type %q is not a custom or external metric", spec.Type)
}

func (m *clusterMember) objectMetric(ctx context.Context, c *memberMetrics, namespace string, src *v1alpha1.ObjectMetricSource) (autoscale.Values, error) {
	cc, err := m.custom(ctx, c)
	if err != nil {
		return autoscale.Values{}, err
	}
	msel, err := metricSelector(src.Metric.Selector)
	if err != nil {
		return autoscale.Values{}, err
	}
	ref := src.DescribedObject
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return autoscale.Values{}, fmt.Errorf("parsing describedObject.apiVersion %q: %w", ref.APIVersion, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: ref.Kind}
	metrics := cc.NamespacedMetrics(namespace)
	if gk == (schema.GroupKind{Kind: "Namespace"}) {
		// Metrics of a namespace are root-scoped, as upstream reads them.
		metrics = cc.RootScopedMetrics()
	}
	v, err := bounded(ctx, func() (*v1beta2.MetricValue, error) { return metrics.GetForObject(gk, ref.Name, src.Metric.Name, msel) })
	switch {
	case apierrors.IsNotFound(err), meta.IsNoMatchError(err):
		// The member does not have the object (or its kind): it adds
		// nothing to the sum, and is not missing data.
		return autoscale.Values{}, nil
	case err != nil:
		return autoscale.Values{}, fmt.Errorf("reading metric %s of %s %s: %w", src.Metric.Name, ref.Kind, ref.Name, err)
	}
	return autoscale.Values{Values: []int64{v.Value.MilliValue()}}, nil
}

// custom returns the custom metrics client of the version the member
// prefers among those this client knows.
func (m *clusterMember) custom(ctx context.Context, c *memberMetrics) (custommetrics.CustomMetricsClient, error) {
	if err := m.serves(ctx, c, customMetricsGroup); err != nil {
		return nil, err
	}
	var group metav1.APIGroup
	for _, g := range m.groups.Groups {
		if g.Name == customMetricsGroup {
			group = g
		}
	}
	versions := append([]metav1.GroupVersionForDiscovery{group.PreferredVersion}, group.Versions...)
	for _, v := range versions {
		gv, err := schema.ParseGroupVersion(v.GroupVersion)
		if err == nil && slices.Contains(custommetrics.MetricVersions, gv) {
			return m.parent.customFor(c, gv)
		}
	}
	return nil, fmt.Errorf("%s is served in no version this client reads", customMetricsGroup)
}

// serves says whether the member serves group, from one discovery read per
// computation.
func (m *clusterMember) serves(ctx context.Context, c *memberMetrics, group string) error {
	if m.groups == nil {
		if err := ctx.Err(); err != nil {
			return err
		}
		groups, err := bounded(ctx, c.discovery.ServerGroups)
		if err != nil {
			return fmt.Errorf("discovering the member's APIs: %w", err)
		}
		m.groups = groups
	}
	for _, g := range m.groups.Groups {
		if g.Name == group {
			return nil
		}
	}
	return fmt.Errorf("%s not served", group)
}

// bounded runs a call of a client that takes no context and returns when
// it does or ctx ends, whichever comes first (the call itself ends at the
// client's own timeout, ClusterMembers.Timeout).
func bounded[T any](ctx context.Context, call func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	go func() {
		v, err := call()
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, fmt.Errorf("no answer: %w", ctx.Err())
	}
}

func metricSelector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		return nil, fmt.Errorf("parsing the metric selector: %w", err)
	}
	return sel, nil
}
