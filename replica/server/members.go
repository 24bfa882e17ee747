package server

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/internal/metrics"
)

// monitorChanges re-plans everything when a member's health flips and asks
// the recorder to record the flip in raft (it retries until recorded), so a
// new leader measures the grace period from the original time instead of
// starting it again. It returns a function that forgets a member that left.
func monitorChanges(m *health.Monitor, rec *health.Recorder, fn func(), recovered func(cluster string)) func(cluster string) {
	var was sync.Map // cluster -> last health
	m.SetOnChange(func(cluster string, st health.State) {
		if prev, ok := was.Swap(cluster, st.Health); ok && prev == v1alpha1.ClusterUnreachable && st.Health == v1alpha1.ClusterHealthy {
			go recovered(cluster)
		}
		healthy := st.Health == v1alpha1.ClusterHealthy
		metrics.MemberHealthy.WithLabelValues(cluster).Set(map[bool]float64{true: 1, false: 0}[healthy])
		rec.Kick()
		fn()
	})
	return func(cluster string) { was.Delete(cluster) }
}

// forgetMember drops what this process keeps per member once the member has
// left: its preparation problem, its last health and its metric series.
func forgetMember(cluster string, problems *sync.Map, forgetHealth func(string)) {
	problems.Delete(cluster)
	if forgetHealth != nil {
		forgetHealth(cluster)
	}
	metrics.MemberHealthy.DeleteLabelValues(cluster)
	metrics.PodOperations.DeletePartialMatch(prometheus.Labels{"cluster": cluster})
}
