package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicafed/replicafed/e2e/fleet"
)

// shardedKinds are the sharded set's disruptions: the leader's (it owns
// members too under sharding) and a member owner's that does not lead.
var shardedKinds = []disruption{leaderKill, leaderStop, ownerKill, ownerStop}

// moveBound is how long an owner round waits for the hit replica's member
// to move (lease + margin is 4 s; an election may come first).
const moveBound = time.Minute

// TestChaosSharded runs TestChaos's rounds, with the same observer,
// invariants and convergence bound, on a fleet of its own with sharding on
// (owner lease 3 s, margin 1 s; sharding.ownedPodsOnly at its default,
// true): every member is owned by one replica, which writes its pods, leader
// or not. Mid-scale it SIGKILLs or SIGSTOPs (3 s) the leader, or SIGKILLs
// the owner of a member that does not lead raft, or SIGSTOPs that owner
// until the ownership table shows the member at a new owner and a higher
// epoch, then SIGCONTs it (the resumed owner finds its lease lapsed and
// must not write). Each round also follows the hit replica's members to
// their next owner and reports when they moved.
//
// It runs with REPLICAFED_CHAOS_SHARDED=1 (`make chaos-sharded`: the long
// form, 3 cycles of every disruption both ways); REPLICAFED_CHAOS=long,
// REPLICAFED_CHAOS_REPLICAS and REPLICAFED_CHAOS_CYCLES apply as to
// TestChaos. The table goes to e2e/_artifacts/chaos-sharded.md.
func TestChaosSharded(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e needs real control planes; skipped with -short")
	}
	if os.Getenv("REPLICAFED_CHAOS_SHARDED") != "1" {
		t.Skip("the sharded chaos set runs with REPLICAFED_CHAOS_SHARDED=1 (make chaos-sharded)")
	}
	plan := shardedPlanFromEnv(t)
	e := newShardedEnv(t, "e2e-chaos-sharded")
	runChaos(&chaos{t: t, e: e, plan: plan, art: "_artifacts", prefix: "chaos-sharded"})
}

// shardedPlanFromEnv is the sharded set: in the short form one round per
// disruption, alternately up and down; in the long form cycles (3 unless
// REPLICAFED_CHAOS_CYCLES says) of every disruption both ways.
func shardedPlanFromEnv(t *testing.T) chaosPlan {
	p, cycles := chaosSizeFromEnv(t, 3)
	p.sharded = true
	if p.mode == "short" {
		for i, k := range shardedKinds {
			p.rounds = append(p.rounds, roundSpec{k, i%2 == 0})
		}
		return p
	}
	for range cycles {
		for _, k := range shardedKinds {
			p.rounds = append(p.rounds, roundSpec{k, true}, roundSpec{k, false})
		}
	}
	return p
}

// disruptOwner hits the owner of a member that does not lead raft (leader
// is the raft leader before the hit), waits for that member to move, and
// brings the owner back: SIGKILL then a restart, or SIGSTOP then SIGCONT.
func (c *chaos) disruptOwner(ctx context.Context, kind disruption, leader *fleet.Replica, r *roundResult, event func(string, ...any)) {
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		r.failures = append(r.failures, msg)
		event("%s", msg)
	}
	owners, ok := c.owners(ctx, nil)
	if !ok {
		fail("no ownership table naming every member (replicas: %s)", c.describeStatuses(ctx))
		return
	}
	victim, victimID, member := ownerToKill(ctx, c.e.f, owners, leader)
	if victim == nil {
		fail("no member is owned by a replica other than the leader %s: %v", leader.ID, owners)
		return
	}
	r.moves = c.trackMoves(victim, victimID, owners, time.Now())
	if kind == ownerKill {
		victim.Kill()
		event("SIGKILL to %s, owner of %s (epoch %d), %s leads", victimID, member, owners[member].Epoch, leader.ID)
	} else {
		if err := victim.Pause(); err != nil {
			fail("SIGSTOP: %v", err)
			return
		}
		event("SIGSTOP to %s, owner of %s (epoch %d), %s leads", victimID, member, owners[member].Epoch, leader.ID)
	}
	if o, ok := r.moves.waitMoved(member, moveBound); ok {
		event("%s moved to %s (epoch %d -> %d)", member, o.Owner, owners[member].Epoch, o.Epoch)
	} else {
		fail("%s did not move from %s to another replica at a higher epoch within %s", member, victimID, moveBound)
	}
	if kind == ownerKill {
		c.restart(victim, r, event)
		return
	}
	if err := victim.Resume(); err != nil {
		fail("SIGCONT: %v", err)
		return
	}
	event("SIGCONT to %s", victimID)
}

// owners returns the committed ownership table as a running replica other
// than skip reports it, once it names an owner for every member; it asks
// the replicas one by one, each for at most a second, so a frozen one only
// delays the answer.
func (c *chaos) owners(ctx context.Context, skip *fleet.Replica) (map[string]fleet.Owner, bool) {
	for _, x := range c.e.f.Replicas {
		if x == skip || !x.Running() {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := x.Status(sctx)
		cancel()
		if err == nil && everyMemberOwned(st.Owners) {
			return st.Owners, true
		}
	}
	return nil, false
}

// moveTracker follows the members a disrupted replica owned, from the
// disruption until the round converged, through the ownership table the
// other replicas report every 100 ms: a member has moved once it names
// another owner at a higher epoch.
type moveTracker struct {
	victim  string
	before  map[string]fleet.Owner
	members []string // the victim's, at the disruption
	hit     time.Time
	cancel  context.CancelFunc
	done    chan struct{}

	mu    sync.Mutex
	moved map[string]fleet.Owner
	at    map[string]time.Time
}

// trackLeaderMoves starts following the members the raft leader owns, if
// a leader reports the ownership table and its raft server ID (the table
// names owners by it); nil otherwise. The caller sets hit.
func (c *chaos) trackLeaderMoves(ctx context.Context) *moveTracker {
	for id, st := range c.e.f.Statuses(ctx) {
		if st.Leading && everyMemberOwned(st.Owners) {
			return c.trackMoves(c.replica(id), st.ID, st.Owners, time.Now())
		}
	}
	return nil
}

// trackMoves starts following the members that victim (raft server ID
// victimID) owns in table before, from hit, asking the other replicas.
func (c *chaos) trackMoves(victim *fleet.Replica, victimID string, before map[string]fleet.Owner, hit time.Time) *moveTracker {
	ctx, cancel := context.WithCancel(context.Background())
	m := &moveTracker{victim: victimID, before: before, hit: hit, cancel: cancel, done: make(chan struct{}),
		moved: map[string]fleet.Owner{}, at: map[string]time.Time{}}
	for _, name := range allMembers {
		if before[name].Owner == victimID {
			m.members = append(m.members, name)
		}
	}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			if table, ok := c.owners(ctx, victim); ok {
				m.observe(table, time.Now())
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return m
}

// observe records the first table in which each of the victim's members
// moved.
func (m *moveTracker) observe(table map[string]fleet.Owner, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, name := range m.members {
		o := table[name]
		if _, seen := m.at[name]; !seen && o.Owner != m.victim && o.Epoch > m.before[name].Epoch {
			m.moved[name], m.at[name] = o, now
		}
	}
}

// waitMoved waits up to timeout for member to move and returns its new row.
func (m *moveTracker) waitMoved(member string, timeout time.Duration) (fleet.Owner, bool) {
	var o fleet.Owner
	ok := tryPollFast(timeout, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		_, seen := m.at[member]
		o = m.moved[member]
		return seen
	})
	return o, ok
}

// allMoved is how long after the disruption the last of the victim's
// members moved; false if it owned none or one has not moved.
func (m *moveTracker) allMoved() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var last time.Duration
	for _, name := range m.members {
		at, seen := m.at[name]
		if !seen {
			return 0, false
		}
		last = max(last, at.Sub(m.hit))
	}
	return last, len(m.members) > 0
}

// finishMoves stops following the moves of the round's disrupted replica
// and puts them in its timeline.
func (c *chaos) finishMoves(r *roundResult, event func(string, ...any)) {
	m := r.moves
	if m == nil {
		return
	}
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.members) == 0 {
		event("%s owned no member at the disruption", m.victim)
	}
	for _, name := range m.members {
		if at, seen := m.at[name]; seen {
			event("ownership: %s moved from %s to %s (epoch %d -> %d) %s after the disruption", name, m.victim,
				m.moved[name].Owner, m.before[name].Epoch, m.moved[name].Epoch, at.Sub(m.hit).Round(time.Millisecond))
			continue
		}
		r.notes = append(r.notes, fmt.Sprintf("%s still owned by %s when the round converged", name, m.victim))
	}
}

// moveTable adds one row per disruption of the sharded set: when the hit
// replica's members moved, and what the round took against the QPS ideal.
func moveTable(b *strings.Builder, plan chaosPlan, results []*roundResult) {
	ideal := qpsIdeal(plan)
	fmt.Fprintf(b, "\nMember handover, sharding on (owner lease %s, margin %s). QPS ideal %.2f s.\n\n", shardLease, shardMargin, ideal.Seconds())
	b.WriteString("| disruption | rounds | rounds its members moved | members owned by the hit replica | members moved after the disruption (median, max) | converged after the scale (median, max) | converged after the disruption (median, max) | over the QPS ideal (median, max) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, k := range shardedKinds {
		var n, movedRounds, owned int
		var moved, conv, after, over []time.Duration
		for _, r := range results {
			if r.spec.kind != k {
				continue
			}
			n++
			if r.moves != nil {
				owned += len(r.moves.members)
				if d, ok := r.moves.allMoved(); ok {
					movedRounds++
					moved = append(moved, d)
				}
			}
			if r.converged {
				conv, after, over = append(conv, r.convergeIn), append(after, r.afterDisr), append(over, r.convergeIn-ideal)
			}
		}
		if n > 0 {
			fmt.Fprintf(b, "| %s | %d | %d | %d | %s | %s | %s | %s |\n", k, n, movedRounds, owned, medianMax(moved), medianMax(conv), medianMax(after), medianMax(over))
		}
	}
	b.WriteString("\nMembers moved: from the signal to the first 100 ms poll of another replica's admin status whose committed ownership table names a new owner at a higher epoch for the last of the members the hit replica owned at the signal (rounds where all of them moved before the round converged). ")
	b.WriteString("Members owned by the hit replica: summed over the rounds. Converged after the disruption: from the signal to the start of the converged state (negative: the scale had converged before the disruption landed).\n")
}
