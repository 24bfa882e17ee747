package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

// TestOnApply: hooks hear of every applied command that changes targets,
// rollouts or owners, one by one inside a batch entry, not of refused or
// repeated ones nor of other commands, and of a restore (nil).
func TestOnApply(t *testing.T) {
	f := New("s")
	var heard []string
	f.OnApply(func(cmd Command) {
		if cmd == nil {
			heard = append(heard, "restore")
			return
		}
		heard = append(heard, cmd.Type().String())
	})
	frs := FRSRef{Namespace: "ns", Name: "web"}
	targets := &SetTargets{Meta: Meta{ReqID: "t1"}, FRS: frs, Generation: 2, Targets: map[string]int32{"m1": 3}}
	applyAt(t, f, targets, 2)
	applyAt(t, f, targets, 2)                                                                  // repeated request ID
	applyAt(t, f, &SetTargets{FRS: frs, Generation: 1, Targets: map[string]int32{"m1": 1}}, 2) // stale generation
	applyAt(t, f, &SetHealth{Cluster: "m1", Healthy: true}, 2)
	applyAt(t, f, assign(1, own("m1", "a")), 2) // stale term
	var cmds [][]byte
	for _, c := range []Command{
		&SetRollout{Meta: Meta{Term: 2}, FRS: frs, Record: []byte(`{}`)},
		&Reserve{Meta: Meta{Term: 2, Now: 1}, Key: k1, Target: 3, Count: 1, Prefix: "web-", TTL: ttl},
		assign(2, own("m1", "a")),
		&DeleteRollout{FRS: frs},
		&DeleteTargets{FRS: frs},
	} {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, b)
	}
	batch, err := EncodeBatch(cmds)
	if err != nil {
		t.Fatal(err)
	}
	f.Apply(&raft.Log{Type: raft.LogCommand, Data: batch, Term: 2})
	if err := f.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	want := []string{TypeSetTargets.String(), TypeSetRollout.String(), TypeAssignOwners.String(),
		TypeDeleteRollout.String(), TypeDeleteTargets.String(), "restore"}
	if diff := cmp.Diff(want, heard); diff != "" {
		t.Fatalf("hooks heard (-want +got):\n%s", diff)
	}
}
