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
