package server

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"

	"github.com/replicafed/replicafed/internal/fedref"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	raftexp "github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestTargetsShareEntries: the hub's targets go through the expectations
// store's rounds, so the targets of FederatedReplicaSets planned at once
// (the hub runs several workers) share a raft entry; each is committed for
// its own object and generation, and an older generation is refused.
func TestTargetsShareEntries(t *testing.T) {
	c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) {
		// Long enough for every call below to queue on a loaded machine.
		cfg.ReservationLinger = 2 * time.Second
		cfg.ObservationFlushInterval = time.Hour
	})
	c.StartAll()
	n := c.WaitLeader(20 * time.Second)
	ts := &targetStore{n: n, shared: raftexp.New(n, logr.Discard())}
	ctx := tu.Ctx(t, 60*time.Second)
	frs := func(i int) fedref.FRS { return fedref.FRS{Namespace: "ns", Name: fmt.Sprintf("web-%d", i)} }
	if err := ts.SetTargets(ctx, frs(0), 7, map[string]int32{"a": 1}); err != nil {
		t.Fatal(err)
	}
	const workers = 8
	before := n.Raft().LastIndex()
	errs := make([]error, workers+1)
	var wg sync.WaitGroup
	for i := range workers + 1 {
		wg.Go(func() {
			gen := int64(8)
			if i == workers {
				gen = 6 // web-0 at an older generation
			}
			errs[i] = ts.SetTargets(ctx, frs(i%workers), gen, map[string]int32{"a": int32(i), "b": 2})
		})
	}
	wg.Wait()
	for i := range workers {
		if errs[i] != nil {
			t.Fatalf("%s: %v", frs(i), errs[i])
		}
		got, gen, ok := ts.Targets(frs(i))
		if diff := cmp.Diff(map[string]int32{"a": int32(i), "b": 2}, got); !ok || gen != 8 || diff != "" {
			t.Errorf("%s at generation %d, want 8 (-want +got):\n%s", frs(i), gen, diff)
		}
	}
	if !errors.Is(errs[workers], fsm.ErrStale) {
		t.Errorf("an older generation's targets: %v, want ErrStale", errs[workers])
	}
	if got := n.Raft().LastIndex() - before; got > 2 {
		t.Errorf("%d SetTargets took %d raft entries, want them to share", workers+1, got)
	}
}
