package node_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// TestOnApplyOnFollower: a follower's apply hook hears of the targets the
// leader commits, with the committed targets readable from its own FSM
// when it does.
func TestOnApplyOnFollower(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	var follower = c.Live()[0]
	if follower == l {
		follower = c.Live()[1]
	}
	frs := fsm.FRSRef{Namespace: "ns", Name: "web"}
	var mu sync.Mutex
	var heard []int32
	follower.OnApply(func(cmd fsm.Command) {
		st, ok := cmd.(*fsm.SetTargets)
		if !ok || st.FRS != frs {
			return
		}
		// The hook runs after the apply: the follower's FSM has them.
		rec, _ := follower.FSM().Targets(frs)
		mu.Lock()
		heard = append(heard, rec.Targets["m1"])
		mu.Unlock()
	})
	ctx := tu.Ctx(t, time.Minute)
	for gen, target := range []int32{3, 5} {
		if err := l.SetTargets(ctx, frs, int64(gen+1), map[string]int32{"m1": target}); err != nil {
			t.Fatal(err)
		}
	}
	tu.Eventually(t, 30*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(heard) != 2 || heard[0] != 3 || heard[1] != 5 {
			return errors.New("the follower's hook has not heard both targets in order yet")
		}
		return nil
	})
}
