package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/autoscale"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// TestAutoscale runs a FederatedHorizontalPodAutoscaler on real
// metrics.k8s.io (metrics-server scraping kwok's fake kubelets in every
// member): load raised on one member's pods scales the FederatedReplicaSet
// up and the planner places the new replicas; with one member's metrics cut
// off, dropped load does not scale down; once they are back, it scales down
// after the (shortened) stabilisation window.
func TestAutoscale(t *testing.T) {
	if os.Getenv("REPLICAFED_E2E_PROVIDER") == "kind" {
		t.Skip("the kind members run no metrics-server")
	}
	e := newEnv(t, "autoscale")
	ctx := context.Background()
	name := "scaled"
	e.createAutoscaled(name, "500m")
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.FederatedHorizontalPodAutoscalerSpec{
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{APIVersion: "replicafed.io/v1alpha1", Kind: "FederatedReplicaSet", Name: name},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 6,
			Metrics: []v1alpha1.MetricSpec{{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			Behavior: &v1alpha1.HorizontalPodAutoscalerBehavior{ScaleDown: &v1alpha1.HPAScalingRules{StabilizationWindowSeconds: ptr.To[int32](20)}},
		},
	}
	if err := e.f.HubClient.Create(ctx, fhpa); err != nil {
		t.Fatal(err)
	}
	e.waitSplit(name, split{memberA: 1, memberB: 1})
	e.waitPodMetrics(memberA, name, 1)
	e.waitAutoscaler(name, "computing at 50 %", func(f *v1alpha1.FederatedHorizontalPodAutoscaler) bool {
		return meta.IsStatusConditionTrue(f.Status.Conditions, v1alpha1.AutoscalerScalingActive)
	})

	logf(t, "raising load on %s only", memberA)
	e.setUsage(memberA, name, "1500m")
	e.pollAutoscale("scale-up to at least 4, placed in the members", func(ctx context.Context) (bool, error) {
		f := e.getFRS(name)
		if *f.Spec.Replicas < 4 {
			return false, nil
		}
		return e.activeIn(ctx, name, memberA, memberB) == int(*f.Spec.Replicas), nil
	})
	up := *e.getFRS(name).Spec.Replicas
	logf(t, "scaled up to %d", up)

	logf(t, "cutting %s's metrics.k8s.io, dropping load everywhere", memberB)
	restore := e.cutMetrics(memberB)
	e.setUsage(memberA, name, "100m")
	e.setUsage(memberB, name, "100m")
	e.waitAutoscaler(name, "ScalingLimited MetricsMissing", func(f *v1alpha1.FederatedHorizontalPodAutoscaler) bool {
		c := meta.FindStatusCondition(f.Status.Conditions, v1alpha1.AutoscalerScalingLimited)
		return c != nil && c.Reason == autoscale.ReasonMetricsMissing
	})
	// Longer than the window and several syncs: partial data never scales down.
	held := time.Now().Add(40 * time.Second)
	for time.Now().Before(held) {
		if r := *e.getFRS(name).Spec.Replicas; r < up {
			t.Fatalf("scaled down to %d while %s's metrics were missing", r, memberB)
		}
		time.Sleep(2 * time.Second)
	}

	logf(t, "restoring %s's metrics.k8s.io", memberB)
	restore()
	e.pollAutoscale("scale-down to minReplicas once every member answers", func(context.Context) (bool, error) {
		return *e.getFRS(name).Spec.Replicas == 2, nil
	})
}

// autoscaleTimeout bounds each wait on the autoscaler: metrics-server needs
// two scrapes for a rate, new pods wait out the CPU initialisation window,
// and on a loaded machine the raft leader may change on the way.
const autoscaleTimeout = 5 * time.Minute

// createAutoscaled creates a FederatedReplicaSet of two replicas spread
// over memberA's and memberB's kwok nodes, deleted when the test ends. A
// non-empty cpu gives each pod a request of one CPU and has kwok report
// cpu of use for it (testcluster.UsageCPUAnnotation).
func (e *env) createAutoscaled(name, cpu string) {
	e.t.Helper()
	pod := corev1.PodSpec{
		Containers:  []corev1.Container{{Name: "app", Image: builder.DefaultImage}},
		Tolerations: []corev1.Toleration{testcluster.KwokToleration},
	}
	b := builder.FRS(e.ns, name).Replicas(2).Label("e2e-app", name)
	if cpu != "" {
		pod.Containers[0].Resources.Requests = corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("64Mi")}
		b = b.TemplateAnnotation(testcluster.UsageCPUAnnotation, cpu)
	}
	frs := b.PodSpec(pod).
		Placement(v1alpha1.Placement{Clusters: []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1)}}).Obj()
	if err := e.f.HubClient.Create(context.Background(), frs); err != nil {
		e.t.Fatalf("creating FederatedReplicaSet %s/%s: %v", e.ns, name, err)
	}
	e.t.Cleanup(func() { e.dumpIfFailed(); e.deleteAndWait(name) })
}

// pollAutoscale is poll with autoscaleTimeout.
func (e *env) pollAutoscale(what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), autoscaleTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, cond); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// setUsage sets kwok's cpu usage annotation on every pod of name in member.
func (e *env) setUsage(member, name, cpu string) {
	e.t.Helper()
	ctx := context.Background()
	pods, err := e.pods(ctx, member, name)
	if err != nil {
		e.t.Fatal(err)
	}
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, testcluster.UsageCPUAnnotation, cpu))
	for i := range pods {
		if err := e.memberClient(member).Patch(ctx, &pods[i], client.RawPatch("application/merge-patch+json", patch)); err != nil {
			e.t.Fatalf("setting usage of %s/%s: %v", member, pods[i].Name, err)
		}
	}
}

// waitPodMetrics waits until member's metrics.k8s.io reports at least n of
// the pods the member engine created for name.
func (e *env) waitPodMetrics(member, name string, n int) {
	e.t.Helper()
	cfg := e.f.Members[e.memberIndex(member)].Config()
	mc, err := metricsclient.NewForConfig(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.poll(fmt.Sprintf("PodMetrics of %s in %s", name, member), func(ctx context.Context) (bool, error) {
		l, err := mc.MetricsV1beta1().PodMetricses(e.ns).List(ctx, metav1.ListOptions{LabelSelector: selector(name).String()})
		if err != nil {
			return false, nil
		}
		return len(l.Items) >= n, nil
	})
}

func (e *env) memberIndex(member string) int {
	for i, m := range e.f.Members {
		if m.Name() == member {
			return i
		}
	}
	e.t.Fatalf("no member %s", member)
	return -1
}

func (e *env) waitAutoscaler(name, what string, cond func(*v1alpha1.FederatedHorizontalPodAutoscaler) bool) {
	e.t.Helper()
	e.pollAutoscale("autoscaler "+what, func(ctx context.Context) (bool, error) {
		f := &v1alpha1.FederatedHorizontalPodAutoscaler{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, f); err != nil {
			return false, nil
		}
		return cond(f), nil
	})
}

// activeIn counts the active pods of name in the members.
func (e *env) activeIn(ctx context.Context, name string, members ...string) int {
	n := 0
	for _, m := range members {
		c, err := e.count(ctx, m, name)
		if err != nil {
			return -1
		}
		n += c.active
	}
	return n
}

// cutMetrics removes member's metrics.k8s.io APIService, so its metrics
// cannot be read while the member itself answers, and returns how to put
// it back.
func (e *env) cutMetrics(member string) func() {
	e.t.Helper()
	ctx := context.Background()
	c := e.memberClient(member)
	svc := &unstructured.Unstructured{}
	svc.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"})
	if err := c.Get(ctx, client.ObjectKey{Name: "v1beta1.metrics.k8s.io"}, svc); err != nil {
		e.t.Fatal(err)
	}
	if err := c.Delete(ctx, svc); err != nil {
		e.t.Fatal(err)
	}
	restored := false
	put := func() {
		if restored {
			return
		}
		restored = true
		back := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": "v1beta1.metrics.k8s.io"}, "spec": svc.Object["spec"]}}
		if err := c.Create(ctx, back); err != nil {
			e.t.Errorf("restoring %s's metrics.k8s.io: %v", member, err)
		}
	}
	e.t.Cleanup(put)
	return put
}

// TestAutoscaleLeaderChange hands raft leadership over right after the
// autoscaler's first step: the new leader reads the step from the status
// and waits out the policy period instead of taking a second step at once.
func TestAutoscaleLeaderChange(t *testing.T) {
	if os.Getenv("REPLICAFED_E2E_PROVIDER") == "kind" {
		t.Skip("the kind members run no metrics-server")
	}
	e := newEnv(t, "autoscale-leader")
	ctx := context.Background()
	name := "stepped"
	e.createAutoscaled(name, "2")
	const period = 90 * time.Second
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.FederatedHorizontalPodAutoscalerSpec{
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{Kind: "FederatedReplicaSet", Name: name},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 12,
			Metrics: []v1alpha1.MetricSpec{{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}}}},
			Behavior: &v1alpha1.HorizontalPodAutoscalerBehavior{ScaleUp: &v1alpha1.HPAScalingRules{
				Policies: []v1alpha1.HPAScalingPolicy{{Type: v1alpha1.PodsScalingPolicy, Value: 2, PeriodSeconds: int32(period / time.Second)}}}},
		},
	}
	if err := e.f.HubClient.Create(ctx, fhpa); err != nil {
		t.Fatal(err)
	}
	e.pollAutoscale("the first step, 2 -> 4", func(context.Context) (bool, error) { return *e.getFRS(name).Spec.Replicas >= 4, nil })
	stepped := time.Now()
	if r := *e.getFRS(name).Spec.Replicas; r != 4 {
		t.Fatalf("first step went to %d, want 4 (2 pods per period)", r)
	}
	// Under load an election may be under way at this moment.
	old, err := e.f.WaitLeader(ctx, time.Minute)
	if err != nil {
		t.Fatalf("no leader to hand over from: %v", err)
	}
	if err := old.TransferLeadership(ctx); err != nil {
		t.Fatalf("handing leadership over: %v", err)
	}
	leader, err := e.f.WaitLeader(ctx, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	logf(t, "leadership moved from %s to %s %s after the first step", old.ID, leader.ID, time.Since(stepped).Round(time.Millisecond))
	// Until shortly before the period ends, the new leader takes no step.
	for time.Since(stepped) < period-15*time.Second {
		if r := *e.getFRS(name).Spec.Replicas; r > 4 {
			t.Fatalf("a second step to %d %s after the first, within the %s policy period, after the leader change", r, time.Since(stepped).Round(time.Second), period)
		}
		time.Sleep(2 * time.Second)
	}
	e.pollAutoscale("the next step once the period is over", func(context.Context) (bool, error) { return *e.getFRS(name).Spec.Replicas >= 6, nil })
	logf(t, "second step %s after the first", time.Since(stepped).Round(time.Second))
}

// TestAutoscalePodsMetric scales on a Pods metric read from the members'
// custom.metrics.k8s.io: memberA runs a real custom metrics adapter
// (custom-metrics-apiserver's test provider), memberB serves none. A
// value raised on memberA's pod scales the FederatedReplicaSet up (memberB's
// pod counts as missing, 0 on a scale-up) and memberB's row says why its
// data is missing.
func TestAutoscalePodsMetric(t *testing.T) {
	if os.Getenv("REPLICAFED_E2E_PROVIDER") == "kind" {
		t.Skip("the kind members run no custom metrics adapter")
	}
	e := newEnv(t, "autoscale-pods")
	ctx := context.Background()
	name := "per-pod"
	e.createAutoscaled(name, "")
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name},
		Spec: v1alpha1.FederatedHorizontalPodAutoscalerSpec{
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{Kind: "FederatedReplicaSet", Name: name},
			MinReplicas:    ptr.To[int32](2), MaxReplicas: 4,
			Metrics: []v1alpha1.MetricSpec{{Type: v1alpha1.PodsMetricSourceType, Pods: &v1alpha1.PodsMetricSource{
				Metric: v1alpha1.MetricIdentifier{Name: "requests_per_second"},
				Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}}},
		},
	}
	if err := e.f.HubClient.Create(ctx, fhpa); err != nil {
		t.Fatal(err)
	}
	e.waitSplit(name, split{memberA: 1, memberB: 1})
	pods, err := e.pods(ctx, memberA, name)
	if err != nil {
		t.Fatal(err)
	}
	logf(t, "setting requests_per_second to 50 on %s's pod", memberA)
	for _, p := range pods {
		if err := e.f.SetCustomMetric(ctx, memberA, e.ns, "pods", p.Name, "requests_per_second", resource.MustParse("50")); err != nil {
			t.Fatal(err)
		}
	}
	// 50 over 2 pods is 25 per pod against 10: 5 replicas, capped at 4.
	e.pollAutoscale("scale-up to 4 on memberA's metric, placed in the members", func(ctx context.Context) (bool, error) {
		return *e.getFRS(name).Spec.Replicas == 4 && e.activeIn(ctx, name, memberA, memberB) == 4, nil
	})
	e.waitAutoscaler(name, "reporting the metric and memberB's missing API", func(f *v1alpha1.FederatedHorizontalPodAutoscaler) bool {
		var rowB *v1alpha1.AutoscalerClusterStatus
		for i := range f.Status.Clusters {
			if f.Status.Clusters[i].Name == memberB {
				rowB = &f.Status.Clusters[i]
			}
		}
		return len(f.Status.CurrentMetrics) == 1 && f.Status.CurrentMetrics[0].Pods != nil &&
			rowB != nil && !rowB.MetricsAvailable && strings.Contains(rowB.Message, "custom.metrics.k8s.io not served")
	})
}
