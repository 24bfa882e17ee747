package autoscale

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func spec(minR, maxR int32, metrics ...v1alpha1.MetricSpec) v1alpha1.FederatedHorizontalPodAutoscalerSpec {
	return v1alpha1.FederatedHorizontalPodAutoscalerSpec{
		ScaleTargetRef: v1alpha1.CrossVersionObjectReference{Kind: "FederatedReplicaSet", Name: "web"},
		MinReplicas:    ptr.To(minR), MaxReplicas: maxR, Metrics: metrics,
	}
}

func condition(t *testing.T, d Decision, typ string) metav1.Condition {
	t.Helper()
	for _, c := range d.Conditions {
		if c.Type == typ {
			return c
		}
	}
	t.Fatalf("no %s condition in %+v", typ, d.Conditions)
	return metav1.Condition{}
}

// loadOf builds n cool pods in one member, each at usage milli-cores.
func loadOf(name string, n int, usage int64) Member {
	ps := make([]podSpec, n)
	for i := range ps {
		ps[i] = podSpec{usage: usage}
	}
	return member(name, ps)
}

// TestDecide follows one decision through bounds, metrics, stabilisation,
// rate policies and the partition rule, against the HorizontalPodAutoscaler
// controller's documented behaviour.
func TestDecide(t *testing.T) {
	seeded := func(at time.Time, r int32) *History {
		return &History{Recommendations: []Recommendation{{At: at, Replicas: r}}}
	}
	cases := []struct {
		name        string
		spec        v1alpha1.FederatedHorizontalPodAutoscalerSpec
		current     int32
		members     []Member
		history     *History
		want        int32
		wantLimited string // reason of ScalingLimited; "" not checked
		wantAble    string // reason of AbleToScale; "" not checked
		wantActive  bool
	}{
		{name: "above max: to max without metrics", spec: spec(1, 10, cpuUtil(50)), current: 12, history: &History{}, want: 10, wantActive: true},
		{name: "below min: to min", spec: spec(3, 10, cpuUtil(50)), current: 2, history: &History{}, want: 3, wantActive: true},
		{name: "first sight seeds the window: no immediate scale-down", spec: spec(1, 10, cpuUtil(50)), current: 6,
			members: []Member{loadOf("a", 6, 100)}, history: &History{}, want: 6, wantAble: "ScaleDownStabilized", wantActive: true},
		{name: "scale-down after the 300 s window", spec: spec(1, 10, cpuUtil(50)), current: 6,
			members: []Member{loadOf("a", 6, 100)}, history: seeded(now.Add(-301*time.Second), 6), want: 2,
			wantLimited: "DesiredWithinRange", wantAble: "ReadyForNewScale", wantActive: true},
		{name: "scale-down held by a higher recommendation within the window", spec: spec(1, 10, cpuUtil(50)), current: 6,
			members: []Member{loadOf("a", 6, 100)}, history: seeded(now.Add(-299*time.Second), 5), want: 5, wantAble: "ScaleDownStabilized", wantActive: true},
		{name: "scale-down floored by minReplicas", spec: spec(4, 10, cpuUtil(50)), current: 6,
			members: []Member{loadOf("a", 6, 100)}, history: seeded(now.Add(-301*time.Second), 6), want: 4, wantLimited: "TooFewReplicas", wantActive: true},
		{name: "default scale-up: max(100 %, 4 pods) per 15 s", spec: spec(1, 100, cpuUtil(50)), current: 2,
			members: []Member{loadOf("a", 2, 5000)}, history: &History{}, want: 6, wantLimited: "ScaleUpLimit", wantActive: true},
		{name: "scale-up capped by maxReplicas", spec: spec(1, 5, cpuUtil(50)), current: 2,
			members: []Member{loadOf("a", 2, 5000)}, history: &History{}, want: 5, wantLimited: "TooManyReplicas", wantActive: true},
		{name: "a failed metric blocks a scale-down", spec: spec(1, 10, cpuUtil(50), cpuAverage("0")), current: 6,
			members: []Member{loadOf("a", 6, 100)}, history: seeded(now.Add(-301*time.Second), 6), want: 6, wantActive: false},
		{name: "a failed metric does not block a scale-up", spec: spec(1, 10, cpuUtil(50), cpuAverage("0")), current: 2,
			members: []Member{loadOf("a", 2, 1500)}, history: &History{}, want: 6, wantActive: true},
		{name: "no metric at all: nothing scales", spec: spec(1, 10, cpuUtil(50)), current: 3,
			members: []Member{loadOf("a", 3, -1)}, history: &History{}, want: 3, wantActive: false},
		{name: "empty metrics mean cpu at 80 %", spec: spec(1, 10), current: 2,
			members: []Member{loadOf("a", 2, 1600)}, history: &History{}, want: 4, wantActive: true},

		// The partition rule.
		{name: "a member's metrics missing: no scale-down on partial data", spec: spec(1, 10, cpuUtil(50)), current: 4,
			members: []Member{loadOf("a", 3, 100), {Name: "b", Pods: loadOf("b", 1, 100).Pods, Missing: "unreachable"}},
			history: seeded(now.Add(-301*time.Second), 4), want: 4, wantLimited: ReasonMetricsMissing, wantActive: true},
		{name: "a member's metrics missing: scale-up goes on, its pods at 0 %", spec: spec(1, 20, cpuUtil(50)), current: 4,
			members: []Member{loadOf("a", 2, 2000), {Name: "b", Pods: loadOf("b", 2, 100).Pods, Missing: "unreachable"}},
			history: &History{}, want: 8, wantLimited: ReasonMetricsMissing, wantActive: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(Input{Now: now, Spec: tc.spec, Current: tc.current, Members: tc.members, Settings: DefaultSettings()}, tc.history)
			if d.Desired != tc.want || d.Rescale != (tc.want != tc.current) {
				t.Errorf("desired %d rescale %v, want %d (err %v, conditions %+v)", d.Desired, d.Rescale, tc.want, d.Err, d.Conditions)
			}
			if tc.current >= ptr.Deref(tc.spec.MinReplicas, 1) && tc.current <= tc.spec.MaxReplicas {
				if c := condition(t, d, v1alpha1.AutoscalerScalingActive); (c.Status == metav1.ConditionTrue) != tc.wantActive {
					t.Errorf("ScalingActive %s (%s: %s), want %v", c.Status, c.Reason, c.Message, tc.wantActive)
				}
			}
			if tc.wantLimited != "" {
				if c := condition(t, d, v1alpha1.AutoscalerScalingLimited); c.Reason != tc.wantLimited {
					t.Errorf("ScalingLimited reason %s (%s), want %s", c.Reason, c.Message, tc.wantLimited)
				}
			}
			if tc.wantAble != "" {
				if c := condition(t, d, v1alpha1.AutoscalerAbleToScale); c.Reason != tc.wantAble {
					t.Errorf("AbleToScale reason %s, want %s", c.Reason, tc.wantAble)
				}
			}
		})
	}
}

// TestPartialDataNotRemembered: a recommendation made while a member was
// missing is the held one, so once the member answers again the window
// does not carry the low partial value forward (and still holds the
// current count until it has passed).
func TestPartialDataNotRemembered(t *testing.T) {
	h := &History{Recommendations: []Recommendation{{At: now.Add(-400 * time.Second), Replicas: 4}}}
	partial := []Member{loadOf("a", 3, 100), {Name: "b", Pods: loadOf("b", 1, 100).Pods, Missing: "unreachable"}}
	d := Decide(Input{Now: now, Spec: spec(1, 10, cpuUtil(50)), Current: 4, Members: partial, Settings: DefaultSettings()}, h)
	if d.Rescale {
		t.Fatalf("scaled to %d on partial data", d.Desired)
	}
	whole := []Member{loadOf("a", 3, 100), loadOf("b", 1, 100)}
	d = Decide(Input{Now: now.Add(time.Minute), Spec: spec(1, 10, cpuUtil(50)), Current: 4, Members: whole, Settings: DefaultSettings()}, h)
	if d.Desired != 4 {
		t.Errorf("desired %d a minute after the partial decision, want 4 (held within the window)", d.Desired)
	}
	d = Decide(Input{Now: now.Add(302 * time.Second), Spec: spec(1, 10, cpuUtil(50)), Current: 4, Members: whole, Settings: DefaultSettings()}, h)
	if d.Desired != 1 {
		t.Errorf("desired %d after the window, want 1", d.Desired)
	}
}

// TestRatePolicies: the limits of the upstream behaviour examples, with the
// scale events of past decisions.
func TestRatePolicies(t *testing.T) {
	pods4per60 := v1alpha1.HPAScalingPolicy{Type: v1alpha1.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}
	pct10per60 := v1alpha1.HPAScalingPolicy{Type: v1alpha1.PercentScalingPolicy, Value: 10, PeriodSeconds: 60}
	cases := []struct {
		name             string
		rules            *v1alpha1.HPAScalingRules
		current, desired int32
		downs            []ScaleEvent
		want             int32
	}{
		{"Max picks the larger change: 10 % of 80 over 4 pods", &v1alpha1.HPAScalingRules{Policies: []v1alpha1.HPAScalingPolicy{pods4per60, pct10per60}}, 80, 10, nil, 72},
		{"Min picks the smaller change", &v1alpha1.HPAScalingRules{SelectPolicy: ptr.To(v1alpha1.MinChangePolicySelect), Policies: []v1alpha1.HPAScalingPolicy{pods4per60, pct10per60}}, 80, 10, nil, 76},
		{"Disabled: no scale-down", &v1alpha1.HPAScalingRules{SelectPolicy: ptr.To(v1alpha1.DisabledPolicySelect)}, 80, 10, nil, 80},
		{"changes within the period count: 8 removed 30 s ago leave none", &v1alpha1.HPAScalingRules{Policies: []v1alpha1.HPAScalingPolicy{pct10per60}}, 72, 10,
			[]ScaleEvent{{At: now.Add(-30 * time.Second), Change: 8}}, 72},
		{"changes before the period do not", &v1alpha1.HPAScalingRules{Policies: []v1alpha1.HPAScalingPolicy{pct10per60}}, 72, 10,
			[]ScaleEvent{{At: now.Add(-61 * time.Second), Change: 8}}, 64},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.rules.StabilizationWindowSeconds = ptr.To[int32](0)
			b := BehaviorOf(&v1alpha1.HorizontalPodAutoscalerBehavior{ScaleDown: tc.rules}, DefaultDownscaleStabilization)
			h := &History{Downs: tc.downs}
			got, _, _ := h.limit(now, b, tc.current, tc.desired, 1, 100)
			if got != tc.want {
				t.Errorf("limited to %d, want %d", got, tc.want)
			}
		})
	}
}

// TestRecordScale keeps events only as long as the longest policy period.
func TestRecordScale(t *testing.T) {
	b := BehaviorOf(nil, DefaultDownscaleStabilization)
	h := &History{}
	h.RecordScale(now, b, 2, 6)
	h.RecordScale(now.Add(20*time.Second), b, 6, 10)
	if len(h.Ups) != 1 || h.Ups[0].Change != 4 {
		t.Errorf("scale-up events %+v, want only the last (+4): the first is past the 15 s period", h.Ups)
	}
	h.RecordScale(now.Add(30*time.Second), b, 10, 7)
	if len(h.Downs) != 1 || h.Downs[0].Change != 3 {
		t.Errorf("scale-down events %+v, want one of 3", h.Downs)
	}
}

// The scale events written to the status give a new leader the same rate
// limits as the old one had.
func TestEventsSurviveALeaderChange(t *testing.T) {
	b := BehaviorOf(&v1alpha1.HorizontalPodAutoscalerBehavior{ScaleUp: &v1alpha1.HPAScalingRules{
		Policies: []v1alpha1.HPAScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 4, PeriodSeconds: 60}}}}, DefaultDownscaleStabilization)
	old := &History{}
	old.RecordScale(now.Add(-50*time.Second), b, 6, 4)
	old.RecordScale(now.Add(-20*time.Second), b, 4, 8)
	h := HistoryFrom(old.Events())
	// As upstream: the period started at 8 - 4 added + 2 removed = 6 pods.
	if got, _, _ := h.limit(now, b, 8, 20, 1, 100); got != 10 {
		t.Errorf("new leader scales to %d, want 10: the period began at 6 pods", got)
	}
	if fresh, _, _ := (&History{}).limit(now, b, 8, 20, 1, 100); fresh != 12 {
		t.Errorf("without the events: %d, want 12 (the check is meaningful)", fresh)
	}
	if ev := old.Events(); len(ev) != 2 || ev[0].Change != -2 || ev[1].Change != 4 {
		t.Errorf("events %+v, want -2 then +4, oldest first", ev)
	}
}
