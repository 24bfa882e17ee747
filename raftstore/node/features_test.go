package node_test

import (
	"fmt"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/node"
)

// waitAllHave waits until every node in ns says every server lists each of
// features.
func waitAllHave(tb testing.TB, ns []*node.Node, features ...string) {
	tb.Helper()
	tu.Eventually(tb, 30*time.Second, func() error {
		for _, n := range ns {
			for _, f := range features {
				if !n.AllServersHave(f) {
					return fmt.Errorf("%s does not know yet that every server lists %q", n.ServerID(), f)
				}
			}
		}
		return nil
	})
}

// TestFeatureGate: every node, followers too, learns which features all
// servers list; a feature one server lacks (an older version during a
// rolling upgrade) is not used, while the others still are; and a server
// that stops answering (a crashed leader) counts with its last answer, so
// a new leader elected while it is down still uses the features.
func TestFeatureGate(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureBatch, node.FeatureHoldReissued)

	// A follower goes down: its last answer still counts.
	var down, old *node.Node
	for _, n := range c.Live() {
		if n != l {
			down = n
			break
		}
	}
	c.Kill(c.Index(down))
	l.CheckFeatures()
	if !l.AllServersHave(node.FeatureHoldReissued) || !l.AllServersHave(node.FeatureBatch) {
		t.Fatalf("a server that does not answer lost its features: hold-reissued %v, batch %v",
			l.AllServersHave(node.FeatureHoldReissued), l.AllServersHave(node.FeatureBatch))
	}

	// The other follower is of a version without the rule.
	for _, n := range c.Live() {
		if n != l {
			old = n
		}
	}
	old.WithoutFeature(node.FeatureHoldReissued)
	// Polled: on a loaded machine a status call can time out, and the
	// server's last answer then counts until the next check.
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			n.CheckFeatures()
			if n.AllServersHave(node.FeatureHoldReissued) {
				return fmt.Errorf("%s would use %q although %s does not list it", n.ServerID(), node.FeatureHoldReissued, old.ServerID())
			}
		}
		return nil
	})
	for _, n := range c.Live() {
		if !n.AllServersHave(node.FeatureBatch) {
			t.Fatalf("%s stopped using %q, which every server lists", n.ServerID(), node.FeatureBatch)
		}
	}
}
