package testcluster_test

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// TestHubAndTwoMembers starts a hub and two members with fake nodes in one
// process and checks that a pod created in a member is scheduled and Ready,
// and that a stopped API server comes back on the same address.
func TestHubAndTwoMembers(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real control planes; skipped with -short") // Start runs in goroutines below
	}
	opts := []testcluster.Options{
		{Name: "hub"},
		{Name: "member1", Scheduler: true, Nodes: 2, NodeCPU: "4", NodeMemory: "8Gi", NodePods: 10},
		{Name: "member2", Scheduler: true, Nodes: 1},
	}
	clusters := make([]*testcluster.Cluster, len(opts))
	var wg sync.WaitGroup
	for i, o := range opts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i] = testcluster.Start(t, o)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	for _, c := range clusters[1:] {
		cs := kubernetes.NewForConfigOrDie(c.Config)
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: "default"},
			Spec: corev1.PodSpec{
				Containers:  []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
				Tolerations: []corev1.Toleration{testcluster.KwokToleration},
			},
		}
		if _, err := cs.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: creating pod: %v", c.Name, err)
		}
		var last *corev1.Pod
		err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			p, err := cs.CoreV1().Pods("default").Get(ctx, "probe", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = p
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			t.Fatalf("%s: pod never became Ready: %v; last status: %+v", c.Name, err, last.Status)
		}
		if last.Spec.NodeName == "" {
			t.Fatalf("%s: Ready pod has no node", c.Name)
		}
	}

	hub := clusters[0]
	hub.StopAPIServer()
	cs := kubernetes.NewForConfigOrDie(hub.Config)
	if _, err := cs.Discovery().ServerVersion(); err == nil {
		t.Fatalf("hub API server still answers after StopAPIServer")
	}
	if err := hub.StartAPIServer(ctx); err != nil {
		t.Fatalf("restarting hub API server: %v", err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		t.Fatalf("hub API server does not answer after restart: %v", err)
	}
	if v.Major != "1" || v.Minor != "36" {
		t.Fatalf("API server reports version %s.%s, want 1.36 (version ldflags)", v.Major, v.Minor)
	}
}
