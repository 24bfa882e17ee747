package node_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/utils/clock"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// shardedCluster is three replicas that each renew their owner lease and
// run the assignment loop (only the leader's acts).
type shardedCluster struct {
	c       *tu.Cluster
	leases  map[*node.Node]*node.OwnerLease
	cancels map[*node.Node]context.CancelFunc // stop a replica's renewals
}

const (
	ownerLease  = 3 * time.Second
	ownerMargin = time.Second
)

var shardMembers = []string{"m1", "m2", "m3", "m4", "m5", "m6"}

func startSharded(t *testing.T) *shardedCluster {
	t.Helper()
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureOwnership)
	s := &shardedCluster{c: c, leases: map[*node.Node]*node.OwnerLease{}, cancels: map[*node.Node]context.CancelFunc{}}
	var wg sync.WaitGroup
	all, stopAll := context.WithCancel(context.Background())
	t.Cleanup(func() {
		stopAll()
		wg.Wait()
		t.Log(time.Now().Format("15:04:05.000"), " loops stopped")
	})
	for _, n := range c.Live() {
		o := n.NewOwnerLease(ownerLease, ownerMargin, clock.RealClock{})
		ctx, cancel := context.WithCancel(all)
		s.leases[n], s.cancels[n] = o, cancel
		wg.Go(func() { o.Run(ctx) })
		wg.Go(func() {
			n.RunAssigner(all, node.AssignerConfig{Lease: ownerLease, Margin: ownerMargin, Clock: clock.RealClock{},
				Members: func() []string { return shardMembers }})
		})
	}
	// Every replica owns two members and may write to them.
	tu.Eventually(t, 2*time.Minute, func() error {
		for n, o := range s.leases {
			owned := o.Owned()
			if len(owned) != 2 {
				return fmt.Errorf("%s owns %v", n.ServerID(), owned)
			}
			for _, p := range owned {
				if _, ok := o.Permitted(p.Member); !ok {
					return fmt.Errorf("%s may not write to %s yet", n.ServerID(), p.Member)
				}
			}
		}
		return nil
	})
	t.Log(time.Now().Format("15:04:05.000"), " every replica owns two members")
	return s
}

// TestOwnerFailover: the owner of a member is killed, or stops renewing
// without dying (a paused process); the leader gives the member to another
// replica only after lease plus margin since the owner's last renewal, at
// a higher epoch; the old owner's permission had lapsed by its own clock
// before that decision; its Reserve at the old epoch is refused; and the
// names it reserved and never settled go to the new owner for the same
// slots, never a fresh name beside them.
//
// When the killed owner is the leader, the new leader also waits a full
// lease plus margin from its election before it moves anything.
func TestOwnerFailover(t *testing.T) {
	tests := []struct {
		name         string
		kill, leader bool
	}{
		{"killed", true, false},
		{"stops renewing", false, false},
		{"the leader killed", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { testOwnerFailover(t, tc.kill, tc.leader) })
	}
}

func testOwnerFailover(t *testing.T, kill, ofLeader bool) {
	s := startSharded(t)
	leader := s.c.WaitLeader(time.Minute)
	var old *node.Node
	for n := range s.leases {
		if n != leader && (old == nil || n.ServerID() < old.ServerID()) {
			old = n
		}
	}
	if ofLeader {
		old = leader
	}
	oldLease := s.leases[old]
	member := oldLease.Owned()[0].Member
	fence, ok := oldLease.Permitted(member)
	if !ok {
		t.Fatalf("%s may not write to %s", old.ServerID(), member)
	}
	key := fsm.Key{Cluster: member, Namespace: "ns", Name: "web"}
	reserve := func(n *node.Node, f fsm.OwnerFence) (*fsm.Result, error) {
		return n.Apply(tu.Ctx(t, time.Minute), &fsm.Reserve{Meta: n.Meta(), Key: key, Target: 3, Active: 0, Count: 3,
			Prefix: "web-", TTL: int64(5 * time.Minute), Fence: &f})
	}
	res, err := reserve(old, fence)
	if err != nil || len(res.Names) != 3 {
		t.Fatalf("the owner's reserve: %v, %v", res, err)
	}
	reserved := res.Names
	seq := leader.FSM().Seq()

	// The old owner's last permitted moment, by its own clock.
	var lastPermitted atomic.Int64
	stop := make(chan struct{})
	var watcher sync.WaitGroup
	watcher.Go(func() {
		for {
			if _, ok := oldLease.Permitted(member); ok {
				lastPermitted.Store(time.Now().UnixNano())
			}
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	})
	t.Logf("%s: %s owns %s at epoch %d; stopping it", time.Now().Format("15:04:05.000"), old.ServerID(), member, fence.Epoch)
	if kill {
		s.c.Kill(s.c.Index(old))
	} else {
		s.cancels[old]()
	}

	var now fsm.Ownership
	var observer *node.Node
	tu.Eventually(t, 2*time.Minute, func() error {
		observer = s.c.WaitLeader(time.Minute, old)
		o, ok := observer.FSM().Owner(member)
		if !ok || o.Owner == old.ServerID() {
			return fmt.Errorf("%s still owned by %v", member, o)
		}
		now = o
		return nil
	})
	close(stop)
	watcher.Wait()
	t.Logf("%s: %s now owned by %s", time.Now().Format("15:04:05.000"), member, now)

	if elected, _ := observer.Handover(); ofLeader && now.Since < elected.Add(ownerLease+ownerMargin).UnixNano() {
		t.Errorf("the new leader, elected at %s, moved %s at %s: before a full lease plus margin",
			elected, member, time.Unix(0, now.Since))
	}
	if now.Epoch <= fence.Epoch {
		t.Errorf("new epoch %d, want above the old %d", now.Epoch, fence.Epoch)
	}
	last, ok := observer.FSM().Renewals()[old.ServerID()]
	if !ok {
		t.Fatal("no renewal recorded for the old owner")
	}
	if wait := time.Duration(now.Since - last.Now); wait < ownerLease+ownerMargin {
		t.Errorf("reassigned %s after its owner's last renewal: want at least lease plus margin %s",
			wait, ownerLease+ownerMargin)
	}
	if until := oldLease.Until(member); until.IsZero() || until.UnixNano() > now.Since {
		t.Errorf("the old owner's lease lapsed at %s, after the reassignment at %s", until, time.Unix(0, now.Since))
	}
	if lp := lastPermitted.Load(); lp == 0 || lp >= now.Since {
		t.Errorf("the old owner was last permitted at %s, not before the reassignment at %s", time.Unix(0, lp), time.Unix(0, now.Since))
	}
	from := old
	if kill {
		from = observer // the killed owner's late command, as a peer would forward it
	} else if _, ok := oldLease.Permitted(member); ok {
		t.Error("the paused owner is still permitted")
	}
	if _, err := reserve(from, fence); !errors.Is(err, fsm.ErrStale) {
		t.Errorf("the old owner's reserve at epoch %d: %v, want %v", fence.Epoch, err, fsm.ErrStale)
	}

	// The new owner writes once its own lease holds, and gets the old
	// owner's names for those slots.
	var heir *node.OwnerLease
	for n, o := range s.leases {
		if n.ServerID() == now.Owner {
			heir = o
		}
	}
	var heirFence fsm.OwnerFence
	tu.Eventually(t, 2*time.Minute, func() error {
		var ok bool
		if heirFence, ok = heir.Permitted(member); !ok {
			return fmt.Errorf("%s may not write to %s yet", now.Owner, member)
		}
		return nil
	})
	var heirNode *node.Node
	for n := range s.leases {
		if n.ServerID() == now.Owner {
			heirNode = n
		}
	}
	res, err = reserve(heirNode, heirFence)
	if err != nil {
		t.Fatal(err)
	}
	if !sameNames(res.Names, reserved) {
		t.Errorf("the new owner got %v, want the old owner's unsettled %v", res.Names, reserved)
	}
	t.Log(time.Now().Format("15:04:05.000"), " the new owner got the old names")
	if got := observer.FSM().Seq(); got != seq {
		t.Errorf("sequence %d -> %d: fresh names were granted", seq, got)
	}
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
