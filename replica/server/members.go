package server

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/worker"
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

// memberConditions adds to the registration's conditions of a member the
// one that says its worker fails to start here: the MemberCluster is
// written by the leader, whose worker is the one that syncs the member.
func memberConditions(registration func(string) []metav1.Condition, failing func(string) error) func(string) []metav1.Condition {
	return func(cluster string) []metav1.Condition {
		out := registration(cluster)
		if err := failing(cluster); err != nil {
			out = append(out, metav1.Condition{Type: worker.ConditionWorkerFailing, Status: metav1.ConditionTrue, Reason: "StartFailed",
				Message: "the member worker fails to start and is started again after a backoff: " + err.Error()})
		}
		return out
	}
}
