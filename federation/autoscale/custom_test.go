package autoscale

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// cpod is one test pod for custom metrics: its Pods metric value in
// milli-units (-1: none), readiness and phase.
type cpod struct {
	value   int64
	unready bool
	pending bool
}

func vals(values ...int64) []cpod {
	out := make([]cpod, len(values))
	for i, v := range values {
		out[i] = cpod{value: v}
	}
	return out
}

// cmember builds a member whose pods (named alike in every member) carry
// a value of the Pods metric at index 0; obj is its value of the Object
// or External metric (none when nil).
func cmember(name string, pods []cpod, obj ...int64) Member {
	m := Member{Name: name, Custom: map[int]Values{0: {Pods: map[string]PodValue{}, Values: obj}}}
	start := now.Add(-10 * time.Minute)
	for i, ps := range pods {
		podName := fmt.Sprintf("web-%d", i)
		ready, phase := corev1.ConditionTrue, corev1.PodRunning
		if ps.unready {
			ready = corev1.ConditionFalse
		}
		if ps.pending {
			phase = corev1.PodPending
		}
		m.Pods = append(m.Pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, UID: types.UID(name + "-" + podName), CreationTimestamp: metav1.NewTime(start)},
			Status: corev1.PodStatus{Phase: phase, StartTime: &metav1.Time{Time: start},
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready, LastTransitionTime: metav1.NewTime(start)}}},
		})
		if ps.value >= 0 && !ps.pending {
			m.Custom[0].Pods[podName] = PodValue{Value: ps.value, Timestamp: now.Add(-5 * time.Second)}
		}
	}
	return m
}

func missingCustom(m Member, why string) Member {
	v := m.Custom[0]
	v.Missing = why
	m.Custom = map[int]Values{0: v}
	return m
}

func mq(v int64) *resource.Quantity { return resource.NewMilliQuantity(v, resource.DecimalSI) }

func podsAverage(target int64) v1alpha1.MetricSpec {
	return v1alpha1.MetricSpec{Type: v1alpha1.PodsMetricSourceType, Pods: &v1alpha1.PodsMetricSource{
		Metric: v1alpha1.MetricIdentifier{Name: "qps"}, Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: mq(target)}}}
}

func target(typ v1alpha1.AutoscalerMetricTargetType, v int64) v1alpha1.MetricTarget {
	if typ == v1alpha1.ValueMetricType {
		return v1alpha1.MetricTarget{Type: typ, Value: mq(v)}
	}
	return v1alpha1.MetricTarget{Type: typ, AverageValue: mq(v)}
}

func object(typ v1alpha1.AutoscalerMetricTargetType, v int64) v1alpha1.MetricSpec {
	return v1alpha1.MetricSpec{Type: v1alpha1.ObjectMetricSourceType, Object: &v1alpha1.ObjectMetricSource{
		DescribedObject: v1alpha1.MetricObjectReference{Kind: "Deployment", APIVersion: "apps/v1", Name: "some-deployment"},
		Metric:          v1alpha1.MetricIdentifier{Name: "qps"}, Target: target(typ, v)}}
}

func external(typ v1alpha1.AutoscalerMetricTargetType, v int64) v1alpha1.MetricSpec {
	return v1alpha1.MetricSpec{Type: v1alpha1.ExternalMetricSourceType, External: &v1alpha1.ExternalMetricSource{
		Metric: v1alpha1.MetricIdentifier{Name: "qps", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"label": "value"}}}, Target: target(typ, v)}}
}

// current reads the value a status reports, in milli-units.
func current(s v1alpha1.MetricStatus) int64 {
	var c v1alpha1.MetricValueStatus
	switch {
	case s.Pods != nil:
		c = s.Pods.Current
	case s.Object != nil:
		c = s.Object.Current
	case s.External != nil:
		c = s.External.Current
	}
	if c.Value != nil {
		return c.Value.MilliValue()
	}
	if c.AverageValue != nil {
		return c.AverageValue.MilliValue()
	}
	return -1
}

// TestCustomReplicaCalculation compares the Pods, Object and External
// calculations with the upstream replica calculator's cases of the same
// name (replica_calculator_test.go: values in milli-units, status replicas
// equal to the current count), then checks how members' values combine.
func TestCustomReplicaCalculation(t *testing.T) {
	const va, av = v1alpha1.ValueMetricType, v1alpha1.AverageValueMetricType
	cases := []struct {
		name            string
		current, status int32
		metric          v1alpha1.MetricSpec
		members         []Member
		want            int32
		wantCurrent     int64
	}{
		// Pods metrics (GetMetricReplicas): readiness does not matter,
		// only pending pods are unready.
		{"ScaleUpCM", 3, 3, podsAverage(15000), []Member{cmember("a", vals(20000, 10000, 30000))}, 4, 20000},
		{"ScaleUpCMUnreadyHotCpuNoLessScale: readiness is a CPU rule", 3, 3, podsAverage(15000),
			[]Member{cmember("a", []cpod{{value: 50000}, {value: 10000}, {value: 30000, unready: true}})}, 6, 30000},
		{"ScaleUpCMUnreadyHotCpuScaleWouldScaleDown", 3, 3, podsAverage(15000),
			[]Member{cmember("a", []cpod{{value: 50000, unready: true}, {value: 15000}, {value: 30000, unready: true}})}, 7, 31666},
		{"ScaleDownCM", 5, 5, podsAverage(20000), []Member{cmember("a", vals(12000, 12000, 12000, 12000, 12000))}, 3, 12000},
		{"ToleranceCM", 3, 3, podsAverage(20000), []Member{cmember("a", vals(20000, 21000, 21000))}, 3, 20666},
		{"DuringRollingUpdateWithMaxSurgeCM: a missing pod at the target turns the direction", 2, 2, podsAverage(17000),
			[]Member{cmember("a", vals(10000, 10000, -1))}, 2, 10000},
		{"pending pods count 0 on scale-up", 3, 3, podsAverage(15000), []Member{cmember("a", []cpod{{value: 30000}, {value: 30000}, {pending: true}})}, 4, 30000},

		// Object metrics (GetObjectMetricReplicas: ready pods times
		// value/target; GetObjectPerPodMetricReplicas: value/averageValue).
		{"ScaleUpCMObject", 3, 3, object(va, 15000), []Member{cmember("a", vals(-1, -1, -1), 20000)}, 4, 20000},
		{"ScaleUpCMPerPodObject", 3, 3, object(av, 5000), []Member{cmember("a", vals(-1, -1, -1), 20000)}, 4, 6667},
		{"ScaleUpCMObjectIgnoresUnreadyPods", 3, 3, object(va, 10000),
			[]Member{cmember("a", []cpod{{value: -1, unready: true}, {value: -1}, {value: -1, unready: true}}, 50000)}, 5, 50000},
		{"ScaleDownPerPodCMObject", 5, 5, object(av, 2000), []Member{cmember("a", vals(-1, -1, -1, -1, -1), 6000)}, 3, 1200},
		{"ScaleDownCMObject", 5, 5, object(va, 20000), []Member{cmember("a", vals(-1, -1, -1, -1, -1), 12000)}, 3, 12000},
		{"ToleranceCMObject", 3, 3, object(va, 20000), []Member{cmember("a", vals(-1, -1, -1), 20666)}, 3, 20666},
		{"TolerancePerPodCMObject", 4, 4, object(av, 5000), []Member{cmember("a", vals(-1, -1, -1, -1), 20166)}, 4, 5042},

		// External metrics (GetExternalMetricReplicas,
		// GetExternalPerPodMetricReplicas).
		{"ScaleUpCMExternal", 1, 1, external(va, 4400), []Member{cmember("a", vals(-1), 8600)}, 2, 8600},
		{"ScaleUpCMExternalIgnoresUnreadyPods", 3, 3, external(va, 4400),
			[]Member{cmember("a", []cpod{{value: -1, unready: true}, {value: -1}, {value: -1, unready: true}}, 8600)}, 2, 8600},
		{"ScaleUpPerPodCMExternal", 3, 3, external(av, 2150), []Member{cmember("a", vals(-1, -1, -1), 8600)}, 4, 2867},
		{"ScaleDownCMExternal", 5, 5, external(va, 14334), []Member{cmember("a", vals(-1, -1, -1, -1, -1), 8600)}, 3, 8600},
		{"ScaleDownPerPodCMExternal", 5, 5, external(av, 2867), []Member{cmember("a", vals(-1, -1, -1, -1, -1), 8600)}, 3, 1720},
		{"ToleranceCMExternal", 3, 3, external(va, 8888), []Member{cmember("a", vals(-1, -1, -1), 8600)}, 3, 8600},
		{"TolerancePerPodCMExternal", 3, 3, external(av, 2900), []Member{cmember("a", vals(-1, -1, -1), 8600)}, 3, 2867},
		{"ExternalMetricUsageOverflow: the series' sum is capped", 1, 1, external(va, 1000),
			[]Member{cmember("a", vals(-1), math.MaxInt64-10, 100)}, math.MaxInt32, math.MaxInt64},

		// Federation.
		{"Pods: the pods of all members pooled, same names in each", 3, 3, podsAverage(15000),
			[]Member{cmember("a", vals(20000, 10000)), cmember("b", vals(30000))}, 4, 20000},
		{"Pods: a member not serving the API has its pods missing (0 on scale-up)", 3, 3, podsAverage(15000),
			[]Member{cmember("a", vals(30000, 30000)), missingCustom(cmember("b", vals(30000)), "custom.metrics.k8s.io not served")}, 4, 30000},
		{"Object: the members that have the object are summed", 3, 3, object(va, 15000),
			[]Member{cmember("a", vals(-1), 12000), cmember("b", vals(-1), 8000), cmember("c", vals(-1))}, 4, 20000},
		{"Object: a member that could not answer adds nothing", 3, 3, object(va, 15000),
			[]Member{cmember("a", vals(-1, -1), 12000), missingCustom(cmember("b", vals(-1), 8000), "timeout")}, 3, 12000},
		{"External: the highest member's value, not the sum", 1, 1, external(va, 4400),
			[]Member{cmember("a", vals(-1), 8600), cmember("b", nil, 8600), cmember("c", nil, 4000)}, 2, 8600},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Current: tc.current, StatusReplicas: tc.status, Members: tc.members, Settings: DefaultSettings()}
			r, err := metricOf(in, 0, tc.metric)
			if err != nil {
				t.Fatal(err)
			}
			if r.replicas != tc.want {
				t.Errorf("replicas = %d, want %d", r.replicas, tc.want)
			}
			if got := current(r.status); got != tc.wantCurrent {
				t.Errorf("current value = %d, want %d", got, tc.wantCurrent)
			}
		})
	}
}

// Nothing to compute from is an error naming the metric, as upstream.
func TestCustomMetricErrors(t *testing.T) {
	cases := []struct {
		name    string
		metric  v1alpha1.MetricSpec
		members []Member
		want    string
	}{
		{"no pod has a value", podsAverage(1000), []Member{cmember("a", vals(-1, -1))}, "pods metric qps: did not receive metrics"},
		{"no member has the object", object(v1alpha1.ValueMetricType, 1000), []Member{cmember("a", vals(1))}, "no member reported it"},
		{"every member missing", external(v1alpha1.ValueMetricType, 1000),
			[]Member{missingCustom(cmember("a", vals(1), 5), "external.metrics.k8s.io not served")}, "no member reported it"},
		{"zero target", podsAverage(0), []Member{cmember("a", vals(1))}, "averageValue must be more than zero"},
		{"no pods for a Value target", object(v1alpha1.ValueMetricType, 1000), []Member{cmember("a", nil, 5000)}, "no pods of the target"},
		{"type without its field", v1alpha1.MetricSpec{Type: v1alpha1.PodsMetricSourceType}, []Member{cmember("a", vals(1))}, "lacks the field"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := Input{Now: now, Current: 2, StatusReplicas: 2, Members: tc.members, Settings: DefaultSettings()}
			_, err := metricOf(in, 0, tc.metric)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// A member that does not serve the custom metrics API holds scale-down,
// and the condition and its cluster row say why; scale-up goes on.
func TestCustomMetricPartialData(t *testing.T) {
	b := missingCustom(cmember("b", vals(-1)), "custom.metrics.k8s.io not served")
	spec := v1alpha1.FederatedHorizontalPodAutoscalerSpec{MaxReplicas: 10, Metrics: []v1alpha1.MetricSpec{podsAverage(15000)}}
	in := Input{Now: now, Spec: spec, Current: 4, StatusReplicas: 4, Settings: DefaultSettings(),
		Members: []Member{cmember("a", vals(1000, 1000, 1000)), b}}
	d := Decide(in, &History{})
	if d.Desired != 4 || d.Rescale {
		t.Errorf("desired %d rescale %v on partial data, want 4 and no change", d.Desired, d.Rescale)
	}
	c := findCondition(d.Conditions, v1alpha1.AutoscalerScalingLimited)
	if c == nil || c.Reason != ReasonMetricsMissing || !strings.Contains(c.Message, "b") {
		t.Errorf("ScalingLimited = %+v, want MetricsMissing naming b", c)
	}
	if row := d.Clusters[1]; row.MetricsAvailable || row.Message != "custom.metrics.k8s.io not served" {
		t.Errorf("row of b = %+v, want metrics unavailable with the reason", row)
	}

	in.Members = []Member{cmember("a", vals(60000, 60000, 60000)), b}
	if d := Decide(in, &History{}); d.Desired <= 4 {
		t.Errorf("desired %d with load on a, want a scale-up despite b", d.Desired)
	}
}

func findCondition(cs []metav1.Condition, typ string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == typ {
			return &cs[i]
		}
	}
	return nil
}
