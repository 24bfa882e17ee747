package server

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// The apply hook notes the FederatedReplicaSets whose targets or rollout
// changed and wakes the upkeep for them and for owner changes; anything
// else raft applies leaves it alone.
func TestOwnedSyncApplied(t *testing.T) {
	web := fsm.FRSRef{Namespace: "shop", Name: "web", UID: "u1"}
	api := fsm.FRSRef{Namespace: "shop", Name: "api"}
	tests := []struct {
		name        string
		cmds        []fsm.Command
		wantPending map[fedref.FRS]bool
		wantWake    bool
	}{
		{"targets", []fsm.Command{&fsm.SetTargets{FRS: web}},
			map[fedref.FRS]bool{{Namespace: "shop", Name: "web", UID: "u1"}: true}, true},
		{"targets and a rollout, one FRS twice", []fsm.Command{&fsm.SetTargets{FRS: web}, &fsm.SetRollout{FRS: api}, &fsm.SetTargets{FRS: web}},
			map[fedref.FRS]bool{{Namespace: "shop", Name: "web", UID: "u1"}: true, {Namespace: "shop", Name: "api"}: true}, true},
		{"owners changed", []fsm.Command{&fsm.AssignOwners{}}, nil, true},
		{"a snapshot restored", []fsm.Command{nil}, nil, true},
		{"targets deleted: nothing to create", []fsm.Command{&fsm.DeleteTargets{FRS: web}}, nil, false},
		{"a renewal", []fsm.Command{&fsm.RenewOwnership{}}, nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := &ownedSync{kick: make(chan struct{}, 1)}
			for _, c := range tc.cmds {
				o.applied(c)
			}
			if diff := cmp.Diff(tc.wantPending, o.pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			woken := len(o.kick) == 1
			if woken != tc.wantWake {
				t.Errorf("woken = %v, want %v", woken, tc.wantWake)
			}
		})
	}
}

// The usage follower's apply hook notes the members whose usage raft
// applied, and everything after a restored snapshot; nothing else wakes it.
func TestUsageFollowerApplied(t *testing.T) {
	tests := []struct {
		name        string
		cmds        []fsm.Command
		wantPending map[string]bool
		wantAll     bool
		wantWake    bool
	}{
		{"one usage", []fsm.Command{&fsm.SetMemberUsage{Member: "a"}}, map[string]bool{"a": true}, false, true},
		{"two members, one twice", []fsm.Command{&fsm.SetMemberUsage{Member: "a"}, &fsm.SetMemberUsage{Member: "b"}, &fsm.SetMemberUsage{Member: "a"}},
			map[string]bool{"a": true, "b": true}, false, true},
		{"a snapshot restored", []fsm.Command{nil}, map[string]bool{}, true, true},
		{"a renewal", []fsm.Command{&fsm.RenewOwnership{}}, map[string]bool{}, false, false},
		{"targets", []fsm.Command{&fsm.SetTargets{}}, map[string]bool{}, false, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := &usageFollower{kick: make(chan struct{}, 1), pending: map[string]bool{}}
			for _, c := range tc.cmds {
				f.applied(c)
			}
			if diff := cmp.Diff(tc.wantPending, f.pending); diff != "" {
				t.Errorf("pending (-want +got):\n%s", diff)
			}
			if f.all != tc.wantAll {
				t.Errorf("all = %v, want %v", f.all, tc.wantAll)
			}
			if woken := len(f.kick) == 1; woken != tc.wantWake {
				t.Errorf("woken = %v, want %v", woken, tc.wantWake)
			}
		})
	}
}
