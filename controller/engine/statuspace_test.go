package engine

import (
	"testing"
	"time"

	"github.com/replicafed/replicafed/internal/fedref"
)

// TestHoldGeneration: a new generation's status waits GenerationHold after
// its pods last moved, and never more than GenerationHoldMax in all.
func TestHoldGeneration(t *testing.T) {
	none := holdCounts{}
	created := holdCounts{replicas: 3, labeled: 3}
	oneReady := holdCounts{replicas: 3, labeled: 3, ready: 1, available: 1}
	type ask struct {
		at     time.Duration
		counts holdCounts
		acted  bool
		want   time.Duration
	}
	tests := []struct {
		name string
		// holdMax is the engine's GenerationHoldMax; 0: the default.
		holdMax time.Duration
		asks    []ask
	}{
		{name: "first ask: the whole hold", asks: []ask{{at: 0, counts: none, acted: true, want: GenerationHold}}},
		{name: "nothing moved: the hold runs out", asks: []ask{
			{at: 0, counts: none, acted: true, want: GenerationHold},
			{at: 2 * time.Second, counts: none, want: 3 * time.Second},
			{at: GenerationHold, counts: none, want: 0},
		}},
		{name: "counts moved: the hold restarts from then", asks: []ask{
			{at: 0, counts: none, acted: true, want: GenerationHold},
			{at: 4 * time.Second, counts: created, want: GenerationHold},
			{at: 8 * time.Second, counts: oneReady, want: GenerationHold},
			{at: 12 * time.Second, counts: oneReady, want: time.Second},
			{at: 13 * time.Second, counts: oneReady, want: 0},
		}},
		{name: "a sync that acted moved the pods", asks: []ask{
			{at: 0, counts: none, acted: true, want: GenerationHold},
			{at: 4 * time.Second, counts: none, acted: true, want: GenerationHold},
		}},
		{name: "moving pods are held no longer than GenerationHoldMax", asks: []ask{
			{at: 0, counts: none, acted: true, want: GenerationHold},
			{at: GenerationHoldMax - 2*time.Second, counts: created, want: 2 * time.Second},
			{at: GenerationHoldMax, counts: oneReady, want: 0},
		}},
		{name: "holdMax GenerationHold (sharding): moving pods do not extend it", holdMax: GenerationHold, asks: []ask{
			{at: 0, counts: none, acted: true, want: GenerationHold},
			{at: 4 * time.Second, counts: created, want: time.Second},
			{at: GenerationHold, counts: oneReady, want: 0},
		}},
	}
	key := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			holdMax := tt.holdMax
			if holdMax == 0 {
				holdMax = GenerationHoldMax
			}
			var p statusPace
			for i, a := range tt.asks {
				if got := p.holdGeneration(key, 1, a.counts, a.acted, holdMax, now.Add(a.at)); got != a.want {
					t.Fatalf("ask %d at +%v: hold %v, want %v", i, a.at, got, a.want)
				}
			}
		})
	}
}

// TestHoldGenerationNewGeneration: a later generation starts a hold of its
// own, and a status write ends the hold.
func TestHoldGenerationNewGeneration(t *testing.T) {
	key := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}
	var p statusPace
	p.holdGeneration(key, 1, holdCounts{}, true, GenerationHoldMax, now)
	if got := p.holdGeneration(key, 2, holdCounts{}, true, GenerationHoldMax, now.Add(GenerationHoldMax)); got != GenerationHold {
		t.Fatalf("generation 2's first hold = %v, want %v", got, GenerationHold)
	}
	if !p.holding(key, 2) || p.holding(key, 1) {
		t.Fatalf("holding generation 2 = %v, 1 = %v; want true, false", p.holding(key, 2), p.holding(key, 1))
	}
	p.wrote(key, now.Add(GenerationHoldMax))
	if p.holding(key, 2) {
		t.Fatal("still holding generation 2 after its status was written")
	}
}
