package node_test

import (
	"bytes"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestPublishUsage: an owner publishes a member's usage under its current
// fence; the leader's apply hook hears of it; a member it may not write
// for, an oversized usage and a configuration where a server lacks the
// feature are refused with errors the caller can tell apart.
func TestPublishUsage(t *testing.T) {
	l, o, _ := newOwnerLease(t, node.FeatureMemberUsage)
	ctx := tu.Ctx(t, time.Minute)
	self := l.ServerID()
	var mu sync.Mutex
	var heard []string
	l.OnApply(func(cmd fsm.Command) {
		if u, ok := cmd.(*fsm.SetMemberUsage); ok {
			mu.Lock()
			heard = append(heard, u.Member+"="+string(u.Usage))
			mu.Unlock()
		}
	})
	if err := o.PublishUsage(ctx, "m1", []byte("u")); !errors.Is(err, node.ErrNotPermitted) {
		t.Fatalf("usage of a member not owned: %v, want %v", err, node.ErrNotPermitted)
	}
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: self})
	if err := o.PublishUsage(ctx, "m1", []byte("u")); !errors.Is(err, node.ErrNotPermitted) {
		t.Fatalf("usage of a member owned but not renewed: %v, want %v", err, node.ErrNotPermitted)
	}
	if err := o.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.PublishUsage(ctx, "m1", []byte("u1")); err != nil {
		t.Fatal(err)
	}
	own, _ := l.FSM().Owner("m1")
	got, ok := l.MemberUsage("m1")
	if !ok || string(got.Usage) != "u1" || got.Owner != self || got.Epoch != own.Epoch || got.Index == 0 {
		t.Fatalf("usage %+v %v, want u1 from %s at epoch %d with its index", got, ok, self, own.Epoch)
	}
	// The hook runs on the apply path before Apply returns on the leader.
	mu.Lock()
	if len(heard) != 1 || heard[0] != "m1=u1" {
		t.Errorf("the leader's hook heard %v, want [m1=u1]", heard)
	}
	mu.Unlock()
	if err := o.PublishUsage(ctx, "m1", make([]byte, fsm.MaxUsageBytes+1)); !errors.Is(err, fsm.ErrUsageTooLarge) {
		t.Fatalf("oversized usage: %v, want %v", err, fsm.ErrUsageTooLarge)
	}
	l.WithoutFeature(node.FeatureMemberUsage)
	if err := o.PublishUsage(ctx, "m1", []byte("u2")); !errors.Is(err, node.ErrFeatureMissing) {
		t.Fatalf("usage while a server lacks %q: %v, want %v", node.FeatureMemberUsage, err, node.ErrFeatureMissing)
	}
	if got, _ := l.MemberUsage("m1"); string(got.Usage) != "u1" {
		t.Fatalf("usage %q changed by refused publishes", got.Usage)
	}
}

// TestPublishUsageFromFollower: a follower that owns a member publishes
// its usage (forwarded to the leader) and every node's FSM shows it; while
// one server does not list the feature, the follower's publish is refused
// with ErrFeatureMissing and nothing is committed.
func TestPublishUsageFromFollower(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureOwnership, node.FeatureMemberUsage)
	var follower, other *node.Node
	for _, n := range c.Live() {
		switch {
		case n == l:
		case follower == nil:
			follower = n
		default:
			other = n
		}
	}
	// A long lease on a fake clock: a slow forward never lapses it.
	o := follower.NewOwnerLease(time.Minute, ownerMargin, clocktesting.NewFakeClock(time.Unix(1000, 0)))
	ctx := tu.Ctx(t, 2*time.Minute)
	assignOwners(t, l, fsm.OwnerAssignment{Member: "m1", Owner: follower.ServerID()})
	tu.Eventually(t, 30*time.Second, func() error {
		if len(o.Owned()) != 1 {
			return errors.New("the follower has not applied its assignment yet")
		}
		return nil
	})
	if err := o.Renew(ctx); err != nil {
		t.Fatal(err)
	}
	blob := bytes.Repeat([]byte{0xfe, 0}, 1000)
	if err := o.PublishUsage(ctx, "m1", blob); err != nil {
		t.Fatal(err)
	}
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if u, ok := n.MemberUsage("m1"); !ok || !bytes.Equal(u.Usage, blob) || u.Owner != follower.ServerID() {
				return fmt.Errorf("%s shows usage %v %v", n.ServerID(), ok, u.Owner)
			}
		}
		return nil
	})

	other.WithoutFeature(node.FeatureMemberUsage)
	tu.Eventually(t, 30*time.Second, func() error {
		follower.CheckFeatures()
		if follower.AllServersHave(node.FeatureMemberUsage) {
			return fmt.Errorf("%s does not know yet that %s lacks the feature", follower.ServerID(), other.ServerID())
		}
		return nil
	})
	if err := o.PublishUsage(ctx, "m1", []byte("new")); !errors.Is(err, node.ErrFeatureMissing) {
		t.Fatalf("publish while %s lacks the feature: %v, want %v", other.ServerID(), err, node.ErrFeatureMissing)
	}
	if u, _ := l.MemberUsage("m1"); !bytes.Equal(u.Usage, blob) {
		t.Fatal("a refused publish changed the usage")
	}
}
