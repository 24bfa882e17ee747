package autoscale

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

var now = time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)

// podSpec describes one test pod: cpu usage in milli-cores (-1: no
// sample), readiness, and whether it started recently ("hot": within the
// CPU initialisation period, ready for less than a metric window).
type podSpec struct {
	usage   int64
	unready bool
	hot     bool
	phase   corev1.PodPhase
	gone    bool // deletion timestamp set
}

func cool(usages ...int64) []podSpec {
	out := make([]podSpec, len(usages))
	for i, u := range usages {
		out[i] = podSpec{usage: u}
	}
	return out
}

// member builds a member whose pods request 1 cpu each (two containers of
// 500m, as upstream's tests split usage over two containers).
func member(name string, pods []podSpec) Member {
	m := Member{Name: name, Usage: map[string]Usage{}}
	for i, ps := range pods {
		podName := fmt.Sprintf("web-%d", i) // the same names in every member
		start := now.Add(-10 * time.Minute)
		readySince := start
		if ps.hot {
			start, readySince = now.Add(-20*time.Second), now.Add(-10*time.Second)
		}
		status := corev1.ConditionTrue
		if ps.unready {
			status = corev1.ConditionFalse
		}
		phase := ps.phase
		if phase == "" {
			phase = corev1.PodRunning
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: podName, UID: types.UID(name + "-" + podName), CreationTimestamp: metav1.NewTime(start.Add(-time.Second))},
			Spec: corev1.PodSpec{Containers: []corev1.Container{
				{Name: "app", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("100Mi")}}},
				{Name: "side", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("100Mi")}}},
			}},
			Status: corev1.PodStatus{
				Phase:      phase,
				StartTime:  ptr.To(metav1.NewTime(start)),
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(readySince)}},
			},
		}
		if ps.gone {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(now))
		}
		m.Pods = append(m.Pods, p)
		if ps.usage >= 0 {
			half := ps.usage / 2
			m.Usage[podName] = Usage{Timestamp: now.Add(-5 * time.Second), Window: time.Minute, Containers: map[string]corev1.ResourceList{
				"app":  {corev1.ResourceCPU: *resource.NewMilliQuantity(half, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("50Mi")},
				"side": {corev1.ResourceCPU: *resource.NewMilliQuantity(ps.usage-half, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("50Mi")},
			}}
		}
	}
	return m
}

func cpuUtil(percent int32) v1alpha1.MetricSpec {
	return v1alpha1.MetricSpec{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
}

func cpuAverage(q string) v1alpha1.MetricSpec {
	return v1alpha1.MetricSpec{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse(q))}}}
}

// TestReplicaCalculation compares one metric's proposal with the upstream
// replica calculator's documented behaviour, case by case (the names are
// those of upstream's replica_calculator_test.go cases they mirror; usage
// in milli-cores of a 1-cpu request, so utilisation percent = usage/10).
func TestReplicaCalculation(t *testing.T) {
	cases := []struct {
		name     string
		current  int32
		metric   v1alpha1.MetricSpec
		members  []Member
		want     int32
		wantUtil int32 // -1: not checked
		wantErr  bool
	}{
		{"ScaleUp", 3, cpuUtil(30), []Member{member("a", cool(300, 500, 700))}, 5, 50, false},
		{"ScaleUpUnreadyLessScale: unready pods count 0 % on scale-up", 3, cpuUtil(30),
			[]Member{member("a", []podSpec{{usage: 300, unready: true}, {usage: 500}, {usage: 700}})}, 4, 60, false},
		{"ScaleUpHotCpuLessScale: a pod in its initialisation period is unready", 3, cpuUtil(30),
			[]Member{member("a", []podSpec{{usage: 300, hot: true}, {usage: 500}, {usage: 700}})}, 4, 60, false},
		{"ScaleUpUnreadyNoScale: unready pods at 0 % bring the ratio within tolerance", 3, cpuUtil(30),
			[]Member{member("a", []podSpec{{usage: 400}, {usage: 500, unready: true}, {usage: 700, unready: true}})}, 3, 40, false},
		{"ScaleUpIgnoresFailedPods", 2, cpuUtil(30),
			[]Member{member("a", []podSpec{{usage: 500}, {usage: 700}, {usage: 100, phase: corev1.PodFailed}, {usage: 100, phase: corev1.PodFailed}})}, 4, 60, false},
		{"ScaleUpIgnoresDeletionPods", 2, cpuUtil(30),
			[]Member{member("a", []podSpec{{usage: 500}, {usage: 700}, {usage: 100, gone: true}, {usage: 100, gone: true}})}, 4, 60, false},
		{"ScaleDown", 5, cpuUtil(50), []Member{member("a", cool(100, 300, 500, 250, 250))}, 3, 28, false},
		{"ScaleDownExcludeUnreadyPods", 5, cpuUtil(50),
			[]Member{member("a", []podSpec{{usage: 100}, {usage: 300}, {usage: 500}, {usage: 250, unready: true}, {usage: 250, unready: true}})}, 2, 30, false},
		{"ScaleDownExcludeUnscheduledPods: pending pods are unready", 5, cpuUtil(50),
			[]Member{member("a", []podSpec{{usage: 100}, {usage: -1, phase: corev1.PodPending}, {usage: -1, phase: corev1.PodPending}, {usage: -1, phase: corev1.PodPending}, {usage: -1, phase: corev1.PodPending}})}, 1, 10, false},
		{"ScaleDownIgnoreHotCpuPods", 5, cpuUtil(50),
			[]Member{member("a", []podSpec{{usage: 100}, {usage: 300}, {usage: 500}, {usage: 250, hot: true}, {usage: 250, hot: true}})}, 2, 30, false},
		{"Tolerance: 2 % over target stays", 3, cpuUtil(100), []Member{member("a", cool(1010, 1030, 1020))}, 3, 102, false},
		{"MissingMetrics: missing pods count 100 % on scale-down", 4, cpuUtil(100), []Member{member("a", cool(400, 95, -1, -1))}, 3, 24, false},
		{"MissingMetricsNoChangeEq", 2, cpuUtil(100), []Member{member("a", cool(1000, -1))}, 2, 100, false},
		{"MissingMetricsNoChangeGt: missing pods at 0 % turn the direction", 2, cpuUtil(100), []Member{member("a", cool(1900, -1))}, 2, 190, false},
		{"MissingMetricsNoChangeLt: missing pods at 100 % turn the direction", 2, cpuUtil(100), []Member{member("a", cool(600, -1))}, 2, 60, false},
		{"MissingMetricsUnreadyChange", 3, cpuUtil(50), []Member{member("a", []podSpec{{usage: 100, unready: true}, {usage: 450}, {usage: -1}})}, 3, 45, false},
		{"MissingMetricsUnreadyScaleUp", 3, cpuUtil(50), []Member{member("a", []podSpec{{usage: 100, unready: true}, {usage: 2000}, {usage: -1}})}, 4, 200, false},
		{"EmptyMetrics: no sample at all is an error", 4, cpuUtil(100), []Member{member("a", cool(-1, -1, -1, -1))}, 0, -1, true},
		{"AverageValue scale-up: 3 pods at 900m for 450m", 3, cpuAverage("450m"), []Member{member("a", cool(900, 900, 900))}, 6, -1, false},
		{"AverageValue missing pods count the target on scale-down", 4, cpuAverage("1"), []Member{member("a", cool(200, 200, -1, -1))}, 3, -1, false},

		// Federation: the pods of all members are pooled, keyed by member
		// and UID, so equal pod names in two members do not collide.
		{"two members, same pod names, pooled", 4, cpuUtil(50), []Member{member("a", cool(900, 900)), member("b", cool(100, 100))}, 4, 50, false},
		{"load on one member only scales the fleet", 4, cpuUtil(50), []Member{member("a", cool(1000, 1000)), member("b", cool(500, 500))}, 6, 75, false},
		{"a member without metrics: its pods count 0 % on scale-up", 4, cpuUtil(50),
			[]Member{member("a", cool(1000, 1000)), {Name: "b", Pods: member("b", cool(500, 500)).Pods, Missing: "metrics.k8s.io unreachable"}}, 4, 100, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resourceMetric(now, tc.metric, tc.current, tc.members, DefaultSettings())
			if tc.wantErr {
				if err == nil {
					t.Fatalf("got %d replicas, want an error", r.replicas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.replicas != tc.want {
				t.Errorf("replicas = %d, want %d", r.replicas, tc.want)
			}
			if tc.wantUtil >= 0 {
				if u := r.status.Resource.Current.AverageUtilization; u == nil || *u != tc.wantUtil {
					t.Errorf("utilisation = %v, want %d", u, tc.wantUtil)
				}
			}
		})
	}
}

// A pod's request missing for the resource is an error, as upstream.
func TestMissingRequestIsAnError(t *testing.T) {
	m := member("a", cool(500))
	delete(m.Pods[0].Spec.Containers[1].Resources.Requests, corev1.ResourceCPU)
	if _, err := resourceMetric(now, cpuUtil(50), 1, []Member{m}, DefaultSettings()); err == nil {
		t.Fatal("no error for a container without a cpu request")
	}
}

// A sample older than the pod (a pod of the same name that was replaced)
// is not the pod's.
func TestSampleOlderThanPodIsMissing(t *testing.T) {
	m := member("a", cool(1900, 1900))
	u := m.Usage["web-1"]
	u.Timestamp = m.Pods[1].CreationTimestamp.Add(-time.Second)
	m.Usage["web-1"] = u
	r, err := resourceMetric(now, cpuUtil(100), 2, []Member{m}, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	// As MissingMetricsNoChangeGt: the stale pod counts 0 %, 95 % is within tolerance.
	if r.replicas != 2 {
		t.Errorf("replicas = %d, want 2 (the stale sample ignored)", r.replicas)
	}
}

// ContainerResource takes one container's usage and request.
func TestContainerResource(t *testing.T) {
	m := member("a", cool(600, 1000, 1400)) // app gets 300, 500, 700 of 500m
	spec := v1alpha1.MetricSpec{Type: v1alpha1.ContainerResourceMetricSourceType, ContainerResource: &v1alpha1.ContainerResourceMetricSource{
		Name: corev1.ResourceCPU, Container: "app", Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}}
	r, err := resourceMetric(now, spec, 3, []Member{m}, DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if r.replicas != 5 || *r.status.ContainerResource.Current.AverageUtilization != 100 {
		t.Errorf("replicas %d utilisation %d, want 5 and 100", r.replicas, *r.status.ContainerResource.Current.AverageUtilization)
	}
}

// Pod-level requests (spec.resources) are the request of a Resource
// metric when set, as upstream's calculateRequests: a resource the pod
// level leaves out comes from the containers, and a ContainerResource
// metric always takes its container's.
func TestPodLevelRequests(t *testing.T) {
	podLevel := func(rl corev1.ResourceList) Member {
		m := member("a", cool(600, 1000, 1400)) // containers request 1 cpu in all
		for _, p := range m.Pods {
			p.Spec.Resources = &corev1.ResourceRequirements{Requests: rl}
		}
		return m
	}
	appAt := func(percent int32) v1alpha1.MetricSpec {
		return v1alpha1.MetricSpec{Type: v1alpha1.ContainerResourceMetricSourceType, ContainerResource: &v1alpha1.ContainerResourceMetricSource{
			Name: corev1.ResourceCPU, Container: "app", Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To(percent)}}}
	}
	cases := []struct {
		name     string
		metric   v1alpha1.MetricSpec
		m        Member
		want     int32
		wantUtil int32
	}{
		{"no pod-level requests: the containers' 1 cpu", cpuUtil(50), member("a", cool(600, 1000, 1400)), 6, 100},
		{"pod-level 2 cpu halves the utilisation", cpuUtil(50), podLevel(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}), 3, 50},
		{"pod-level 4 cpu: a quarter", cpuUtil(50), podLevel(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}), 2, 25},
		{"pod-level memory only: cpu from the containers", cpuUtil(50), podLevel(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}), 6, 100},
		{"a ContainerResource metric keeps the container's 500m", appAt(100), podLevel(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}), 3, 100},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, err := resourceMetric(now, tc.metric, 3, []Member{tc.m}, DefaultSettings())
			if err != nil {
				t.Fatal(err)
			}
			var util *int32
			if r.status.Resource != nil {
				util = r.status.Resource.Current.AverageUtilization
			} else {
				util = r.status.ContainerResource.Current.AverageUtilization
			}
			if r.replicas != tc.want || util == nil || *util != tc.wantUtil {
				t.Errorf("replicas %d utilisation %v, want %d and %d", r.replicas, util, tc.want, tc.wantUtil)
			}
		})
	}
}
