package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Results of AutoscalerDecisions.
const (
	AutoscaleUp      = "scale_up"
	AutoscaleDown    = "scale_down"
	AutoscaleNone    = "unchanged"
	AutoscaleHeld    = "held_partial_data"
	AutoscaleError   = "error"
	AutoscaleBlocked = "member_conflict"
)

// AutoscalerDecisions counts the FederatedHorizontalPodAutoscaler
// controller's decisions on the leader.
var AutoscalerDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "replicafed_autoscaler_decisions_total",
	Help: "FederatedHorizontalPodAutoscaler computations on the leader, by result (scale_up, scale_down, unchanged, held_partial_data: no scale-down while a member's metrics are missing, error, member_conflict).",
}, []string{"result"})

func init() {
	crmetrics.Registry.MustRegister(AutoscalerDecisions)
}
