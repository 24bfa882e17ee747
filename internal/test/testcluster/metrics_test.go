package testcluster_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// TestMetricsServerScrapesKwok runs metrics-server against kwok's fake
// kubelets and reads PodMetrics through the API server's metrics.k8s.io:
// a pod's CPU and memory usage follow its usage annotations, also after
// they change.
func TestMetricsServerScrapesKwok(t *testing.T) {
	c := testcluster.Start(t, testcluster.Options{Name: "metrics", Scheduler: true, Nodes: 1, Metrics: true})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(c.Config)
	mc := metricsclient.NewForConfigOrDie(c.Config)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "busy", Namespace: "default", Labels: map[string]string{"app": "busy"},
			Annotations: map[string]string{testcluster.UsageCPUAnnotation: "250m", testcluster.UsageMemoryAnnotation: "64Mi"}},
		Spec: corev1.PodSpec{
			Containers:  []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
			Tolerations: []corev1.Toleration{testcluster.KwokToleration},
		},
	}
	if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsage(ctx, t, mc, "busy", resource.MustParse("250m"), resource.MustParse("64Mi"))

	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"900m"}}}`, testcluster.UsageCPUAnnotation)
	if _, err := cs.CoreV1().Pods("default").Patch(ctx, "busy", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUsage(ctx, t, mc, "busy", resource.MustParse("900m"), resource.MustParse("64Mi"))
}

// waitUsage polls PodMetrics until the pod's CPU is within 10 % of cpu (a
// rate between two scrapes) and its memory equals mem.
func waitUsage(ctx context.Context, t *testing.T, mc metricsclient.Interface, name string, cpu, mem resource.Quantity) {
	t.Helper()
	var last string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		pm, err := mc.MetricsV1beta1().PodMetricses("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		if len(pm.Containers) != 1 {
			last = fmt.Sprintf("containers %+v", pm.Containers)
			return false, nil
		}
		u := pm.Containers[0].Usage
		gotCPU, gotMem := u[corev1.ResourceCPU], u[corev1.ResourceMemory]
		last = fmt.Sprintf("cpu %s memory %s (window %s)", gotCPU.String(), gotMem.String(), pm.Window.Duration)
		diff := gotCPU.MilliValue() - cpu.MilliValue()
		return diff*10 <= cpu.MilliValue() && -diff*10 <= cpu.MilliValue() && gotMem.Cmp(mem) == 0, nil
	})
	if err != nil {
		t.Fatalf("PodMetrics %s never showed cpu %s memory %s; last: %s", name, cpu.String(), mem.String(), last)
	}
}
