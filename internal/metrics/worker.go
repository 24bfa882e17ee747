package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// MemberWorkerRestarts counts the starts of a member worker that failed to
// start and is started again (controller/worker: a member that does not
// serve the MemberReplicaSet CRD yet, say).
var MemberWorkerRestarts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "replicafed_member_worker_restarts_total",
	Help: "Member workers that failed to start and are started again after a backoff, by member.",
}, []string{"cluster"})

func init() {
	crmetrics.Registry.MustRegister(MemberWorkerRestarts)
}
