package node_test

import (
	"errors"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
)

// TestWriteLease: only the leader holds the write lease; an isolated leader
// loses it by the time the majority elects another, and the new leader
// gains it.
func TestWriteLease(t *testing.T) {
	c := tu.NewCluster(t, 3, nil)
	c.StartAll()
	old := c.WaitVoters(3, 20*time.Second)
	tu.Eventually(t, 20*time.Second, func() error {
		if !old.WriteLease(0) {
			return errors.New("leader has no write lease")
		}
		return nil
	})
	for _, n := range c.Live() {
		if n != old && n.WriteLease(0) {
			t.Fatalf("follower %s holds the write lease", n.ServerID())
		}
	}
	old.SetIsolated(true)
	tu.Eventually(t, 10*time.Second, func() error {
		if old.WriteLease(0) {
			return errors.New("isolated leader still holds the write lease")
		}
		return nil
	})
	next := c.WaitLeader(20*time.Second, old)
	if old.WriteLease(0) {
		t.Fatal("old and new leader both hold the write lease")
	}
	tu.Eventually(t, 20*time.Second, func() error {
		if !next.WriteLease(0) {
			return errors.New("new leader has no write lease")
		}
		return nil
	})
	// Waiting does not help a node that may not write at all.
	if old.WriteLease(200 * time.Millisecond) {
		t.Fatal("isolated node got a write lease by waiting")
	}
}
