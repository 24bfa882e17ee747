package health

import (
	"errors"
	"testing"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestObserve(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fail := errors.New("connection refused")
	type step struct {
		err        error
		wantHealth v1alpha1.ClusterHealth
		wantSince  int // seconds after t0
	}
	tests := []struct {
		name  string
		th    Thresholds
		steps []step
	}{
		{"first success with threshold 1 is healthy", Thresholds{Failure: 3, Success: 1}, []step{
			{nil, v1alpha1.ClusterHealthy, 0},
		}},
		{"failures below threshold keep healthy", Thresholds{Failure: 3, Success: 1}, []step{
			{nil, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterHealthy, 0},
		}},
		{"third failure makes unreachable, since that probe", Thresholds{Failure: 3, Success: 1}, []step{
			{nil, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterHealthy, 0},
			{fail, v1alpha1.ClusterUnreachable, 3}, {fail, v1alpha1.ClusterUnreachable, 3},
		}},
		{"a success resets the failure count", Thresholds{Failure: 2, Success: 1}, []step{
			{nil, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterHealthy, 0}, {nil, v1alpha1.ClusterHealthy, 0},
			{fail, v1alpha1.ClusterHealthy, 0}, {fail, v1alpha1.ClusterUnreachable, 4},
		}},
		{"recovery needs success threshold", Thresholds{Failure: 1, Success: 2}, []step{
			{fail, v1alpha1.ClusterUnreachable, 0}, {nil, v1alpha1.ClusterUnreachable, 0},
			{fail, v1alpha1.ClusterUnreachable, 0}, {nil, v1alpha1.ClusterUnreachable, 0}, {nil, v1alpha1.ClusterHealthy, 4},
		}},
		{"unknown until a threshold is met", Thresholds{Failure: 3, Success: 2}, []step{
			{nil, v1alpha1.ClusterHealthUnknown, 0}, {nil, v1alpha1.ClusterHealthy, 1},
		}},
		{"zero thresholds act as one", Thresholds{}, []step{
			{fail, v1alpha1.ClusterUnreachable, 0}, {nil, v1alpha1.ClusterHealthy, 1},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s State
			for i, st := range tc.steps {
				now := t0.Add(time.Duration(i) * time.Second)
				s = s.Observe(st.err, now, tc.th)
				if s.Health != st.wantHealth {
					t.Fatalf("step %d: health %s, want %s", i, s.Health, st.wantHealth)
				}
				if want := t0.Add(time.Duration(st.wantSince) * time.Second); !s.Since.Equal(want) {
					t.Fatalf("step %d: since %v, want %v", i, s.Since, want)
				}
				if st.err == nil && !s.LastSuccess.Equal(now) {
					t.Fatalf("step %d: LastSuccess %v, want %v", i, s.LastSuccess, now)
				}
				if (st.err != nil) != (s.LastError != "") {
					t.Fatalf("step %d: LastError %q for err %v", i, s.LastError, st.err)
				}
			}
		})
	}
}

func TestUnreachableFor(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s := State{}.Observe(errors.New("x"), t0, Thresholds{Failure: 1})
	if got := s.UnreachableFor(t0.Add(90 * time.Second)); got != 90*time.Second {
		t.Fatalf("UnreachableFor = %v, want 90s", got)
	}
	s = s.Observe(nil, t0.Add(time.Minute), Thresholds{Success: 1})
	if got := s.UnreachableFor(t0.Add(2 * time.Minute)); got != 0 {
		t.Fatalf("UnreachableFor healthy = %v, want 0", got)
	}
}
