package metrics

import (
	"testing"

	dto "github.com/prometheus/client_model/go"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/replicafed/replicafed/internal/version"
)

// The build_info series is served from controller-runtime's registry with the
// binary's identity as labels and the value 1.
func TestBuildInfoRegistered(t *testing.T) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatalf("gathering metrics: %v", err)
	}
	var mf *dto.MetricFamily
	for _, f := range families {
		if f.GetName() == "replicafed_build_info" {
			mf = f
		}
	}
	if mf == nil {
		t.Fatal("replicafed_build_info is not registered")
	}
	if len(mf.Metric) != 1 {
		t.Fatalf("want one series, got %d", len(mf.Metric))
	}
	m := mf.Metric[0]
	labels := map[string]string{}
	for _, l := range m.Label {
		labels[l.GetName()] = l.GetValue()
	}
	v := version.Get()
	want := map[string]string{"version": v.Version, "commit": v.Commit, "goversion": v.GoVersion}
	for k, w := range want {
		if labels[k] != w || w == "" {
			t.Errorf("label %s = %q, want %q (non-empty)", k, labels[k], w)
		}
	}
	if got := m.GetGauge().GetValue(); got != 1 {
		t.Errorf("value = %v, want 1", got)
	}
}
