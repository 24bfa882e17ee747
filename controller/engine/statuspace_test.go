package engine

import (
	"testing"
	"time"

	"github.com/replicafed/replicafed/internal/fedref"
)

// TestStatusPaceDeferBusy: a deferral's bound runs from the first time a
// key's write was deferred, and starts afresh once the status was written
// or found current (settled), so an old deferral never cuts a new one short.
func TestStatusPaceDeferBusy(t *testing.T) {
	const bound = time.Minute
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "a"}
	t0 := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name string
		// between runs after a first deferral at t0; the second deferral
		// is asked at t0+later.
		between func(p *statusPace)
		later   time.Duration
		want    time.Duration
	}{
		{name: "still deferred", between: func(*statusPace) {}, later: 20 * time.Second, want: 40 * time.Second},
		{name: "past the bound", between: func(*statusPace) {}, later: 2 * bound, want: 0},
		{name: "written in between", between: func(p *statusPace) { p.wrote(k, t0.Add(time.Second)) }, later: 2 * bound, want: bound},
		{name: "found current in between", between: func(p *statusPace) { p.settled(k) }, later: 2 * bound, want: bound},
		{name: "forgotten in between", between: func(p *statusPace) { p.forget(k) }, later: 2 * bound, want: bound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p statusPace
			if got := p.deferBusy(k, t0, bound); got != bound {
				t.Fatalf("first deferral = %v, want %v", got, bound)
			}
			tt.between(&p)
			if got := p.deferBusy(k, t0.Add(tt.later), bound); got != tt.want {
				t.Errorf("second deferral = %v, want %v", got, tt.want)
			}
		})
	}
}
