package autoscaler

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

type engaged map[string]cluster.Cluster

func (e engaged) Cluster(name string) (cluster.Cluster, bool) { c, ok := e[name]; return c, ok }

// ClusterMembers reads Pods, Object and External metrics from a member
// running a real custom metrics adapter, and says "not served" for a
// member (the hub here) that runs none.
func TestClusterMembersReadCustomMetrics(t *testing.T) {
	mc := testcluster.Start(t, testcluster.Options{Name: "custom-metrics", Nodes: 1, Metrics: true, CustomMetrics: true})
	ctx := context.Background()
	ns := "shop"
	cs, err := kubernetes.NewForConfig(mc.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns, Labels: map[string]string{"app": "web"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	if _, err := cs.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}}
	if _, err := cs.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := mc.SetCustomMetric(ctx, ns, "pods", "web-0", "qps", resource.MustParse("25")); err != nil {
		t.Fatal(err)
	}
	if err := mc.SetCustomMetric(ctx, ns, "services", "web", "hits", resource.MustParse("1500m")); err != nil {
		t.Fatal(err)
	}
	member, err := cluster.New(mc.Config)
	if err != nil {
		t.Fatal(err)
	}
	hubCluster, err := cluster.New(hub.Cluster(t).Config)
	if err != nil {
		t.Fatal(err)
	}
	cms := &ClusterMembers{Engaged: engaged{"a": member, "hub": hubCluster}}
	a, _ := cms.Member("a")
	sel := labels.SelectorFromSet(labels.Set{"app": "web"})
	target := v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}

	pods := v1alpha1.MetricSpec{Type: v1alpha1.PodsMetricSourceType, Pods: &v1alpha1.PodsMetricSource{Metric: v1alpha1.MetricIdentifier{Name: "qps"}, Target: target}}
	v, err := a.CustomMetric(ctx, ns, sel, pods)
	if err != nil || v.Pods["web-0"].Value != 25000 {
		t.Errorf("Pods metric: %+v, %v; want web-0 at 25", v, err)
	}
	object := func(name string) v1alpha1.MetricSpec {
		return v1alpha1.MetricSpec{Type: v1alpha1.ObjectMetricSourceType, Object: &v1alpha1.ObjectMetricSource{
			DescribedObject: v1alpha1.MetricObjectReference{Kind: "Service", APIVersion: "v1", Name: name},
			Metric:          v1alpha1.MetricIdentifier{Name: "hits"}, Target: target}}
	}
	if v, err := a.CustomMetric(ctx, ns, sel, object("web")); err != nil || len(v.Values) != 1 || v.Values[0] != 1500 {
		t.Errorf("Object metric: %+v, %v; want 1.5", v, err)
	}
	if v, err := a.CustomMetric(ctx, ns, sel, object("absent")); err != nil || len(v.Values) != 0 {
		t.Errorf("Object metric of an object the member lacks: %+v, %v; want no value and no error", v, err)
	}
	// The test provider's fixed external series: foo=bar is 42.
	external := v1alpha1.MetricSpec{Type: v1alpha1.ExternalMetricSourceType, External: &v1alpha1.ExternalMetricSource{
		Metric: v1alpha1.MetricIdentifier{Name: "my-external-metric", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"foo": "bar"}}}, Target: target}}
	if v, err := a.CustomMetric(ctx, ns, sel, external); err != nil || len(v.Values) != 1 || v.Values[0] != 42000 {
		t.Errorf("External metric: %+v, %v; want 42", v, err)
	}

	h, _ := cms.Member("hub")
	if _, err := h.CustomMetric(ctx, ns, sel, pods); err == nil || !strings.Contains(err.Error(), "custom.metrics.k8s.io not served") {
		t.Errorf("a member without the adapter: %v, want custom.metrics.k8s.io not served", err)
	}
	if _, err := h.CustomMetric(ctx, ns, sel, external); err == nil || !strings.Contains(err.Error(), "external.metrics.k8s.io not served") {
		t.Errorf("a member without the adapter: %v, want external.metrics.k8s.io not served", err)
	}
}
