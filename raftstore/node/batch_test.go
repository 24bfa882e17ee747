package node_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replicafed/replicafed/internal/metrics"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// TestGroupCommit: commands that reach the leader while an entry is in
// flight are committed together as one entry, each with its own result,
// fencing and deduplication, on every replica.
func TestGroupCommit(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	term := l.LastLeaderTerm()
	waitAllHave(t, []*node.Node{l}, node.FeatureBatch)
	// Commit one command first, so the entries counted below are ours.
	if _, err := l.Apply(tu.Ctx(t, 10*time.Second), &fsm.SetHealth{Meta: l.Meta(), Cluster: "m0", Healthy: true}); err != nil {
		t.Fatal(err)
	}

	const keys = 40
	type outcome struct {
		res *fsm.Result
		err error
	}
	out := make([]outcome, keys+3)
	cmds := make([]fsm.Command, 0, keys+3)
	for i := range keys {
		cmds = append(cmds, &fsm.Reserve{Meta: l.Meta(), Key: fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("web%d", i)},
			Target: 2, Count: 2, Prefix: fmt.Sprintf("web%d-", i), TTL: int64(time.Hour)})
	}
	// The same request twice: the second gets the first's result.
	dup := fsm.Meta{ReqID: "same-request", Now: l.Meta().Now, Term: term}
	dupKey := fsm.Key{Cluster: "m2", Namespace: "ns", Name: "dup"}
	cmds = append(cmds,
		&fsm.Reserve{Meta: dup, Key: dupKey, Target: 3, Count: 3, Prefix: "dup-", TTL: int64(time.Hour)},
		&fsm.Reserve{Meta: dup, Key: dupKey, Target: 3, Count: 3, Prefix: "dup-", TTL: int64(time.Hour)})
	// Proposed for an earlier term: refused, and only this one.
	stale := l.Meta()
	stale.Term = term - 1
	cmds = append(cmds, &fsm.Reserve{Meta: stale, Key: fsm.Key{Cluster: "m3", Namespace: "ns", Name: "old"}, Target: 1, Count: 1, Prefix: "old-", TTL: int64(time.Hour)})

	queued, release := l.HoldCommits()
	before := appliedWhenQuiet(t, l)
	var wg sync.WaitGroup
	for i, cmd := range cmds {
		wg.Go(func() {
			res, err := l.Apply(tu.Ctx(t, 30*time.Second), cmd)
			out[i] = outcome{res, err}
		})
	}
	tu.Eventually(t, 30*time.Second, func() error {
		if q := queued(); q != len(cmds) {
			return fmt.Errorf("%d of %d commands queued", q, len(cmds))
		}
		return nil
	})
	release()
	wg.Wait()

	for i := range keys {
		o := out[i]
		if o.err != nil {
			t.Fatalf("reserve %d: %v", i, o.err)
		}
		if len(o.res.Names) != 2 || !strings.HasPrefix(o.res.Names[0], fmt.Sprintf("web%d-", i)) {
			t.Fatalf("reserve %d: names %v", i, o.res.Names)
		}
	}
	if a, b := out[keys], out[keys+1]; a.err != nil || b.err != nil || len(a.res.Names) != 3 || !slices.Equal(a.res.Names, b.res.Names) {
		t.Fatalf("duplicate request: %v %v / %v %v, want the same 3 names", a.res, a.err, b.res, b.err)
	}
	if o := out[keys+2]; !errors.Is(o.err, fsm.ErrStale) {
		t.Fatalf("command of an earlier term: %v %v, want ErrStale", o.res, o.err)
	}
	if l.LastLeaderTerm() == term && l.IsLeader() {
		if got := l.Raft().AppliedIndex() - before; got != 1 {
			t.Fatalf("%d commands took %d raft entries, want 1", len(cmds), got)
		}
	} else {
		t.Logf("leadership moved during the test (term %d -> %d); entry count not checked", term, l.LastLeaderTerm())
	}

	// Every replica applied the same reservations.
	tu.Eventually(t, 30*time.Second, func() error {
		for _, n := range c.Live() {
			for i := range keys {
				k := fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("web%d", i)}
				if r := n.FSM().View(k).Reservations; len(r) != 2 {
					return fmt.Errorf("%s: key %s has %d reservations, want 2", n.ServerID(), k, len(r))
				}
			}
			if r := n.FSM().View(dupKey).Reservations; len(r) != 3 {
				return fmt.Errorf("%s: duplicate key has %d reservations, want 3", n.ServerID(), len(r))
			}
			if len(n.FSM().View(fsm.Key{Cluster: "m3", Namespace: "ns", Name: "old"}).Reservations) != 0 {
				return fmt.Errorf("%s: the stale command reserved names", n.ServerID())
			}
		}
		return nil
	})
}

// TestNoGroupCommitWithAnOlderServer: while a server of the configuration
// does not say it applies batch entries (an older version during a rolling
// upgrade), the leader commits every command in its own entry.
func TestNoGroupCommitWithAnOlderServer(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	term := l.LastLeaderTerm()
	for _, n := range c.Live() {
		if n != l {
			n.WithoutBatchFeature()
			break
		}
	}
	if l.CheckBatchSupport() {
		t.Fatal("the leader would combine commands although a server lacks the feature")
	}

	const cmds = 5
	queued, release := l.HoldCommits()
	before := appliedWhenQuiet(t, l)
	errs := make(chan error, cmds)
	var wg sync.WaitGroup
	for i := range cmds {
		wg.Go(func() {
			_, err := l.Apply(tu.Ctx(t, 30*time.Second), &fsm.SetHealth{Meta: l.Meta(), Cluster: fmt.Sprintf("m%d", i), Healthy: true})
			errs <- err
		})
	}
	tu.Eventually(t, 30*time.Second, func() error {
		if q := queued(); q != cmds {
			return fmt.Errorf("%d of %d commands queued", q, cmds)
		}
		return nil
	})
	release()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	skipIfLeadershipMoved(t, l, term, "nothing to check")
	if got := l.Raft().AppliedIndex() - before; got != cmds {
		t.Fatalf("%d commands took %d raft entries, want one each", cmds, got)
	}
}

// TestApplyAllSharesOneEntry: commands handed to ApplyAll together take
// one raft entry on the leader, each with its own result (a stale one is
// refused alone), in order.
func TestApplyAllSharesOneEntry(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	term := l.LastLeaderTerm()
	waitAllHave(t, []*node.Node{l}, node.FeatureBatch)
	key := func(i int) fsm.Key { return fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("all%d", i)} }
	var cmds []fsm.Command
	for i := range 10 {
		cmds = append(cmds, &fsm.Reserve{Meta: l.Meta(), Key: key(i), Target: 2, Count: 2, Prefix: fmt.Sprintf("all%d-", i), TTL: int64(time.Hour)})
	}
	stale := l.Meta()
	stale.Term = term - 1
	cmds = append(cmds, &fsm.Reserve{Meta: stale, Key: key(99), Target: 1, Count: 1, Prefix: "old-", TTL: int64(time.Hour)})
	before := appliedWhenQuiet(t, l)
	entries := testutil.ToFloat64(metrics.RaftEntriesProposed.WithLabelValues("batch:reserve"))
	reserves := testutil.ToFloat64(metrics.RaftCommandsProposed.WithLabelValues("reserve"))
	res, err := l.ApplyAll(tu.Ctx(t, 30*time.Second), cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if res[i] == nil || res[i].Error() != nil || len(res[i].Names) != 2 || !strings.HasPrefix(res[i].Names[0], fmt.Sprintf("all%d-", i)) {
			t.Fatalf("command %d: %+v", i, res[i])
		}
	}
	if r := res[10]; r == nil || !errors.Is(r.Error(), fsm.ErrStale) {
		t.Fatalf("command of an earlier term: %+v, want ErrStale", r)
	}
	skipIfLeadershipMoved(t, l, term, "entry count not checked")
	if got := l.Raft().AppliedIndex() - before; got != 1 {
		t.Fatalf("%d commands took %d raft entries, want 1", len(cmds), got)
	}
	// The proposal counters say what the entry held.
	if got := testutil.ToFloat64(metrics.RaftEntriesProposed.WithLabelValues("batch:reserve")) - entries; got != 1 {
		t.Errorf("replicafed_raft_entries_proposed_total{types=\"batch:reserve\"} grew by %v, want 1", got)
	}
	if got := testutil.ToFloat64(metrics.RaftCommandsProposed.WithLabelValues("reserve")) - reserves; got != float64(len(cmds)) {
		t.Errorf("replicafed_raft_commands_proposed_total{type=\"reserve\"} grew by %v, want %d", got, len(cmds))
	}
}

// TestApplyAllFromAFollower: a follower's ApplyAll goes to the leader in
// one request and its commands share one entry there, each with its own
// result (a member owner's round of reservations, with sharding).
func TestApplyAllFromAFollower(t *testing.T) {
	l, f := leaderAndFollower(t)
	term := l.LastLeaderTerm()
	key := func(i int) fsm.Key { return fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("fwd%d", i)} }
	var cmds []fsm.Command
	for i := range 8 {
		m := f.Meta()
		m.Term = term
		cmds = append(cmds, &fsm.Reserve{Meta: m, Key: key(i), Target: 2, Count: 2, Prefix: fmt.Sprintf("fwd%d-", i), TTL: int64(time.Hour)})
	}
	before := appliedWhenQuiet(t, l)
	res, err := f.ApplyAll(tu.Ctx(t, 30*time.Second), cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r == nil || r.Error() != nil || len(r.Names) != 2 || !strings.HasPrefix(r.Names[0], fmt.Sprintf("fwd%d-", i)) {
			t.Fatalf("command %d: %+v", i, r)
		}
	}
	skipIfLeadershipMoved(t, l, term, "entry count not checked")
	if got := l.Raft().AppliedIndex() - before; got != 1 {
		t.Fatalf("%d commands from a follower took %d raft entries, want 1", len(cmds), got)
	}
}

// TestApplyAllRetriesAFailedEntry: when the shared entry fails (never
// appended, or appended and then reported lost), ApplyAll retries each
// command as Apply does, so every command gets its result and one that
// did commit is not applied twice.
func TestApplyAllRetriesAFailedEntry(t *testing.T) {
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, []*node.Node{l}, node.FeatureBatch)
	for _, committed := range []bool{false, true} {
		t.Run(fmt.Sprintf("committed=%v", committed), func(t *testing.T) {
			key := func(i int) fsm.Key {
				return fsm.Key{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("retry%v%d", committed, i)}
			}
			// The term this node leads in, also while its lease lapses
			// for a moment under load (Meta would then say 0).
			term := l.LastLeaderTerm()
			var cmds []fsm.Command
			for i := range 3 {
				m := l.Meta()
				m.Term = term
				cmds = append(cmds, &fsm.Reserve{Meta: m, Key: key(i), Target: 2, Count: 2, Prefix: "r-", TTL: int64(time.Hour)})
			}
			queued, _ := l.HoldCommits()
			var res []*fsm.Result
			var err error
			done := make(chan struct{})
			go func() {
				defer close(done)
				res, err = l.ApplyAll(tu.Ctx(t, 60*time.Second), cmds)
			}()
			tu.Eventually(t, 30*time.Second, func() error {
				if q := queued(); q != len(cmds) {
					return fmt.Errorf("%d of %d commands queued", q, len(cmds))
				}
				return nil
			})
			l.FailQueued(raft.ErrLeadershipLost, committed)
			<-done
			if err != nil {
				t.Fatal(err)
			}
			for i := range cmds {
				if res[i] != nil && errors.Is(res[i].Error(), fsm.ErrStale) && l.LastLeaderTerm() != term {
					t.Skipf("leadership moved during the test (term %d -> %d)", term, l.LastLeaderTerm())
				}
				if res[i] == nil || res[i].Error() != nil || len(res[i].Names) != 2 {
					t.Fatalf("command %d: %+v", i, res[i])
				}
				if got := l.FSM().View(key(i)).Reservations; len(got) != 2 {
					t.Fatalf("key %d holds %d reservations, want the 2 of one Reserve: %+v", i, len(got), got)
				}
			}
		})
	}
}

// leaderAndFollower starts three nodes that all batch and returns the
// leader and one follower.
func leaderAndFollower(t *testing.T) (l, f *node.Node) {
	t.Helper()
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l = c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureBatch)
	for _, n := range c.Live() {
		if n != l {
			f = n
		}
	}
	return l, f
}

// TestRoundsOnTickShareOneEntry: the leader holds rounds sent at a shared
// tick (OnTick) for company, as it holds background work, so two member
// owners' rounds of reservations that reach it a moment apart share one
// entry; a round sent without OnTick is committed at once.
func TestRoundsOnTickShareOneEntry(t *testing.T) {
	defer node.SetBackgroundLinger(3 * time.Second)()
	c := tu.NewCluster(t, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 60*time.Second)
	waitAllHave(t, c.Live(), node.FeatureBatch)
	term := l.LastLeaderTerm()
	var followers []*node.Node
	for _, n := range c.Live() {
		if n != l {
			followers = append(followers, n)
		}
	}
	round := func(f *node.Node, name string) []fsm.Command {
		var cmds []fsm.Command
		for i := range 2 {
			m := f.Meta()
			m.Term = term
			key := fsm.Key{Cluster: name, Namespace: "ns", Name: fmt.Sprintf("k%d", i)}
			cmds = append(cmds, &fsm.Reserve{Meta: m, Key: key, Target: 1, Count: 1, Prefix: fmt.Sprintf("%s-%d-", name, i), TTL: int64(time.Hour)})
		}
		return cmds
	}
	ctx := tu.Ctx(t, 60*time.Second)
	send := func(f *node.Node, name string, opts ...node.ApplyOption) <-chan error {
		done := make(chan error, 1)
		go func() {
			res, err := f.ApplyAll(ctx, round(f, name), opts...)
			for i, r := range res {
				if err == nil && (r == nil || r.Error() != nil || len(r.Names) != 1) {
					err = fmt.Errorf("command %d of %s: %+v", i, name, r)
				}
			}
			done <- err
		}()
		return done
	}
	wait := func(done <-chan error) {
		t.Helper()
		if err := <-done; err != nil {
			skipIfLeadershipMoved(t, l, term, "round failed")
			t.Fatal(err)
		}
	}
	queued := func(want int) {
		t.Helper()
		tu.Eventually(t, 30*time.Second, func() error {
			if got := l.Queued(); got != want {
				return fmt.Errorf("%d commands queued at the leader, want %d", got, want)
			}
			return nil
		})
	}

	before := appliedWhenQuiet(t, l)
	first := send(followers[0], "m1", node.OnTick())
	queued(2) // held, not committed
	second := send(followers[1], "m2", node.OnTick())
	wait(first)
	wait(second)
	skipIfLeadershipMoved(t, l, term, "entry count not checked")
	if got := l.Raft().AppliedIndex() - before; got != 1 {
		t.Fatalf("two owners' rounds on a tick took %d raft entries, want 1", got)
	}

	// Without OnTick a round is not held: it returns well before the hold
	// would end.
	start := time.Now()
	wait(send(followers[0], "m3"))
	if took := time.Since(start); took >= 3*time.Second {
		t.Errorf("a round sent without OnTick took %s, want it committed at once, not held", took)
	}
}

// skipIfLeadershipMoved skips the test when l no longer leads in term:
// entry counts and results then depend on the election, not on batching.
func skipIfLeadershipMoved(t *testing.T, l *node.Node, term uint64, what string) {
	t.Helper()
	if l.LastLeaderTerm() != term || !l.IsLeader() {
		t.Skipf("leadership moved during the test (term %d -> %d); %s", term, l.LastLeaderTerm(), what)
	}
}

// appliedWhenQuiet waits until l has applied every entry in its log (on a
// loaded machine the configuration and barrier entries of the start can
// still be applying when a test begins to count) and returns the applied
// index, from which a test counts its own entries.
func appliedWhenQuiet(t *testing.T, l *node.Node) uint64 {
	t.Helper()
	var applied uint64
	tu.Eventually(t, 30*time.Second, func() error {
		applied = l.Raft().AppliedIndex()
		if last := l.Raft().LastIndex(); applied != last {
			return fmt.Errorf("applied %d of %d entries", applied, last)
		}
		return nil
	})
	return applied
}
