package autoscale

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Reasons this package adds to the HorizontalPodAutoscaler's.
const (
	// ReasonMetricsMissing: a member's metrics could not be read, so the
	// autoscaler does not scale down (ScalingLimited).
	ReasonMetricsMissing = "MetricsMissing"
	// ReasonFailedGetResourceMetric: no metric could be computed
	// (ScalingActive False), as upstream.
	ReasonFailedGetResourceMetric = "FailedGetResourceMetric"
)

// Input is one computation's input.
type Input struct {
	// Now is the time of the computation.
	Now time.Time
	// Spec of the autoscaler.
	Spec v1alpha1.FederatedHorizontalPodAutoscalerSpec
	// Current is the target's spec.replicas (through its scale subresource).
	Current int32
	// StatusReplicas is the target's status.replicas: per-pod Object and
	// External targets divide by it, as upstream does.
	StatusReplicas int32
	// Members are the members the target runs in.
	Members []Member
	// Settings are the controller-wide knobs.
	Settings Settings
}

// Decision is what to do and what to report.
type Decision struct {
	// Desired is the replica count to set; Rescale says whether it differs
	// from Input.Current.
	Desired int32
	Rescale bool
	// Reason says why, for the event (as upstream's rescale reason).
	Reason string
	// Metrics are the current values of the spec's metrics (those that
	// could be computed).
	Metrics []v1alpha1.MetricStatus
	// Clusters has one row per member.
	Clusters []v1alpha1.AutoscalerClusterStatus
	// Conditions are AbleToScale (before the write), ScalingActive and
	// ScalingLimited.
	Conditions []metav1.Condition
	// Err is set when no metric could be computed (nothing scales).
	Err error
}

// DefaultMetrics is what an autoscaler without metrics scales on: cpu at
// 80 % utilisation, as for an HPA.
func DefaultMetrics() []v1alpha1.MetricSpec {
	return []v1alpha1.MetricSpec{{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptrTo[int32](80)}}}}
}

// Decide computes the replica count as the upstream controller does (min
// and max first, then the metrics, stabilisation and rate policies), with
// the federation's partition rule: while any member's metrics are missing
// the count does not go below Current. It records the recommendation in h;
// the caller records the scale event (h.RecordScale) once the write
// succeeded.
func Decide(in Input, h *History) Decision {
	minR := int32(1)
	if in.Spec.MinReplicas != nil {
		minR = *in.Spec.MinReplicas
	}
	maxR := in.Spec.MaxReplicas
	d := Decision{Clusters: clusterRows(in.Members)}
	h.Seed(in.Now, in.Current)
	switch {
	case in.Current == 0:
		d.Desired = 0
		d.set(v1alpha1.AutoscalerScalingActive, false, "ScalingDisabled", "scaling is disabled since the replica count of the target is zero")
		d.set(v1alpha1.AutoscalerAbleToScale, true, "SucceededGetScale", "the autoscaler was able to get the target's current scale")
		return d
	case in.Current > maxR:
		return d.bounded(in.Current, maxR, "Current number of replicas above Spec.MaxReplicas")
	case in.Current < minR:
		return d.bounded(in.Current, minR, "Current number of replicas below Spec.MinReplicas")
	}
	proposal, name, err := d.metrics(in)
	if err != nil {
		d.Desired, d.Err = in.Current, err
		d.set(v1alpha1.AutoscalerScalingActive, false, ReasonFailedGetResourceMetric, "the autoscaler was unable to compute the replica count: "+err.Error())
		d.set(v1alpha1.AutoscalerAbleToScale, true, "SucceededGetScale", "the autoscaler was able to get the target's current scale")
		return d
	}
	d.set(v1alpha1.AutoscalerScalingActive, true, "ValidMetricFound", "the autoscaler was able to compute a replica count from "+name)
	missing := missingMembers(in.Members)
	held := len(missing) > 0 && proposal < in.Current
	if held {
		// Partial data: a member that does not answer is not idle.
		proposal = in.Current
	}
	b := BehaviorOf(in.Spec.Behavior, in.Settings.DownscaleStabilization)
	stable, reason, msg := h.stabilise(in.Now, b, in.Current, proposal)
	if stable != proposal {
		d.set(v1alpha1.AutoscalerAbleToScale, true, reason, msg)
	} else {
		d.set(v1alpha1.AutoscalerAbleToScale, true, "ReadyForNewScale", "recommended size matches current size")
	}
	desired, reason, msg := h.limit(in.Now, b, in.Current, stable, minR, maxR)
	switch {
	case held || (len(missing) > 0 && desired == stable):
		d.set(v1alpha1.AutoscalerScalingLimited, true, ReasonMetricsMissing,
			fmt.Sprintf("metrics missing from member(s) %s: no scale-down on partial data", strings.Join(missing, ", ")))
	case desired == stable:
		d.set(v1alpha1.AutoscalerScalingLimited, false, reason, msg)
	default:
		d.set(v1alpha1.AutoscalerScalingLimited, true, reason, msg)
	}
	d.Desired, d.Rescale = desired, desired != in.Current
	switch {
	case desired > in.Current:
		d.Reason = name + " above target"
	case desired < in.Current:
		d.Reason = "All metrics below target"
	}
	return d
}

// bounded moves a count outside [min, max] to the bound, without metrics.
func (d Decision) bounded(current, to int32, reason string) Decision {
	d.Desired, d.Rescale, d.Reason = to, true, reason
	d.set(v1alpha1.AutoscalerAbleToScale, true, "SucceededGetScale", "the autoscaler was able to get the target's current scale")
	return d
}

// metrics computes every metric and returns the largest proposal. As
// upstream, a failed metric does not block a scale-up the others ask for,
// but no scale-down happens while any metric failed.
func (d *Decision) metrics(in Input) (int32, string, error) {
	specs := in.Spec.Metrics
	if len(specs) == 0 {
		specs = DefaultMetrics()
	}
	var best int32
	var name string
	var firstErr error
	failed := 0
	for i, s := range specs {
		r, err := metricOf(in, i, s)
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		d.Metrics = append(d.Metrics, r.status)
		if best == 0 || r.replicas > best {
			best, name = r.replicas, metricName(s)
		}
	}
	if failed == len(specs) || (failed > 0 && best < in.Current) {
		return 0, "", fmt.Errorf("invalid metrics (%d invalid out of %d), first error is: %w", failed, len(specs), firstErr)
	}
	return best, name, nil
}

// metricOf computes the spec's metric at index i.
func metricOf(in Input, i int, s v1alpha1.MetricSpec) (metricResult, error) {
	switch {
	case s.Type == v1alpha1.PodsMetricSourceType && s.Pods != nil:
		return podsMetric(i, s, in.Current, in.Members, in.Settings.Tolerance)
	case s.Type == v1alpha1.ObjectMetricSourceType && s.Object != nil:
		return objectMetric(i, s, in)
	case s.Type == v1alpha1.ExternalMetricSourceType && s.External != nil:
		return externalMetric(i, s, in)
	case s.Type == v1alpha1.ResourceMetricSourceType && s.Resource != nil,
		s.Type == v1alpha1.ContainerResourceMetricSourceType && s.ContainerResource != nil:
		return resourceMetric(in.Now, s, in.Current, in.Members, in.Settings)
	}
	// The schema refuses these; an object stored before it did is
	// reported, not guessed at.
	return metricResult{}, fmt.Errorf("metric of type %q lacks the field its type names", s.Type)
}

func metricName(s v1alpha1.MetricSpec) string {
	switch {
	case s.Pods != nil:
		return "pods metric " + s.Pods.Metric.Name
	case s.Object != nil:
		return fmt.Sprintf("%s metric %s", strings.ToLower(s.Object.DescribedObject.Kind), s.Object.Metric.Name)
	case s.External != nil:
		return "external metric " + s.External.Metric.Name
	}
	n, c, _ := metricParts(s)
	if c != "" {
		return fmt.Sprintf("%s resource of container %s", n, c)
	}
	return fmt.Sprintf("%s resource", n)
}

// hasSample: the pod has a resource sample or a value of a Pods metric.
func hasSample(m Member, pod string) bool {
	if _, ok := m.Usage[pod]; ok && m.Missing == "" {
		return true
	}
	for _, v := range m.Custom {
		if _, ok := v.Pods[pod]; ok && v.Missing == "" {
			return true
		}
	}
	return false
}

func (d *Decision) set(typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	for i := range d.Conditions {
		if d.Conditions[i].Type == typ {
			d.Conditions[i] = metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg}
			return
		}
	}
	d.Conditions = append(d.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg})
}

func missingMembers(ms []Member) []string {
	missing := map[string]string{}
	for _, m := range ms {
		if why := whyMissing(m); why != "" {
			missing[m.Name] = why
		}
	}
	return sortedMembers(missing)
}

// whyMissing joins the reasons the member's data is missing, for every
// metrics API the spec reads there, sorted by metric index.
func whyMissing(m Member) string {
	var why []string
	if m.Missing != "" {
		why = append(why, m.Missing)
	}
	idx := make([]int, 0, len(m.Custom))
	for i := range m.Custom {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	for _, i := range idx {
		if w := m.Custom[i].Missing; w != "" && !slices.Contains(why, w) {
			why = append(why, w)
		}
	}
	return strings.Join(why, "; ")
}

func clusterRows(ms []Member) []v1alpha1.AutoscalerClusterStatus {
	out := make([]v1alpha1.AutoscalerClusterStatus, 0, len(ms))
	for _, m := range ms {
		why := whyMissing(m)
		row := v1alpha1.AutoscalerClusterStatus{Name: m.Name, MetricsAvailable: why == "", Message: why}
		for _, p := range m.Pods {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
				continue
			}
			row.Pods++
			if hasSample(m, p.Name) {
				row.PodsWithMetrics++
			}
		}
		out = append(out, row)
	}
	return out
}
