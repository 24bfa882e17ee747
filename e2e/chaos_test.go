package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/faultproxy"
)

// disruption is one kind of trouble a chaos round applies mid-scale.
type disruption string

// The disruptions of issue 9.
const (
	followerTerm disruption = "follower SIGTERM"
	leaderTerm   disruption = "leader SIGTERM"
	transfer     disruption = "leadership transfer (admin API)"
	leaderStop   disruption = "leader SIGSTOP 3s, SIGCONT"
	leaderKill   disruption = "leader SIGKILL"
	rotation     disruption = "member kubeconfig Secret rotation"
	faultyMember disruption = "member API behind fault proxy"
	// The sharded set's (TestChaosSharded): the owner of a member that
	// does not lead raft.
	ownerKill disruption = "member owner SIGKILL"
	ownerStop disruption = "member owner SIGSTOP until the member moved, SIGCONT"
)

// allDisruptions orders the table rows.
var allDisruptions = []disruption{leaderTerm, transfer, leaderStop, leaderKill, ownerKill, ownerStop, followerTerm, rotation, faultyMember}

func (d disruption) leader() bool {
	return d == leaderTerm || d == transfer || d == leaderStop || d == leaderKill
}

// owner reports whether d hits a member's owner that does not lead raft.
func (d disruption) owner() bool { return d == ownerKill || d == ownerStop }

// Chaos parameters. Bounds are generous on purpose: the suite runs on two
// loaded cores with -race and must fail only on a real violation.
const (
	// proxiedMember's API server is reached by replicafed through a fault
	// proxy (pass-through outside faultyMember rounds).
	proxiedMember = memberB
	// convergeBound is how long a round may take from the scale request until
	// every member runs its target, all Ready, and the hub status says so.
	convergeBound = 3 * time.Minute
	// stopFor is how long leaderStop freezes the leader.
	stopFor = 3 * time.Second
	// termGrace is how long a SIGTERMed replica may take to exit (a
	// StatefulSet's default terminationGracePeriodSeconds is 30).
	termGrace = 30 * time.Second
	// settle is how long the target state must hold after a disruption is
	// over before the round counts as converged.
	settle = 3 * time.Second
	// chaosSurge is the FederatedReplicaSet's maxSurge: no move happens in
	// these rounds, so a member above target+1 has duplicates.
	chaosSurge = 1
)

// faults are the proxy's settings in faultyMember rounds.
var faults = faultproxy.Faults{Rate: 0.10, Latency: 50 * time.Millisecond, TimeoutHold: 5 * time.Second}

// roundSpec is one round: a scale up (low -> high) or down (high -> low)
// with one disruption.
type roundSpec struct {
	kind disruption
	up   bool
}

// chaosPlan is the whole run.
type chaosPlan struct {
	mode      string
	high, low int
	rounds    []roundSpec
	// sharded runs the fleet with sharding on (TestChaosSharded).
	sharded bool
}

// chaosPlanFromEnv returns the short form (one round per disruption kind,
// inside `make test`) or, with REPLICAFED_CHAOS=long (`make chaos`), the long
// form: cycles of every leader disruption on a scale-up and a scale-down
// plus one other disruption each way, at least 50 leader disruptions.
// REPLICAFED_CHAOS_REPLICAS and REPLICAFED_CHAOS_CYCLES override the size.
func chaosPlanFromEnv(t *testing.T) chaosPlan {
	p, cycles := chaosSizeFromEnv(t, 7)
	long := p.mode == "long"
	others := []disruption{followerTerm, rotation, faultyMember}
	leaders := []disruption{leaderTerm, transfer, leaderStop, leaderKill}
	if !long {
		// Every leader disruption both ways, then each other one once.
		for _, k := range leaders {
			p.rounds = append(p.rounds, roundSpec{k, true}, roundSpec{k, false})
		}
		p.rounds = append(p.rounds, roundSpec{followerTerm, true}, roundSpec{rotation, false}, roundSpec{faultyMember, true})
		return p
	}
	for c := range cycles {
		for _, k := range leaders {
			p.rounds = append(p.rounds, roundSpec{k, true}, roundSpec{k, false})
		}
		p.rounds = append(p.rounds, roundSpec{others[c%3], true}, roundSpec{others[(c+1)%3], false})
	}
	return p
}

// chaosSizeFromEnv reads the form (REPLICAFED_CHAOS=long or short), the
// replica counts (REPLICAFED_CHAOS_REPLICAS) and the long form's cycles
// (REPLICAFED_CHAOS_CYCLES, else cycles); the rounds are the caller's.
func chaosSizeFromEnv(t *testing.T, cycles int) (chaosPlan, int) {
	p := chaosPlan{mode: "short", high: 90}
	if os.Getenv("REPLICAFED_CHAOS") == "long" {
		p.mode, p.high = "long", 300
	}
	if v := os.Getenv("REPLICAFED_CHAOS_REPLICAS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 6 || n%6 != 0 {
			t.Fatalf("REPLICAFED_CHAOS_REPLICAS=%q: want a multiple of 6", v)
		}
		p.high = n
	}
	if v := os.Getenv("REPLICAFED_CHAOS_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("REPLICAFED_CHAOS_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	// Halving keeps both counts multiples of 3: equal weights give an
	// exact, known spread.
	p.low = p.high / 2
	return p, cycles
}

// roundResult is what one round measured.
type roundResult struct {
	n          int
	spec       roundSpec
	from, to   int
	findings   findings
	converged  bool
	convergeIn time.Duration // from the scale request
	afterDisr  time.Duration // from the disruption
	handover   *handover     // leader disruptions: what the next leader took
	moves      *moveTracker  // sharded rounds: the hit replica's members moving away
	statusLag  time.Duration // from the members' pods at target to the hub status saying so
	final      string
	timeline   []string
	notes      []string
	failures   []string // everything that fails the round
}

func (r *roundResult) failed() bool { return len(r.failures) > 0 }

// chaos runs the rounds against one FederatedReplicaSet.
type chaos struct {
	t    *testing.T
	e    *env
	plan chaosPlan
	name string
	gen  int
	art  string // artifacts directory
	// prefix names the artifacts ("chaos" or "chaos-sharded"), so the two
	// sets do not overwrite each other's tables.
	prefix string
}

// TestChaos scales a FederatedReplicaSet up and down across the three
// members (weights 1:1:1, maxSurge 1) and disrupts the raft replicas or a
// member's access mid-scale, round after round. Every round watches every pod
// creation and deletion in every member and lists every member's pods every
// 100 ms, and fails on:
//
//   - a sample above a member's max(old, new target) + maxSurge, or the
//     fleet above max(old, new replicas) + maxSurge;
//   - on a scale-up, any create beyond the missing replicas (duplicates) or
//     any delete; on a scale-down, any delete beyond the surplus, any create,
//     or a sample below the new target;
//   - not converging within convergeBound of the scale request: every member
//     at its target (the undisturbed equal spread), all Ready, none
//     terminating, and the hub status reporting it, holding for settle after
//     the disruption is over (a resumed or restarted replica acts late).
//
// The results table goes to the test log and e2e/_artifacts/chaos.md; each
// failed round's details (timeline, pods, replica log tails) to
// e2e/_artifacts/chaos-round-NN.log.
func TestChaos(t *testing.T) {
	plan := chaosPlanFromEnv(t)
	e := newEnv(t, "e2e-chaos")
	if e.f.Proxy(proxiedMember) == nil {
		t.Fatalf("%s is not behind a fault proxy in the shared fleet", proxiedMember)
	}
	t.Cleanup(func() { _ = e.f.Proxy(proxiedMember).SetFaults(faultproxy.Faults{}) })
	runChaos(&chaos{t: t, e: e, plan: plan, art: "_artifacts", prefix: "chaos"})
}

// runChaos runs c's plan round after round on a fresh FederatedReplicaSet
// and writes the table to the test log and <art>/<prefix>.md.
func runChaos(c *chaos) {
	t, plan := c.t, c.plan
	if err := os.MkdirAll(c.art, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(c.art, c.prefix+"-rounds.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	old, _ := filepath.Glob(filepath.Join(c.art, c.prefix+"-round-*.log"))
	for _, f := range old {
		_ = os.Remove(f)
	}
	started := time.Now()
	logf(t, "chaos %s form: %d rounds, %d <-> %d replicas, converge bound %s", plan.mode, len(plan.rounds), plan.low, plan.high, convergeBound)
	c.newFRS(plan.low)

	var results []*roundResult
	for i, spec := range plan.rounds {
		if err := c.ensureFleet(); err != nil {
			t.Fatalf("round %d: fleet not healthy before the round: %v", i+1, err)
		}
		r := c.round(i+1, spec)
		results = append(results, r)
		logf(t, "round %d/%d %s %d->%d: %s", i+1, len(plan.rounds), spec.kind, r.from, r.to, r.summary())
		c.appendRoundsLog(r)
		if r.failed() {
			path := c.writeRoundLog(r)
			t.Errorf("round %d (%s, scale %d->%d) violated the failover promise (details: e2e/%s):\n%s",
				r.n, spec.kind, r.from, r.to, path, r.detail())
			// The next round starts from a clean object at this round's
			// target.
			c.replaceFRS(r.to)
		}
	}
	table := chaosTable(plan, results, time.Since(started))
	logf(t, "chaos results:\n%s", table)
	if err := os.WriteFile(filepath.Join(c.art, c.prefix+".md"), []byte(table), 0o644); err != nil {
		t.Errorf("writing chaos table: %v", err)
	}
}

func (c *chaos) spread(n int) map[string]int {
	out := map[string]int{}
	for _, m := range allMembers {
		out[m] = n / len(allMembers)
	}
	return out
}

// newFRS creates a FederatedReplicaSet with n replicas and waits for it to
// converge.
func (c *chaos) newFRS(n int) {
	c.gen++
	c.name = fmt.Sprintf("chaos-%d", c.gen)
	c.e.create(frsSpec{
		name: c.name, replicas: int32(n),
		clusters: []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)},
		budget:   v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(chaosSurge)), MaxUnavailable: ptr.To(intstr.FromInt32(0))},
	})
	c.e.waitSplit(c.name, split(c.spread(n)))
}

// replaceFRS deletes the current object (and its pods) and starts afresh
// with n replicas.
func (c *chaos) replaceFRS(n int) {
	if p := c.e.f.Proxy(proxiedMember); p != nil {
		_ = p.SetFaults(faultproxy.Faults{})
	}
	if err := c.ensureFleet(); err != nil {
		c.t.Fatalf("fleet not healthy after a failed round: %v", err)
	}
	c.e.deleteAndWait(c.name)
	for _, m := range allMembers {
		c.e.poll("pods of "+c.name+" gone from "+m, func(ctx context.Context) (bool, error) {
			ps, err := c.e.pods(ctx, m, c.name)
			return err == nil && len(ps) == 0, nil
		})
	}
	c.newFRS(n)
}

// describeStatuses renders every running replica's admin status (or why it
// did not answer), for a failure message.
func (c *chaos) describeStatuses(ctx context.Context) string {
	var parts []string
	for _, r := range c.e.f.Replicas {
		if !r.Running() {
			parts = append(parts, r.ID+" stopped")
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := r.Status(sctx)
		cancel()
		if err != nil {
			parts = append(parts, fmt.Sprintf("%s no answer (%v)", r.ID, err))
			continue
		}
		parts = append(parts, fmt.Sprintf("%s leading=%t term=%d leader=%s ready=%t", r.ID, st.Leading, st.Term, st.LeaderID, st.Ready))
	}
	return strings.Join(parts, "; ")
}

// leader returns the leading replica and its term, or nil.
func (c *chaos) leader(ctx context.Context) (*fleet.Replica, uint64) {
	for id, st := range c.e.f.Statuses(ctx) {
		if st.Leading {
			return c.replica(id), st.Term
		}
	}
	return nil, 0
}

func (c *chaos) replica(id string) *fleet.Replica {
	for _, r := range c.e.f.Replicas {
		if r.ID == id {
			return r
		}
	}
	return nil
}

// ensureFleet restarts any stopped replica and waits until all three are
// running and ready and agree on one leader.
func (c *chaos) ensureFleet() error {
	for _, r := range c.e.f.Replicas {
		if !r.Running() {
			if err := r.Start(); err != nil {
				return fmt.Errorf("restarting %s: %w", r.ID, err)
			}
		}
	}
	if err := c.e.f.WaitAllReady(context.Background(), 2*time.Minute); err != nil || !c.plan.sharded {
		return err
	}
	// An owner round needs a member owned by a replica other than the
	// leader; the assignment spreads the members over the live replicas
	// again once a restarted one is back.
	waitOwned(c.t, c.e.f, atLeastTwoOwners)
	return nil
}

// scale sets the FederatedReplicaSet's replicas through the scale subresource.
func (c *chaos) scale(ctx context.Context, n int) error {
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: c.e.ns, Name: c.name}}
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: c.e.ns, Name: c.name}, Spec: autoscalingv1.ScaleSpec{Replicas: int32(n)}}
	return wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.e.f.HubClient.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(sc))
		if apierrors.IsConflict(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// round runs one round; it never fails the test itself.
func (c *chaos) round(n int, spec roundSpec) *roundResult {
	ctx := context.Background()
	r := &roundResult{n: n, spec: spec, from: c.plan.high, to: c.plan.low}
	if spec.up {
		r.from, r.to = c.plan.low, c.plan.high
	}
	check := roundCheck{from: r.from, to: r.to, oldT: c.spread(r.from), newT: c.spread(r.to), surge: chaosSurge}
	event := r.eventf(&check)
	old, term := c.leader(ctx)
	if old == nil {
		r.failures = append(r.failures, "no leader before the round")
		return r
	}
	event("leader %s term %d; object %s/%s at %d replicas", old.ID, term, c.e.ns, c.name, r.from)

	obs, err := startObserver(c.e, c.name)
	if err != nil {
		r.failures = append(r.failures, "starting the observer: "+err.Error())
		return r
	}
	if got := obs.initialActive(); !sameCounts(got, check.oldT) {
		// Something changed the pods after the previous round converged.
		r.failures = append(r.failures, fmt.Sprintf("round starts from %s, not the previous round's converged %s", fmtCounts(got), fmtCounts(check.oldT)))
	}
	stopped := false
	stopObs := func() {
		if !stopped {
			stopped = true
			obs.stop()
		}
	}
	defer stopObs()

	var before faultproxy.Stats
	if spec.kind == faultyMember {
		var ok bool
		if before, ok = c.faultsOn(r, event); !ok {
			return r
		}
	}

	check.start = time.Now()
	if err := c.scale(ctx, r.to); err != nil {
		r.failures = append(r.failures, fmt.Sprintf("scaling to %d: %v", r.to, err))
		return r
	}
	event("scaled %d -> %d", r.from, r.to)
	want := c.spread(r.to)
	track := c.trackConvergence(want)
	defer track.stop()

	created, deleted := r.waitProgress(obs)
	if c.plan.sharded && spec.kind.leader() {
		// The leader owns members too: follow them to their next owner.
		// Read before the disruption's clock starts: a loaded replica's
		// status can take seconds.
		r.moves = c.trackLeaderMoves(ctx)
	}
	event("%d pods created, %d deleted so far: disrupting (%s)", created, deleted, spec.kind)
	check.disrupted = time.Now()
	if r.moves != nil {
		r.moves.hit = check.disrupted
	}
	c.disrupt(ctx, spec.kind, r, event)

	c.awaitConverged(r, track, check, split(want), event)
	c.finishMoves(r, event)
	if spec.kind.leader() {
		r.handover = c.handoverOf(ctx, term, check.disrupted, event)
	}
	if spec.kind == faultyMember {
		c.faultsOff(r, before, event)
	}
	stopObs()
	r.findings = obs.analyze(check)
	r.failures = append(r.failures, r.findings.violations...)
	return r
}

// faultsOn turns the fault proxy's faults on for a faultyMember round and
// returns its counters before.
func (c *chaos) faultsOn(r *roundResult, event func(string, ...any)) (faultproxy.Stats, bool) {
	proxy := c.e.f.Proxy(proxiedMember)
	before := proxy.Stats()
	if err := proxy.SetFaults(faults); err != nil {
		r.failures = append(r.failures, "setting faults: "+err.Error())
		return before, false
	}
	event("fault proxy of %s on: %.0f%% of requests fail (500/429/timeout %s), +%s latency", proxiedMember, faults.Rate*100, faults.TimeoutHold, faults.Latency)
	return before, true
}

// faultsOff turns the faults off and notes what the proxy did meanwhile.
func (c *chaos) faultsOff(r *roundResult, before faultproxy.Stats, event func(string, ...any)) {
	proxy := c.e.f.Proxy(proxiedMember)
	_ = proxy.SetFaults(faultproxy.Faults{})
	st := proxy.Stats()
	r.notes = append(r.notes, fmt.Sprintf("proxy: %d requests, %d forwarded, %d x 500, %d x 429, %d timeouts (%d of them mutations that took effect)",
		st.Requests-before.Requests, st.Forwarded-before.Forwarded, st.InternalErrors-before.InternalErrors,
		st.TooManyRequests-before.TooManyRequests, st.Timeouts-before.Timeouts, st.TimeoutsForwarded-before.TimeoutsForwarded))
	event("fault proxy off")
}

// eventf returns the round's timeline writer: wall clock before the scale,
// times relative to the scale and the disruption after it.
func (r *roundResult) eventf(check *roundCheck) func(string, ...any) {
	return func(format string, args ...any) {
		now := time.Now()
		line := fmt.Sprintf(format, args...)
		if !check.start.IsZero() {
			line = relTime(now, check.start, check.disrupted) + " " + line
		} else {
			line = now.Format("15:04:05.000") + " " + line
		}
		r.timeline = append(r.timeline, line)
	}
}

// waitProgress waits until a tenth of the round's change has happened
// (mid-scale, when the disruption lands) and returns the pods created and
// deleted so far.
func (r *roundResult) waitProgress(obs *observer) (int, int) {
	need := max(abs(r.to-r.from)/10, 1)
	progressed := tryPollFast(time.Minute, func() bool {
		created, deleted := obs.progress()
		if r.spec.up {
			return created >= need
		}
		return deleted >= need
	})
	created, deleted := obs.progress()
	if !progressed {
		r.failures = append(r.failures, fmt.Sprintf("no progress within 1m of the scale: %d created, %d deleted", created, deleted))
	}
	return created, deleted
}

// awaitConverged waits until the target state want holds for settle after
// the disruption is over (a resumed or restarted process acts late), or
// until convergeBound after the scale, stops track and records the outcome
// in r.
func (c *chaos) awaitConverged(r *roundResult, track *convergence, check roundCheck, want split, event func(string, ...any)) {
	over := time.Now()
	deadline := check.start.Add(convergeBound)
	var conv bool
	var since time.Time
	for {
		conv, since, r.final = track.wait(deadline)
		if !conv || track.holds(since, maxTime(since, over).Add(settle)) {
			break
		}
		event("target state broke after holding since %s", relTime(since, check.start, check.disrupted))
	}
	track.stop()
	if !conv {
		r.failures = append(r.failures, fmt.Sprintf("not converged to %s within %s of the scale: %s", want, convergeBound, r.final))
		event("not converged: %s", r.final)
		return
	}
	r.converged = true
	r.convergeIn = since.Sub(check.start)
	r.statusLag = since.Sub(track.podsAtSince())
	r.afterDisr = since.Sub(check.disrupted)
	event("converged to %s since %s", want, relTime(since, check.start, check.disrupted))
	if since.Before(check.disrupted) {
		r.notes = append(r.notes, "the scale had converged before the disruption landed")
	}
}

// disrupt applies one disruption and brings stopped replicas back.
func (c *chaos) disrupt(ctx context.Context, kind disruption, r *roundResult, event func(string, ...any)) {
	fail := func(format string, args ...any) {
		msg := fmt.Sprintf(format, args...)
		r.failures = append(r.failures, msg)
		event("%s", msg)
	}
	old, oldTerm := c.leader(ctx)
	if (kind.leader() || kind.owner()) && old == nil {
		// A status request answers within a second on an idle machine but
		// not always under load; look again before calling it missing.
		tryPoll(30*time.Second, func(ctx context.Context) (bool, error) {
			old, oldTerm = c.leader(ctx)
			return old != nil, nil
		})
	}
	if (kind.leader() || kind.owner()) && old == nil {
		fail("no leader to disrupt within 30s (replicas: %s)", c.describeStatuses(ctx))
		return
	}
	switch kind {
	case ownerKill, ownerStop:
		c.disruptOwner(ctx, kind, old, r, event)
	case followerTerm:
		var f *fleet.Replica
		for _, x := range c.e.f.Replicas {
			if x.Running() && (old == nil || x.ID != old.ID) {
				f = x
				break
			}
		}
		if f == nil {
			fail("no running follower")
			return
		}
		event("SIGTERM to follower %s", f.ID)
		c.terminate(f, r, event)
		c.restart(f, r, event)
	case leaderTerm:
		event("SIGTERM to leader %s (term %d)", old.ID, oldTerm)
		c.terminate(old, r, event)
		c.waitNewLeader(ctx, old, oldTerm, r, event)
		c.restart(old, r, event)
	case transfer:
		event("leadership transfer requested from %s (term %d)", old.ID, oldTerm)
		if err := old.TransferLeadership(ctx); err != nil {
			fail("leadership transfer: %v", err)
			return
		}
		event("leadership transfer returned")
		// Raft moves leadership to a later term; it does not promise the
		// old leader cannot win a later election again (a target slow to
		// send heartbeats on a loaded machine loses it), so any leader of
		// a later term counts, and the old one winning is noted.
		if c.waitNewLeader(ctx, nil, oldTerm, r, event) {
			if l, t := c.leader(ctx); l != nil && l.ID == old.ID {
				r.notes = append(r.notes, fmt.Sprintf("%s leads again in term %d after the transfer", l.ID, t))
			}
		}
	case leaderStop:
		c.stopLeader(ctx, old, oldTerm, r, event, fail)
	case leaderKill:
		old.Kill()
		event("SIGKILL to leader %s (term %d)", old.ID, oldTerm)
		c.waitNewLeader(ctx, old, oldTerm, r, event)
		c.restart(old, r, event)
	case rotation:
		for _, m := range allMembers {
			if err := c.e.f.RotateMemberCredentials(ctx, m); err != nil {
				fail("rotating %s: %v", m, err)
				return
			}
			event("kubeconfig Secret of %s rotated (new ServiceAccount token)", m)
		}
	case faultyMember:
		// Faults run for the whole round.
	}
}

// stopLeader freezes the leader for stopFor and resumes it.
func (c *chaos) stopLeader(ctx context.Context, old *fleet.Replica, oldTerm uint64, r *roundResult, event, fail func(string, ...any)) {
	if err := old.Pause(); err != nil {
		fail("SIGSTOP: %v", err)
		return
	}
	event("SIGSTOP to leader %s (term %d)", old.ID, oldTerm)
	// The pause itself is the disruption, not a wait for a condition.
	time.Sleep(stopFor)
	if err := old.Resume(); err != nil {
		fail("SIGCONT: %v", err)
		return
	}
	event("SIGCONT to %s", old.ID)
	// Followers normally elect a leader while it is frozen; if it kept
	// its term that is worth knowing, but breaks no promise.
	if !c.waitNewLeader(ctx, nil, oldTerm, nil, event) {
		if l, t := c.leader(ctx); l != nil {
			r.notes = append(r.notes, fmt.Sprintf("no election during the %s pause: %s still leads in term %d", stopFor, l.ID, t))
		} else {
			fail("no leader within 1m of SIGCONT")
		}
	}
}

func (c *chaos) terminate(x *fleet.Replica, r *roundResult, event func(string, ...any)) {
	start := time.Now()
	if x.Terminate(termGrace) {
		event("%s exited %s after SIGTERM", x.ID, time.Since(start).Round(time.Millisecond))
		return
	}
	msg := fmt.Sprintf("%s did not exit within %s of SIGTERM; killed", x.ID, termGrace)
	r.notes = append(r.notes, msg)
	event("%s", msg)
}

func (c *chaos) restart(x *fleet.Replica, r *roundResult, event func(string, ...any)) {
	if err := x.Start(); err != nil {
		r.failures = append(r.failures, fmt.Sprintf("restarting %s: %v", x.ID, err))
		return
	}
	if tryPoll(time.Minute, func(ctx context.Context) (bool, error) {
		_, err := x.Status(ctx)
		return err == nil, nil
	}) {
		event("%s restarted and answering", x.ID)
		return
	}
	r.failures = append(r.failures, fmt.Sprintf("%s does not answer within 1m of its restart", x.ID))
}

// waitNewLeader waits for a leader in a later term (other than not, if set);
// if none comes within a minute it records a failure in r (when not nil) and
// returns false.
func (c *chaos) waitNewLeader(ctx context.Context, not *fleet.Replica, term uint64, r *roundResult, event func(string, ...any)) bool {
	var got *fleet.Replica
	var gotTerm uint64
	ok := tryPoll(time.Minute, func(ctx context.Context) (bool, error) {
		got, gotTerm = c.leader(ctx)
		return got != nil && gotTerm > term && (not == nil || got.ID != not.ID), nil
	})
	if !ok {
		id := "none"
		if got != nil {
			id = got.ID
		}
		if r != nil {
			r.failures = append(r.failures, fmt.Sprintf("no new leader within 1m (last seen %s term %d; replicas now: %s)",
				id, gotTerm, c.describeStatuses(ctx)))
		}
		return false
	}
	event("new leader %s term %d", got.ID, gotTerm)
	return true
}

// handover is how long a leader disruption kept member writes waiting.
type handover struct {
	elected    time.Duration // from the disruption to raft electing the leader that finished the round
	firstWrite time.Duration // from that election to its first member pod write; < 0: none
}

// handoverOf reads the current leader's election and first member write,
// if it leads in a term after oldTerm.
func (c *chaos) handoverOf(ctx context.Context, oldTerm uint64, disrupted time.Time, event func(string, ...any)) *handover {
	for id, st := range c.e.f.Statuses(ctx) {
		if !st.Leading || st.Term <= oldTerm || st.LeaderSince.IsZero() {
			continue
		}
		h := &handover{elected: st.LeaderSince.Sub(disrupted), firstWrite: -1}
		if !st.FirstMemberWrite.IsZero() {
			h.firstWrite = st.FirstMemberWrite.Sub(st.LeaderSince)
		}
		event("handover: %s (term %d) elected %s after the disruption, first member write %s after its election",
			id, st.Term, h.elected.Round(time.Millisecond), h.firstWrite.Round(time.Millisecond))
		return h
	}
	return nil
}

// convergence polls whether the round's target state holds, from the scale
// request on, and remembers since when it has held without a break.
type convergence struct {
	mu    sync.Mutex
	since time.Time // start of the current streak; zero while not converged
	// podsSince starts the current streak of the members' pods at the
	// target (the hub status aside); podsAt is its value when since began.
	podsSince, podsAt time.Time
	last              string
	cancel            context.CancelFunc
	done              chan struct{}
}

// trackConvergence starts polling: every member runs want, all Ready, none
// terminating, and the hub status reports it for the current generation.
func (c *chaos) trackConvergence(want map[string]int) *convergence {
	ctx, cancel := context.WithCancel(context.Background())
	v := &convergence{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(v.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			pctx, pcancel := context.WithTimeout(ctx, 10*time.Second)
			pods, ok, msg := c.e.splitState(pctx, c.name, split(want))
			pcancel()
			now := time.Now()
			v.mu.Lock()
			v.last = msg
			switch {
			case pods && v.podsSince.IsZero():
				v.podsSince = now
			case !pods && ctx.Err() == nil:
				v.podsSince = time.Time{}
			}
			switch {
			case ok && v.since.IsZero():
				v.since, v.podsAt = now, v.podsSince
			case !ok && ctx.Err() == nil:
				v.since = time.Time{}
			}
			v.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return v
}

// wait returns once the state holds (and since when) or at the deadline.
func (v *convergence) wait(deadline time.Time) (bool, time.Time, string) {
	for {
		v.mu.Lock()
		since, last := v.since, v.last
		v.mu.Unlock()
		if !since.IsZero() {
			return true, since, last
		}
		if time.Now().After(deadline) {
			return false, time.Time{}, last
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// holds reports whether the streak that began at since lasts until until.
func (v *convergence) holds(since, until time.Time) bool {
	for {
		v.mu.Lock()
		cur := v.since
		v.mu.Unlock()
		if !cur.Equal(since) {
			return false
		}
		if time.Now().After(until) {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// podsAtSince is when the members' pods reached the target in the streak
// that converged.
func (v *convergence) podsAtSince() time.Time {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.podsAt
}

func (v *convergence) stop() {
	v.cancel()
	<-v.done
}

func sameCounts(a, b map[string]int) bool {
	for _, m := range allMembers {
		if a[m] != b[m] {
			return false
		}
	}
	return true
}

// tryPollFast polls a cheap in-memory condition every 5 ms.
func tryPollFast(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func (r *roundResult) summary() string {
	f := r.findings
	s := fmt.Sprintf("over-target samples %d, duplicate creates %d, deletes below target %d", f.overSamples, f.duplicates, f.extraDeletes)
	if r.converged {
		s += fmt.Sprintf(", converged %s after the scale (%s after the disruption)", r.convergeIn.Round(10*time.Millisecond), r.afterDisr.Round(10*time.Millisecond))
	} else {
		s += ", NOT converged"
	}
	if r.failed() {
		s += " — FAILED"
	}
	return s
}

func (r *roundResult) detail() string {
	var b strings.Builder
	for _, f := range r.failures {
		fmt.Fprintf(&b, "  VIOLATION %s\n", f)
	}
	for _, n := range r.notes {
		fmt.Fprintf(&b, "  note: %s\n", n)
	}
	fmt.Fprintf(&b, "  pods created per member %v, deleted %v, max active %v, min active %v over %d samples\n",
		r.findings.created, r.findings.deleted, r.findings.maxActive, r.findings.minActive, r.findings.samples)
	fmt.Fprintf(&b, "  final: %s\n  timeline:\n", r.final)
	for _, l := range r.timeline {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

// appendRoundsLog adds every round's summary, findings and timeline to
// chaos-rounds.log.
func (c *chaos) appendRoundsLog(r *roundResult) {
	f, err := os.OpenFile(filepath.Join(c.art, c.prefix+"-rounds.log"), os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.t.Errorf("opening %s-rounds.log: %v", c.prefix, err)
		return
	}
	defer func() { _ = f.Close() }()
	_, _ = fmt.Fprintf(f, "round %d: %s, scale %d -> %d of %s: %s\n%s\n", r.n, r.spec.kind, r.from, r.to, c.name, r.summary(), r.detail())
}

// writeRoundLog saves a failed round's details and the replicas' log tails.
func (c *chaos) writeRoundLog(r *roundResult) string {
	name := fmt.Sprintf("%s-round-%02d.log", c.prefix, r.n)
	var b strings.Builder
	fmt.Fprintf(&b, "round %d: %s, scale %d -> %d of %s/%s\n%s\n", r.n, r.spec.kind, r.from, r.to, c.e.ns, c.name, r.detail())
	for _, x := range c.e.f.Replicas {
		fmt.Fprintf(&b, "\n===== %s (running=%v) log tail =====\n%s\n", x.ID, x.Running(), x.LogTail(200_000))
	}
	if err := os.WriteFile(filepath.Join(c.art, name), []byte(b.String()), 0o644); err != nil {
		c.t.Errorf("writing %s: %v", name, err)
	}
	return filepath.Join(c.art, name)
}
