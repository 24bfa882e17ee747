package main

import "testing"

func TestOwnersBalanced(t *testing.T) {
	tests := []struct {
		name    string
		owned   map[string]int
		members int
		want    bool
		why     string
	}{
		{"4 members over 3 replicas", map[string]int{"r0": 2, "r1": 1, "r2": 1}, 4, true, "r0 2, r1 1, r2 1"},
		{"a replica not yet given members", map[string]int{"r0": 2, "r1": 2, "r2": 0}, 4, false, "unequal shares (r0 2, r1 2, r2 0)"},
		{"a member without an owner", map[string]int{"r0": 1, "r1": 1, "r2": 1}, 4, false, "3 of 4 members owned (r0 1, r1 1, r2 1)"},
		{"a member counted twice during a handover", map[string]int{"r0": 2, "r1": 2, "r2": 1}, 4, false, "5 of 4 members owned (r0 2, r1 2, r2 1)"},
		{"one replica owns all", map[string]int{"r0": 4}, 4, true, "r0 4"},
		{"no answers", map[string]int{}, 4, false, "no replica answered"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, why := ownersBalanced(tc.owned, tc.members)
			if got != tc.want || why != tc.why {
				t.Errorf("ownersBalanced(%v, %d) = %v, %q; want %v, %q", tc.owned, tc.members, got, why, tc.want, tc.why)
			}
		})
	}
}

func TestShardingOn(t *testing.T) {
	tests := []struct {
		name string
		cfg  map[string]any
		want bool
	}{
		{"no config", nil, false},
		{"sharding on", map[string]any{"sharding": map[string]any{"enabled": true}}, true},
		{"sharding off", map[string]any{"sharding": map[string]any{"enabled": false}}, false},
		{"other keys", map[string]any{"raft": map[string]any{"trailingLogs": 10}}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := shardingOn(tc.cfg); got != tc.want {
				t.Errorf("shardingOn(%v) = %v, want %v", tc.cfg, got, tc.want)
			}
		})
	}
}
