package node

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

func TestEntryContent(t *testing.T) {
	enc := func(ts ...fsm.Type) []*pendingApply {
		out := make([]*pendingApply, 0, len(ts))
		for _, ty := range ts {
			out = append(out, &pendingApply{data: []byte{byte(ty), fsm.Version1}})
		}
		return out
	}
	tests := []struct {
		name  string
		batch []*pendingApply
		want  string
	}{
		{"one command", enc(fsm.TypeSetTargets), "set-targets"},
		{"one type, many commands", enc(fsm.TypeReserve, fsm.TypeReserve), "batch:reserve"},
		{"types sorted, each once", enc(fsm.TypeSettle, fsm.TypeReserve, fsm.TypeSettle, fsm.TypeReserve), "batch:reserve+settle"},
		{"targets and reservations", enc(fsm.TypeSetTargets, fsm.TypeReserve), "batch:reserve+set-targets"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, entryContent(tc.batch)); diff != "" {
				t.Errorf("entryContent (-want +got):\n%s", diff)
			}
		})
	}
}

// Only a queue of background work (renewals, usages, observations) is held
// for company; anything a member write waits on goes at once.
func TestOnlyBackground(t *testing.T) {
	enc := func(ts ...fsm.Type) []*pendingApply {
		out := make([]*pendingApply, 0, len(ts))
		for _, ty := range ts {
			out = append(out, &pendingApply{data: []byte{byte(ty), fsm.Version1}})
		}
		return out
	}
	for _, tc := range []struct {
		name  string
		queue []*pendingApply
		want  bool
	}{
		{"empty", nil, false},
		{"a renewal", enc(fsm.TypeRenewOwnership), true},
		{"a renewal and its usages", enc(fsm.TypeRenewOwnership, fsm.TypeSetMemberUsage, fsm.TypeSetMemberUsage), true},
		{"a flush", enc(fsm.TypeSettle), true},
		{"a reservation", enc(fsm.TypeReserve), false},
		{"a flush behind a reservation", enc(fsm.TypeReserve, fsm.TypeSettle), false},
		{"targets after a renewal", enc(fsm.TypeRenewOwnership, fsm.TypeSetTargets), false},
		{"a release", enc(fsm.TypeReleaseOwnership), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := onlyBackground(tc.queue); got != tc.want {
				t.Errorf("onlyBackground = %v, want %v", got, tc.want)
			}
		})
	}
}
