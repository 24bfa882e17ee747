package autoscale

import (
	"errors"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Values is one member's answer for one Pods, Object or External metric of
// the spec.
type Values struct {
	// Pods are the pods' values of a Pods metric, by pod name.
	Pods map[string]PodValue
	// Values are an Object metric's value (one, or none when the member
	// does not have the object) or an External metric's series, in
	// milli-units.
	Values []int64
	// Missing, when set, says why the member could not answer (its
	// custom.metrics.k8s.io or external.metrics.k8s.io not served, or not
	// answering): its data counts as missing, and nothing scales down.
	Missing string
}

// PodValue is one pod's value of a Pods metric, in milli-units.
type PodValue struct {
	Value     int64
	Timestamp time.Time
}

// podsMetric is upstream's plain-metric calculation (GetMetricReplicas)
// over the pods of every member pooled and keyed by member and UID: the
// mean per pod against averageValue; pending pods are unready, pods
// without a value (or in a member that could not answer) are missing.
func podsMetric(idx int, spec v1alpha1.MetricSpec, current int32, members []Member, tolerance float64) (metricResult, error) {
	src := spec.Pods
	want, err := positive("averageValue", src.Target.AverageValue)
	if err != nil {
		return metricResult{}, fmt.Errorf("pods metric %s: %w", src.Metric.Name, err)
	}
	g := grouped{metrics: map[PodKey]sample{}, unready: map[PodKey]sample{}, missing: map[PodKey]sample{}}
	for _, m := range members {
		v := m.Custom[idx]
		for _, p := range m.Pods {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
				continue
			}
			g.podCount++
			key := PodKey{Member: m.Name, UID: p.UID}
			if p.Status.Phase == corev1.PodPending {
				g.unready[key] = sample{}
				continue
			}
			pv, ok := v.Pods[p.Name]
			// A value older than the pod belongs to an earlier pod of
			// the same name.
			if !ok || v.Missing != "" || pv.Timestamp.Before(p.CreationTimestamp.Time) {
				g.missing[key] = sample{}
				continue
			}
			g.ready++
			g.metrics[key] = sample{value: pv.Value}
		}
	}
	if g.podCount == 0 {
		return metricResult{}, errors.New("no pods of the target found in any member")
	}
	if len(g.metrics) == 0 {
		return metricResult{}, fmt.Errorf("pods metric %s: %w", src.Metric.Name, errNoMetrics)
	}
	g.fallback = func(sample) int64 { return want }
	ratio := func(m map[PodKey]sample) float64 { return float64(average(m)) / float64(want) }
	status := v1alpha1.MetricStatus{Type: spec.Type, Pods: &v1alpha1.PodsMetricStatus{
		Metric: src.Metric, Current: v1alpha1.MetricValueStatus{AverageValue: milli(average(g.metrics))}}}
	return metricResult{replicas: g.replicas(current, ratio, tolerance), status: status}, nil
}

// objectMetric sums the described object's metric over the members that
// have the object (each member's object carries that member's share, such
// as its ingress's request rate), then computes as upstream's
// GetObjectMetricReplicas (Value) or GetObjectPerPodMetricReplicas
// (AverageValue).
func objectMetric(idx int, spec v1alpha1.MetricSpec, in Input) (metricResult, error) {
	src := spec.Object
	var usage int64
	found := 0
	for _, m := range in.Members {
		v := m.Custom[idx]
		if v.Missing != "" || len(v.Values) == 0 {
			continue
		}
		found++
		usage = addCapped(usage, v.Values[0])
	}
	if found == 0 {
		return metricResult{}, fmt.Errorf("object metric %s of %s %s: no member reported it", src.Metric.Name, src.DescribedObject.Kind, src.DescribedObject.Name)
	}
	replicas, cur, err := valueOrAverage(src.Target, usage, in)
	if err != nil {
		return metricResult{}, fmt.Errorf("object metric %s: %w", src.Metric.Name, err)
	}
	status := v1alpha1.MetricStatus{Type: spec.Type, Object: &v1alpha1.ObjectMetricStatus{
		Metric: src.Metric, DescribedObject: src.DescribedObject, Current: cur}}
	return metricResult{replicas: replicas, status: status}, nil
}

// externalMetric takes the highest member's value of an external metric
// (each member's series summed, as upstream sums the series matching the
// selector): an external source is one thing outside the clusters, and
// every member's adapter reads the same queue or rate, so a sum would
// count it once per member; the highest value is the freshest view of a
// growing backlog and never under-scales when one adapter lags.
func externalMetric(idx int, spec v1alpha1.MetricSpec, in Input) (metricResult, error) {
	src := spec.External
	var usage int64
	found := false
	for _, m := range in.Members {
		v := m.Custom[idx]
		if v.Missing != "" || len(v.Values) == 0 {
			continue
		}
		var sum int64
		for _, x := range v.Values {
			sum = addCapped(sum, x)
		}
		if !found || sum > usage {
			usage = sum
		}
		found = true
	}
	if !found {
		return metricResult{}, fmt.Errorf("external metric %s: no member reported it", src.Metric.Name)
	}
	replicas, cur, err := valueOrAverage(src.Target, usage, in)
	if err != nil {
		return metricResult{}, fmt.Errorf("external metric %s: %w", src.Metric.Name, err)
	}
	status := v1alpha1.MetricStatus{Type: spec.Type, External: &v1alpha1.ExternalMetricStatus{Metric: src.Metric, Current: cur}}
	return metricResult{replicas: replicas, status: status}, nil
}

// valueOrAverage is the shared tail of upstream's Object and External
// calculations. A Value target scales the ready pods by value/target
// (getUsageRatioReplicaCount); an AverageValue target divides the value by
// the target's status replicas and, outside the tolerance, asks for
// value/averageValue pods.
func valueOrAverage(t v1alpha1.MetricTarget, usage int64, in Input) (int32, v1alpha1.MetricValueStatus, error) {
	tol := in.Settings.Tolerance
	if t.Type == v1alpha1.ValueMetricType {
		want, err := positive("value", t.Value)
		if err != nil {
			return 0, v1alpha1.MetricValueStatus{}, err
		}
		cur := v1alpha1.MetricValueStatus{Value: milli(usage)}
		ratio := float64(usage) / float64(want)
		if within(ratio, tol) {
			return in.Current, cur, nil
		}
		ready, err := readyPods(in.Members)
		if err != nil {
			return 0, v1alpha1.MetricValueStatus{}, err
		}
		return ceil32(ratio * float64(ready)), cur, nil
	}
	want, err := positive("averageValue", t.AverageValue)
	if err != nil {
		return 0, v1alpha1.MetricValueStatus{}, err
	}
	replicas := in.StatusReplicas
	if !within(float64(usage)/(float64(want)*float64(in.StatusReplicas)), tol) {
		replicas = ceil32(float64(usage) / float64(want))
	}
	avg := usage
	if in.StatusReplicas > 0 {
		avg = int64(math.Ceil(float64(usage) / float64(in.StatusReplicas)))
	}
	return replicas, v1alpha1.MetricValueStatus{AverageValue: milli(avg)}, nil
}

// readyPods counts the running and ready pods in every member, as
// upstream's getReadyPodsCount does in its one cluster.
func readyPods(members []Member) (int, error) {
	listed, ready := 0, 0
	for _, m := range members {
		for _, p := range m.Pods {
			listed++
			if p.Status.Phase != corev1.PodRunning {
				continue
			}
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
	}
	if listed == 0 {
		return 0, errors.New("no pods of the target found in any member")
	}
	return ready, nil
}

func within(ratio, tolerance float64) bool { return 1-tolerance <= ratio && ratio <= 1+tolerance }

func positive(field string, q *resource.Quantity) (int64, error) {
	if q == nil || q.MilliValue() <= 0 {
		return 0, fmt.Errorf("%s must be more than zero", field)
	}
	return q.MilliValue(), nil
}

func addCapped(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func milli(v int64) *resource.Quantity { return resource.NewMilliQuantity(v, resource.DecimalSI) }
