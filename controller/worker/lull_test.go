package worker

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/internal/clientlimit"
)

// TestParked: keys park once, unpark when synced without waiting, and are
// woken a batch at a time, each once.
func TestParked(t *testing.T) {
	k := func(name string) types.NamespacedName { return types.NamespacedName{Namespace: "ns", Name: name} }
	tests := []struct {
		name     string
		add      []string
		remove   []string
		batch    int
		wantTake int
		wantLeft int
	}{
		{name: "nothing parked", batch: 2, wantTake: 0, wantLeft: 0},
		{name: "a batch of more", add: []string{"a", "b", "c"}, batch: 2, wantTake: 2, wantLeft: 1},
		{name: "fewer than a batch", add: []string{"a"}, batch: 2, wantTake: 1, wantLeft: 0},
		{name: "parked twice counts once", add: []string{"a", "a", "b"}, batch: 5, wantTake: 2, wantLeft: 0},
		{name: "synced meanwhile", add: []string{"a", "b"}, remove: []string{"a"}, batch: 5, wantTake: 1, wantLeft: 0},
		{name: "no batch: all", add: []string{"a", "b", "c"}, batch: 0, wantTake: 3, wantLeft: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p parked
			for _, n := range tt.add {
				p.add(k(n))
			}
			for _, n := range tt.remove {
				p.remove(k(n))
			}
			got := p.take(tt.batch)
			if len(got) != tt.wantTake || p.len() != tt.wantLeft {
				t.Fatalf("took %v leaving %d, want %d taken and %d left", got, p.len(), tt.wantTake, tt.wantLeft)
			}
			for _, r := range tt.remove {
				if slices.Contains(got, k(r)) {
					t.Errorf("woke %s, which was synced meanwhile", r)
				}
			}
			if again := p.take(0); slices.ContainsFunc(again, func(x types.NamespacedName) bool { return slices.Contains(got, x) }) {
				t.Errorf("a key woken twice: %v then %v", got, again)
			}
		})
	}
}

// TestWakeBatch: a lull wakes about a second of the member's rate limit.
func TestWakeBatch(t *testing.T) {
	shared := &rest.Config{}
	clientlimit.Shared(shared, 20, 30)
	tests := []struct {
		name string
		rc   *rest.Config
		want int
	}{
		{name: "no configuration", rc: nil, want: 0},
		{name: "shared bucket", rc: shared, want: 20},
		{name: "QPS alone", rc: &rest.Config{QPS: 50}, want: 50},
		{name: "under one a second", rc: &rest.Config{QPS: 0.5}, want: 1},
		{name: "no limit", rc: &rest.Config{QPS: -1}, want: 0},
	}
	for _, tt := range tests {
		if got := wakeBatch(tt.rc); got != tt.want {
			t.Errorf("%s: wakeBatch = %d, want %d", tt.name, got, tt.want)
		}
	}
}
