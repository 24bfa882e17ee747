// Package autoscale holds the replica math of the FederatedHorizontalPodAutoscaler:
// the HorizontalPodAutoscaler controller's per-metric replica calculation
// (utilisation and average value of resource metrics, tolerance, unready and
// missing pods, the CPU initialisation period), its scale-up and scale-down
// policies and stabilisation windows, applied to pods spread over member
// clusters, plus the federation's own rule: no scale-down on partial data.
//
// It is pure: callers pass the pods, the metrics and the time; nothing here
// reads a clock or a client.
package autoscale

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelpers "k8s.io/component-helpers/resource"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Defaults of the upstream controller's flags.
const (
	// DefaultTolerance is the relative change below which nothing scales.
	DefaultTolerance = 0.1
	// DefaultCPUInitializationPeriod: within it after a pod starts, its CPU
	// sample counts only once the pod is ready and a full metric window
	// passed since it became so.
	DefaultCPUInitializationPeriod = 5 * time.Minute
	// DefaultInitialReadinessDelay: a pod that turned unready within it
	// after starting is taken as never ready yet.
	DefaultInitialReadinessDelay = 30 * time.Second
	// DefaultDownscaleStabilization is the scale-down window when the
	// spec sets none.
	DefaultDownscaleStabilization = 5 * time.Minute
)

// PodKey identifies a pod in the fleet: names repeat across members (and
// within one over time), UIDs do not.
type PodKey struct {
	Member string
	UID    types.UID
}

// String returns member/uid, for messages.
func (k PodKey) String() string { return k.Member + "/" + string(k.UID) }

// Usage is one pod's sample from a member's metrics.k8s.io.
type Usage struct {
	// Timestamp and Window of the sample.
	Timestamp time.Time
	Window    time.Duration
	// Containers is each container's usage, by container name.
	Containers map[string]corev1.ResourceList
}

// Member is what one member contributes.
type Member struct {
	// Name of the member cluster.
	Name string
	// Pods are the target's pods there (from the member's cache).
	Pods []*corev1.Pod
	// Usage is metrics.k8s.io's answer, by pod name.
	Usage map[string]Usage
	// Missing, when set, says why the member's metrics.k8s.io could not be
	// read (set only when the spec has resource metrics); its pods then
	// count as pods without metrics and no scale-down happens on what the
	// others report.
	Missing string
	// Custom are the member's answers for the spec's Pods, Object and
	// External metrics, by the metric's index in the spec.
	Custom map[int]Values
}

// Settings are the controller-wide knobs, the upstream controller's flags.
type Settings struct {
	Tolerance               float64
	CPUInitializationPeriod time.Duration
	InitialReadinessDelay   time.Duration
	DownscaleStabilization  time.Duration
}

// DefaultSettings returns the upstream defaults.
func DefaultSettings() Settings {
	return Settings{
		Tolerance:               DefaultTolerance,
		CPUInitializationPeriod: DefaultCPUInitializationPeriod,
		InitialReadinessDelay:   DefaultInitialReadinessDelay,
		DownscaleStabilization:  DefaultDownscaleStabilization,
	}
}

// sample is one pod's value for one metric, in milli-units.
type sample struct {
	value   int64
	request int64
}

// metricResult is one metric's proposal.
type metricResult struct {
	replicas int32
	status   v1alpha1.MetricStatus
}

// errNoMetrics: no pod of the target had a usable sample.
var errNoMetrics = errors.New("did not receive metrics for any ready pod of the target")

// resourceMetric computes one Resource or ContainerResource metric's
// proposal, as the upstream replica calculator does for the pods of all
// members pooled; pods of a member whose metrics are missing count as pods
// without metrics.
func resourceMetric(now time.Time, spec v1alpha1.MetricSpec, current int32, members []Member, s Settings) (metricResult, error) {
	name, container, target := metricParts(spec)
	if target.Type == v1alpha1.AverageValueMetricType && (target.AverageValue == nil || target.AverageValue.MilliValue() <= 0) {
		return metricResult{}, fmt.Errorf("%s: averageValue must be more than zero", name)
	}
	if target.Type == v1alpha1.UtilizationMetricType && (target.AverageUtilization == nil || *target.AverageUtilization <= 0) {
		return metricResult{}, fmt.Errorf("%s: averageUtilization must be more than zero", name)
	}
	g, err := group(now, members, name, container, s)
	if err != nil {
		return metricResult{}, err
	}
	if g.podCount == 0 {
		return metricResult{}, errors.New("no pods of the target found in any member")
	}
	if len(g.metrics) == 0 {
		return metricResult{}, errNoMetrics
	}
	var r ratioFunc
	status := v1alpha1.MetricStatus{Type: spec.Type}
	var cur v1alpha1.MetricValueStatus
	if target.Type == v1alpha1.UtilizationMetricType {
		want := int64(*target.AverageUtilization)
		r = func(m map[PodKey]sample) float64 { u, _ := utilisation(m); return float64(u) / float64(want) }
		u, avg := utilisation(g.metrics)
		cur.AverageUtilization = ptrTo(int32(min(u, math.MaxInt32)))
		cur.AverageValue = quantity(name, avg)
		g.fallback = func(smp sample) int64 { return smp.request * max(100, want) / 100 }
	} else {
		want := target.AverageValue.MilliValue()
		r = func(m map[PodKey]sample) float64 { return float64(average(m)) / float64(want) }
		cur.AverageValue = quantity(name, average(g.metrics))
		g.fallback = func(sample) int64 { return want }
	}
	if container == "" {
		status.Resource = &v1alpha1.ResourceMetricStatus{Name: name, Current: cur}
	} else {
		status.ContainerResource = &v1alpha1.ContainerResourceMetricStatus{Name: name, Container: container, Current: cur}
	}
	return metricResult{replicas: g.replicas(current, r, s.Tolerance), status: status}, nil
}

type ratioFunc func(map[PodKey]sample) float64

// grouped are the pods of all members sorted as the upstream calculator
// sorts them.
type grouped struct {
	podCount int
	ready    int
	// metrics of ready pods with a sample.
	metrics map[PodKey]sample
	// unready and missing pods, with their requests.
	unready, missing map[PodKey]sample
	// fallback is the value a missing pod is given on a scale-down.
	fallback func(sample) int64
}

// replicas is the second half of the upstream calculation: when pods are
// unready or without metrics, recompute assuming the least favourable
// value for the direction, and refuse a change of direction.
func (g grouped) replicas(current int32, ratio ratioFunc, tolerance float64) int32 {
	within := func(r float64) bool { return 1-tolerance <= r && r <= 1+tolerance }
	usage := ratio(g.metrics)
	upWithUnready := len(g.unready) > 0 && usage > 1
	if !upWithUnready && len(g.missing) == 0 {
		if within(usage) {
			return current
		}
		return ceil32(usage * float64(g.ready))
	}
	all := make(map[PodKey]sample, len(g.metrics)+len(g.missing)+len(g.unready))
	for k, v := range g.metrics {
		all[k] = v
	}
	for k, v := range g.missing {
		switch {
		case usage < 1:
			all[k] = sample{value: g.fallback(v), request: v.request}
		case usage > 1:
			all[k] = sample{request: v.request}
		}
	}
	if upWithUnready {
		for k, v := range g.unready {
			all[k] = sample{request: v.request}
		}
	}
	newUsage := ratio(all)
	if within(newUsage) || (usage < 1 && newUsage > 1) || (usage > 1 && newUsage < 1) {
		return current
	}
	n := ceil32(newUsage * float64(len(all)))
	if (newUsage < 1 && n > current) || (newUsage > 1 && n < current) {
		return current
	}
	return n
}

// group sorts every member's pods: deleted and failed pods are dropped,
// pending ones are unready, pods without a (fresh) sample are missing, and
// for CPU pods are unready as the upstream initialisation rules say.
func group(now time.Time, members []Member, name corev1.ResourceName, container string, s Settings) (grouped, error) {
	g := grouped{metrics: map[PodKey]sample{}, unready: map[PodKey]sample{}, missing: map[PodKey]sample{}}
	for _, m := range members {
		for _, p := range m.Pods {
			if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodFailed {
				continue
			}
			g.podCount++
			req, err := podRequest(p, name, container)
			if err != nil {
				return grouped{}, fmt.Errorf("member %s: %w", m.Name, err)
			}
			key := PodKey{Member: m.Name, UID: p.UID}
			if p.Status.Phase == corev1.PodPending {
				g.unready[key] = sample{request: req}
				continue
			}
			u, ok := m.Usage[p.Name]
			var value int64
			if ok && m.Missing == "" && !u.Timestamp.Before(p.CreationTimestamp.Time) {
				value, ok = usageOf(u, name, container)
			} else {
				ok = false
			}
			if !ok {
				g.missing[key] = sample{request: req}
				continue
			}
			if name == corev1.ResourceCPU && cpuUnready(now, p, u, s) {
				g.unready[key] = sample{request: req}
				continue
			}
			g.ready++
			g.metrics[key] = sample{value: value, request: req}
		}
	}
	return g, nil
}

// cpuUnready: without a Ready condition or start time a pod is unready;
// within the initialisation period it counts only when ready and sampled a
// full window after turning ready; after it, only a pod that was never
// ready is left out.
func cpuUnready(now time.Time, p *corev1.Pod, u Usage, s Settings) bool {
	var ready *corev1.PodCondition
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady {
			ready = &p.Status.Conditions[i]
		}
	}
	if ready == nil || p.Status.StartTime == nil {
		return true
	}
	start := p.Status.StartTime.Time
	if start.Add(s.CPUInitializationPeriod).After(now) {
		return ready.Status == corev1.ConditionFalse || u.Timestamp.Before(ready.LastTransitionTime.Add(u.Window))
	}
	return ready.Status == corev1.ConditionFalse && start.Add(s.InitialReadinessDelay).After(ready.LastTransitionTime.Time)
}

// usageOf sums the containers' usage (or takes the one container's); a pod
// with no container sample, or one lacking the resource, has no value.
func usageOf(u Usage, name corev1.ResourceName, container string) (int64, bool) {
	if container != "" {
		q, ok := u.Containers[container][name]
		return q.MilliValue(), ok
	}
	if len(u.Containers) == 0 {
		return 0, false
	}
	var sum int64
	for _, res := range u.Containers {
		q, ok := res[name]
		if !ok {
			return 0, false
		}
		sum += q.MilliValue()
	}
	return sum, true
}

// podRequest sums the containers' (and sidecars') requests, or takes the
// one container's; a container without a request is an error, as upstream.
// A pod with pod-level requests (spec.resources, PodLevelResources: on by
// default since Kubernetes 1.34) uses them for a Resource metric, as
// upstream does since then; a ContainerResource metric keeps the
// container's.
func podRequest(p *corev1.Pod, name corev1.ResourceName, container string) (int64, error) {
	if container == "" && resourcehelpers.IsPodLevelRequestsSet(p) {
		q, ok := resourcehelpers.PodRequests(p, resourcehelpers.PodResourcesOptions{})[name]
		if !ok {
			return 0, fmt.Errorf("missing pod-level request for %s in pod %s", name, p.Name)
		}
		return q.MilliValue(), nil
	}
	cs := append([]corev1.Container{}, p.Spec.Containers...)
	for _, c := range p.Spec.InitContainers {
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			cs = append(cs, c)
		}
	}
	var sum int64
	for _, c := range cs {
		if container != "" && c.Name != container {
			continue
		}
		q, ok := c.Resources.Requests[name]
		if !ok {
			return 0, fmt.Errorf("missing request for %s in container %s of pod %s", name, c.Name, p.Name)
		}
		sum += q.MilliValue()
		if container != "" {
			return sum, nil
		}
	}
	if container != "" {
		return 0, fmt.Errorf("container %s not found in pod %s", container, p.Name)
	}
	return sum, nil
}

// utilisation is the percent of requests used (truncated, as upstream) and
// the mean usage per pod.
func utilisation(m map[PodKey]sample) (int64, int64) {
	var used, requested int64
	for _, s := range m {
		used += s.value
		requested += s.request
	}
	if requested == 0 || len(m) == 0 {
		return 0, 0
	}
	return used * 100 / requested, used / int64(len(m))
}

func average(m map[PodKey]sample) int64 {
	if len(m) == 0 {
		return 0
	}
	var sum int64
	for _, s := range m {
		sum += s.value
	}
	return sum / int64(len(m))
}

func metricParts(spec v1alpha1.MetricSpec) (corev1.ResourceName, string, v1alpha1.MetricTarget) {
	if spec.ContainerResource != nil {
		return spec.ContainerResource.Name, spec.ContainerResource.Container, spec.ContainerResource.Target
	}
	if spec.Resource != nil {
		return spec.Resource.Name, "", spec.Resource.Target
	}
	return "", "", v1alpha1.MetricTarget{}
}

func ceil32(f float64) int32 {
	if f >= math.MaxInt32 {
		return math.MaxInt32
	}
	return int32(math.Ceil(f))
}

func ptrTo[T any](v T) *T { return &v }

// sortedMembers returns member names in order, for messages.
func sortedMembers(names map[string]string) []string {
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
