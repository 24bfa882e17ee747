package autoscaler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/autoscale"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

var hub = &testcluster.Shared{}

func TestMain(m *testing.M) {
	hubCRDs, err := crds.Hub()
	if err != nil {
		panic(err)
	}
	hub.Options = testcluster.Options{Name: "autoscaler-hub", CRDs: hubCRDs}
	code := m.Run()
	hub.Stop()
	if code != 0 {
		panic(fmt.Sprintf("exit %d", code))
	}
}

// gate is the leadership the test decides.
type gate struct{ leading bool }

func (g *gate) Allowed() (context.Context, bool) { return context.Background(), g.leading }

// member is one member as the controller sees it: its pods with a cpu
// usage each, or no answer at all.
type member struct {
	pods     []*corev1.Pod
	usage    map[string]int64
	down     bool
	memberHP []string
	// perPod is each pod's value of every Pods metric; nil: the member
	// does not serve custom.metrics.k8s.io.
	perPod map[string]int64
}

func (m *member) Pods(context.Context, string, labels.Selector) ([]*corev1.Pod, error) {
	return m.pods, nil
}

func (m *member) PodMetrics(context.Context, string, labels.Selector) (map[string]autoscale.Usage, error) {
	if m.down {
		return nil, errors.New("the server is currently unable to handle the request")
	}
	out := map[string]autoscale.Usage{}
	for name, u := range m.usage {
		out[name] = autoscale.Usage{Timestamp: time.Now(), Window: 10 * time.Second,
			Containers: map[string]corev1.ResourceList{"web": {corev1.ResourceCPU: *resource.NewMilliQuantity(u, resource.DecimalSI)}}}
	}
	return out, nil
}

func (m *member) CustomMetric(_ context.Context, _ string, _ labels.Selector, spec v1alpha1.MetricSpec) (autoscale.Values, error) {
	if m.perPod == nil || spec.Pods == nil {
		return autoscale.Values{}, errors.New("custom.metrics.k8s.io not served")
	}
	out := autoscale.Values{Pods: map[string]autoscale.PodValue{}}
	for name, v := range m.perPod {
		out.Pods[name] = autoscale.PodValue{Value: v, Timestamp: time.Now()}
	}
	return out, nil
}

func (m *member) Autoscalers(context.Context, string, string) ([]string, error) {
	return m.memberHP, nil
}

type members map[string]*member

func (ms members) Member(name string) (Member, bool) {
	m, ok := ms[name]
	return m, ok
}

// loaded builds n ready pods requesting 1 cpu, each using usage milli-cpu.
func loaded(cluster string, n int, usage int64) *member {
	m := &member{usage: map[string]int64{}}
	start := metav1.NewTime(time.Now().Add(-time.Hour))
	for i := range n {
		name := fmt.Sprintf("web-%d", i)
		m.pods = append(m.pods, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(cluster + name), CreationTimestamp: start},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &start,
				Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: start}}},
		})
		m.usage[name] = usage
	}
	return m
}

// setup creates, in a namespace of its own, a FederatedReplicaSet of
// replicas spread as the cluster rows say and an autoscaler on it at 50 %
// cpu with a zero scale-down window.
func setup(t *testing.T, replicas int32, rows ...v1alpha1.ClusterStatus) (client.Client, *v1alpha1.FederatedHorizontalPodAutoscaler) {
	t.Helper()
	c := hub.Cluster(t)
	ns := testcluster.Namespace(t)
	cl, err := client.New(c.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	frs := builder.FRS(ns, "web").Replicas(replicas).Obj()
	if err := cl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	frs.Status.Clusters = rows
	frs.Status.Replicas = replicas
	frs.Status.Selector = metav1.FormatLabelSelector(frs.Spec.Selector)
	if err := cl.Status().Update(ctx, frs); err != nil {
		t.Fatal(err)
	}
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.FederatedHorizontalPodAutoscalerSpec{
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{Kind: "FederatedReplicaSet", Name: "web"},
			MinReplicas:    ptr.To[int32](1), MaxReplicas: 20,
			Metrics: []v1alpha1.MetricSpec{{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			Behavior: &v1alpha1.HorizontalPodAutoscalerBehavior{ScaleDown: &v1alpha1.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](0)}},
		},
	}
	if err := cl.Create(ctx, fhpa); err != nil {
		t.Fatal(err)
	}
	return cl, fhpa
}

func row(name string, n int32) v1alpha1.ClusterStatus {
	return v1alpha1.ClusterStatus{Name: name, Target: n, Replicas: n, Health: v1alpha1.ClusterHealthy}
}

func reconcile(t *testing.T, cl client.Client, ms members, g *gate, fhpa *v1alpha1.FederatedHorizontalPodAutoscaler) (*Reconciler, *v1alpha1.FederatedHorizontalPodAutoscaler, int32) {
	t.Helper()
	r := &Reconciler{Hub: cl, Members: ms, Gate: g, Settings: autoscale.DefaultSettings(), SyncPeriod: 15 * time.Second,
		MemberTimeout: 5 * time.Second, Clock: clocktesting.NewFakePassiveClock(time.Now())}
	got, replicas := again(t, r, cl, fhpa)
	return r, got, replicas
}

func again(t *testing.T, r *Reconciler, cl client.Client, fhpa *v1alpha1.FederatedHorizontalPodAutoscaler) (*v1alpha1.FederatedHorizontalPodAutoscaler, int32) {
	t.Helper()
	ctx := context.Background()
	res, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fhpa)})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != r.SyncPeriod {
		t.Errorf("requeue after %s, want the sync period", res.RequeueAfter)
	}
	got := &v1alpha1.FederatedHorizontalPodAutoscaler{}
	if err := cl.Get(ctx, client.ObjectKeyFromObject(fhpa), got); err != nil {
		t.Fatal(err)
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := cl.Get(ctx, types.NamespacedName{Namespace: fhpa.Namespace, Name: "web"}, frs); err != nil {
		t.Fatal(err)
	}
	return got, *frs.Spec.Replicas
}

func wantCondition(t *testing.T, f *v1alpha1.FederatedHorizontalPodAutoscaler, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := meta.FindStatusCondition(f.Status.Conditions, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("condition %s = %+v, want %s %s", typ, c, status, reason)
	}
}

// Load on one member scales the FederatedReplicaSet up through its scale
// subresource; status says so.
func TestScaleUpOnOneMembersLoad(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 2), row("b", 2))
	ms := members{"a": loaded("a", 2, 1000), "b": loaded("b", 2, 500)}
	_, got, replicas := reconcile(t, cl, ms, &gate{leading: true}, fhpa)
	if replicas != 6 {
		t.Fatalf("spec.replicas = %d, want 6 (75 %% of requests against 50 %%)", replicas)
	}
	if got.Status.DesiredReplicas != 6 || got.Status.LastScaleTime == nil {
		t.Errorf("status desired %d lastScaleTime %v, want 6 and set", got.Status.DesiredReplicas, got.Status.LastScaleTime)
	}
	if u := got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization; u == nil || *u != 75 {
		t.Errorf("current utilisation %v, want 75", u)
	}
	if len(got.Status.Clusters) != 2 || got.Status.Clusters[0].PodsWithMetrics != 2 {
		t.Errorf("cluster rows %+v, want a and b with 2 pods with metrics each", got.Status.Clusters)
	}
	wantCondition(t, got, v1alpha1.AutoscalerAbleToScale, metav1.ConditionTrue, "SucceededRescale")
	wantCondition(t, got, v1alpha1.AutoscalerScalingActive, metav1.ConditionTrue, "ValidMetricFound")
}

// While one member's metrics are missing, idle pods elsewhere do not scale
// the FederatedReplicaSet down; once it answers again, they do.
func TestNoScaleDownOnPartialData(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 3), row("b", 1))
	b := loaded("b", 1, 100)
	b.down = true
	ms := members{"a": loaded("a", 3, 100), "b": b}
	r, got, replicas := reconcile(t, cl, ms, &gate{leading: true}, fhpa)
	if replicas != 4 {
		t.Fatalf("spec.replicas = %d on partial data, want 4", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerScalingLimited, metav1.ConditionTrue, autoscale.ReasonMetricsMissing)
	if got.Status.Clusters[1].MetricsAvailable {
		t.Errorf("member b's row says metrics available: %+v", got.Status.Clusters[1])
	}
	b.down = false
	got, replicas = again(t, r, cl, fhpa)
	if replicas != 1 {
		t.Fatalf("spec.replicas = %d with every member answering at 10 %%, want 1", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerScalingLimited, metav1.ConditionFalse, "DesiredWithinRange")
}

// A follower computes nothing and writes nothing.
func TestFollowerDoesNotWrite(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 4))
	_, got, replicas := reconcile(t, cl, members{"a": loaded("a", 4, 1000)}, &gate{leading: false}, fhpa)
	if replicas != 4 || len(got.Status.Conditions) != 0 {
		t.Errorf("follower wrote: replicas %d, conditions %+v", replicas, got.Status.Conditions)
	}
}

// A member HorizontalPodAutoscaler on the MemberReplicaSet is reported and
// the federated autoscaler stops scaling rather than fight it.
func TestMemberAutoscalerReportedNotFought(t *testing.T) {
	cl, fhpa := setup(t, 2, row("a", 2))
	a := loaded("a", 2, 1000)
	a.memberHP = []string{"web-hpa"}
	_, got, replicas := reconcile(t, cl, members{"a": a}, &gate{leading: true}, fhpa)
	if replicas != 2 {
		t.Errorf("spec.replicas = %d, want 2 (no scaling while a member HPA acts)", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerMemberConflict, metav1.ConditionTrue, "MemberHPATargetsMemberReplicaSet")
	wantCondition(t, got, v1alpha1.AutoscalerAbleToScale, metav1.ConditionFalse, v1alpha1.AutoscalerMemberConflict)
}

// A count changed by someone else between the read and the write is not
// overwritten: the write carries the resourceVersion read.
func TestScaleWriteIsConditional(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 4))
	r := &Reconciler{Hub: &racingClient{Client: cl}, Members: members{"a": loaded("a", 4, 1000)}, Gate: &gate{leading: true},
		Settings: autoscale.DefaultSettings(), SyncPeriod: 15 * time.Second, MemberTimeout: 5 * time.Second,
		Clock: clocktesting.NewFakePassiveClock(time.Now())}
	got, replicas := again(t, r, cl, fhpa)
	if replicas != 9 {
		t.Errorf("spec.replicas = %d, want the other writer's 9", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerAbleToScale, metav1.ConditionFalse, "FailedUpdateScale")
	if len(got.Status.RecentScaleEvents) != 0 {
		t.Errorf("a step that failed is still recorded: %+v", got.Status.RecentScaleEvents)
	}
}

// racingClient scales the FederatedReplicaSet to 9 (as a user or a former
// leader would) right after the controller read its scale.
type racingClient struct {
	client.Client
}

func (c *racingClient) SubResource(sub string) client.SubResourceClient {
	return &racingSub{SubResourceClient: c.Client.SubResource(sub), c: c.Client}
}

type racingSub struct {
	client.SubResourceClient
	c client.Client
}

func (s *racingSub) Get(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceGetOption) error {
	if err := s.SubResourceClient.Get(ctx, obj, sub, opts...); err != nil {
		return err
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := s.c.Get(ctx, client.ObjectKeyFromObject(obj), frs); err != nil {
		return err
	}
	frs.Spec.Replicas = ptr.To[int32](9)
	return s.c.Update(ctx, frs)
}

// A new leader (a reconciler with no history) reads the scale events the
// old one wrote into the status and keeps the rate policy.
func TestNewLeaderKeepsRatePolicies(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 4))
	fhpa.Spec.Behavior.ScaleUp = &v1alpha1.HPAScalingRules{Policies: []v1alpha1.HPAScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}}
	if err := cl.Update(context.Background(), fhpa); err != nil {
		t.Fatal(err)
	}
	ms := members{"a": loaded("a", 4, 2000)}
	_, got, replicas := reconcile(t, cl, ms, &gate{leading: true}, fhpa)
	if replicas != 6 || len(got.Status.RecentScaleEvents) != 1 || got.Status.RecentScaleEvents[0].Change != 2 {
		t.Fatalf("first leader: replicas %d, events %+v; want 6 and one event of +2", replicas, got.Status.RecentScaleEvents)
	}
	// The FederatedReplicaSet's status catches up; a new leader takes over.
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(fhpa), frs); err != nil {
		t.Fatal(err)
	}
	frs.Status.Clusters, frs.Status.Replicas = []v1alpha1.ClusterStatus{row("a", 6)}, 6
	if err := cl.Status().Update(context.Background(), frs); err != nil {
		t.Fatal(err)
	}
	ms["a"] = loaded("a", 6, 2000)
	_, got, replicas = reconcile(t, cl, ms, &gate{leading: true}, fhpa)
	if replicas != 6 {
		t.Errorf("new leader scaled to %d within the policy period, want 6", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerScalingLimited, metav1.ConditionTrue, "ScaleUpLimit")
}

// podsMetric switches the autoscaler to a Pods metric "qps" at an average
// of 10 per pod.
func podsMetric(t *testing.T, cl client.Client, fhpa *v1alpha1.FederatedHorizontalPodAutoscaler) {
	t.Helper()
	fhpa.Spec.Metrics = []v1alpha1.MetricSpec{{Type: v1alpha1.PodsMetricSourceType, Pods: &v1alpha1.PodsMetricSource{
		Metric: v1alpha1.MetricIdentifier{Name: "qps"},
		Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}}
	if err := cl.Update(context.Background(), fhpa); err != nil {
		t.Fatal(err)
	}
}

// A Pods metric is read from every member's custom.metrics.k8s.io; a
// member that does not serve it is reported and holds scale-down, but
// not the scale-up the others' load asks for.
func TestPodsMetricAcrossMembers(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 2), row("b", 2))
	podsMetric(t, cl, fhpa)
	a, b := loaded("a", 2, 0), loaded("b", 2, 0)
	a.perPod = map[string]int64{"web-0": 30000, "web-1": 30000} // milli: 30 per pod
	r, got, replicas := reconcile(t, cl, members{"a": a, "b": b}, &gate{leading: true}, fhpa)
	// 60 over 4 pods (b's count 0 on a scale-up) is 15 per pod: 1.5 × 4.
	if replicas != 6 {
		t.Fatalf("spec.replicas = %d, want 6", replicas)
	}
	if v := got.Status.CurrentMetrics[0].Pods.Current.AverageValue; v == nil || v.MilliValue() != 30000 {
		t.Errorf("current average %v, want 30", v)
	}
	if row := got.Status.Clusters[1]; row.MetricsAvailable || row.Message != "custom.metrics.k8s.io not served" {
		t.Errorf("row of b %+v, want metrics unavailable: custom.metrics.k8s.io not served", row)
	}

	a.perPod = map[string]int64{"web-0": 1000, "web-1": 1000}
	got, replicas = again(t, r, cl, fhpa)
	if replicas != 6 {
		t.Errorf("spec.replicas = %d with b's metric missing, want 6 (no scale-down on partial data)", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerScalingLimited, metav1.ConditionTrue, autoscale.ReasonMetricsMissing)
}

// A leader that dies after recording a step in the status and before
// writing the scale leaves one decision, not two: the next leader counts
// the recorded step against the rate policy, so it takes no second step
// within the policy period, and after it one step of the policy's size.
func TestLeaderKilledBetweenStatusAndScaleWrites(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 4))
	fhpa.Spec.Behavior.ScaleUp = &v1alpha1.HPAScalingRules{Policies: []v1alpha1.HPAScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 2, PeriodSeconds: 60}}}
	if err := cl.Update(context.Background(), fhpa); err != nil {
		t.Fatal(err)
	}
	ms := members{"a": loaded("a", 4, 2000)}
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, kill := context.WithCancel(context.Background())
	defer kill()
	dying := &Reconciler{Hub: &killedOnScale{Client: cl, kill: kill}, Members: ms, Gate: &gate{leading: true},
		Settings: autoscale.DefaultSettings(), SyncPeriod: 15 * time.Second, MemberTimeout: 5 * time.Second, Clock: clk}
	if _, err := dying.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(fhpa)}); err == nil {
		t.Fatal("the killed leader's reconcile succeeded, want it cut off")
	}
	got := &v1alpha1.FederatedHorizontalPodAutoscaler{}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(fhpa), got); err != nil {
		t.Fatal(err)
	}
	if len(got.Status.RecentScaleEvents) != 1 || got.Status.RecentScaleEvents[0].Change != 2 {
		t.Fatalf("recorded events %+v, want the one step of +2 the killed leader recorded", got.Status.RecentScaleEvents)
	}

	// A new leader: a new reconciler, no history, the same API server.
	clk.Step(time.Second)
	next := &Reconciler{Hub: cl, Members: ms, Gate: &gate{leading: true}, Settings: autoscale.DefaultSettings(),
		SyncPeriod: 15 * time.Second, MemberTimeout: 5 * time.Second, Clock: clk}
	got, replicas := again(t, next, cl, fhpa)
	if replicas != 4 {
		t.Fatalf("new leader scaled to %d within the period of the recorded step, want 4", replicas)
	}
	wantCondition(t, got, v1alpha1.AutoscalerScalingLimited, metav1.ConditionTrue, "ScaleUpLimit")
	clk.Step(61 * time.Second)
	if _, replicas = again(t, next, cl, fhpa); replicas != 6 {
		t.Fatalf("after the period the new leader scaled to %d, want one step of 2 to 6", replicas)
	}
}

// killedOnScale stands for a process killed as it was about to write the
// scale: the write does not happen, and nothing after it reaches the API
// server (the context is cancelled).
type killedOnScale struct {
	client.Client
	kill context.CancelFunc
}

func (c *killedOnScale) SubResource(sub string) client.SubResourceClient {
	return &killedSub{SubResourceClient: c.Client.SubResource(sub), sub: sub, kill: c.kill}
}

type killedSub struct {
	client.SubResourceClient
	sub  string
	kill context.CancelFunc
}

func (s *killedSub) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.sub == "scale" {
		s.kill()
		return context.Canceled
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

// Pod-level requests in the template (which the member cache does not
// keep on pods) are what utilisation is measured against.
func TestPodLevelRequestsFromTemplate(t *testing.T) {
	cl, fhpa := setup(t, 4, row("a", 4))
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(fhpa), frs); err != nil {
		t.Fatal(err)
	}
	frs.Spec.Template.Spec.Resources = &corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}
	if err := cl.Update(context.Background(), frs); err != nil {
		t.Fatal(err)
	}
	// 1 cpu used of 2 requested at the pod level is the 50 % target; of the
	// containers' 1 cpu it would be 100 % and ask for 8.
	_, got, replicas := reconcile(t, cl, members{"a": loaded("a", 4, 1000)}, &gate{leading: true}, fhpa)
	if replicas != 4 {
		t.Errorf("spec.replicas = %d, want 4 (utilisation of the pod-level request)", replicas)
	}
	if u := got.Status.CurrentMetrics[0].Resource.Current.AverageUtilization; u == nil || *u != 50 {
		t.Errorf("current utilisation %v, want 50", u)
	}
}
