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
