package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// BenchmarkCreate5000Pods creates 5,000 pods for one MemberReplicaSet in one
// real member, once with the kube-controller-manager default client limits
// (qps 20, burst 30) and once without limits. It reports pods/s and member
// API writes per pod (pod creates, status updates, events, owner object).
// Run with: go test ./controller/worker -run '^$' -bench Create5000 -benchtime 1x -timeout 30m
func BenchmarkCreate5000Pods(b *testing.B) {
	for _, c := range []struct {
		name string
		o    envOpts
	}{
		{"qps20_burst30", envOpts{qps: 20, burstQPS: 30, ownCluster: true}},
		{"unlimited", envOpts{unlimited: true, ownCluster: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := startEnv(b, c.o)
			const n = 5000
			b.ResetTimer()
			start := time.Now()
			e.set("bench", n)
			e.eventually("5000 pods", 25*time.Minute, func() (bool, string) {
				var l corev1.PodList
				if err := e.cl.List(context.Background(), &l, client.InNamespace(e.ns), client.MatchingLabels{"app": "bench"}); err != nil {
					return false, err.Error()
				}
				return len(l.Items) >= n, fmt.Sprintf("pods=%d", len(l.Items))
			})
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(n)/elapsed.Seconds(), "pods/s")
			b.ReportMetric(float64(e.writes.Load())/n, "writes/pod")
			b.ReportMetric(float64(e.podCreates.Load())/n, "podPOSTs/pod")
		})
	}
}
