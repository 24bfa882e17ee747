package node_test

import (
	"fmt"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// TestFollowerReadsItsOwnWrites: a follower's Apply and ApplyAll return
// only once its own FSM has applied the command, so the state it reads
// right after shows its write. A member owner that is a follower relies on
// it: its next sync must see the deletes it just recorded as pending, or
// it deletes again.
func TestFollowerReadsItsOwnWrites(t *testing.T) {
	l, f := leaderAndFollower(t)
	ctx := tu.Ctx(t, 30*time.Second)
	term := l.LastLeaderTerm()
	for i := range 20 {
		key := fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("own%d", i)}
		m := f.Meta()
		m.Term = term
		cmd := &fsm.ExpectDeletes{Meta: m, Key: key, Pods: []fsm.PodRef{{Name: "p", UID: "u"}}, TTL: int64(time.Hour)}
		var err error
		if i%2 == 0 {
			_, err = f.Apply(ctx, cmd)
		} else {
			_, err = f.ApplyAll(ctx, []fsm.Command{cmd, &fsm.Settle{Meta: f.Meta()}})
		}
		if err != nil {
			if l.LastLeaderTerm() != term {
				t.Skipf("leadership moved during the test (term %d -> %d)", term, l.LastLeaderTerm())
			}
			t.Fatal(err)
		}
		if _, d := f.FSM().View(key).Outstanding(time.Now().UnixNano()); d != 1 {
			t.Fatalf("write %d: the follower's own FSM shows %d pending deletes right after its Apply returned, want 1 (applied %d, leader's %d)",
				i, d, f.FSM().AppliedIndex(), l.FSM().AppliedIndex())
		}
	}
}
