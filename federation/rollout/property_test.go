package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/planner"
)

// simRev is one revision's pods in a simulated member: Available, running
// but not yet Available, and Pending (no room on the member's nodes).
type simRev struct {
	target, avail, ready, pending int32
}

func (r *simRev) replicas() int32 { return r.avail + r.ready + r.pending }

type simMember struct {
	name      string
	labels    map[string]string
	target    int32  // the planner's target
	capacity  *int32 // pods the member can run; nil is unlimited
	reachable bool
	revs      map[string]*simRev
}

func (m *simMember) running() int32 {
	var n int32
	for _, r := range m.revs {
		n += r.avail + r.ready
	}
	return n
}

func (m *simMember) pods() int32 {
	var n int32
	for _, r := range m.revs {
		n += r.replicas()
	}
	return n
}

func (m *simMember) available() int32 {
	var n int32
	for _, r := range m.revs {
		n += r.avail
	}
	return n
}

func (m *simMember) rev(name string) *simRev {
	if m.revs[name] == nil {
		m.revs[name] = &simRev{}
	}
	return m.revs[name]
}

// fleet is one simulated rollout.
type fleet struct {
	rng                      *rand.Rand
	replicas, surge, unavail int32
	members                  []*simMember
	stages                   []Stage
	policy                   Policy
	bad                      bool // the new revision's pods never become Available
	shortfall                int32
	prefs                    []v1alpha1.ClusterPreference
	uid                      string
}

// replan scales the fleet to replicas and divides it again with the
// planner, from the targets and pods the members have: a scale during the
// rollout. Unreachable members are held by the planner.
func (f *fleet) replan(replicas int32) {
	f.replicas = replicas
	prev := map[string]int32{}
	var pm []planner.Member
	for _, m := range f.members {
		prev[m.name] = m.target
		// Pending pods are left out, so the planner sees the capacity as it is.
		p := planner.Member{Name: m.name, Labels: m.labels, Health: planner.Healthy, Current: m.running(), Ready: m.available()}
		if !m.reachable {
			p.Health = planner.Unhealthy // just now: held, never failed over
		}
		if m.capacity != nil {
			p.FreeCapacity = ptr.To(max(0, *m.capacity-m.running()))
		}
		pm = append(pm, p)
	}
	plan := planner.Plan(planner.Input{UID: f.uid, Replicas: replicas, Placement: v1alpha1.Placement{Clusters: f.prefs}, Previous: prev, Members: pm})
	f.shortfall = plan.Shortfall
	for _, m := range f.members {
		m.target = plan.Target(m.name)
	}
}

const oldRev, newRev = "frs-old", "frs-new"

// newFleet draws a fleet: members with weights, minReplicas, maxReplicas
// and capacity, divided by the real planner, all running the old revision.
func newFleet(seed uint64) *fleet {
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	f := &fleet{rng: rng, replicas: int32(1 + rng.IntN(40)), surge: int32(rng.IntN(4)), unavail: int32(rng.IntN(4))}
	if f.surge == 0 && f.unavail == 0 {
		f.surge = 1 // what the planner's ResolveBudget and Step make of 0/0
	}
	n := 1 + rng.IntN(6)
	var prefs []v1alpha1.ClusterPreference
	var pm []planner.Member
	for i := range n {
		m := &simMember{name: fmt.Sprintf("m%d", i), labels: map[string]string{"region": []string{"eu", "us"}[rng.IntN(2)]},
			reachable: true, revs: map[string]*simRev{}}
		p := v1alpha1.ClusterPreference{Name: m.name, Weight: ptr.To(int32(1 + rng.IntN(3)))}
		if rng.IntN(3) == 0 {
			p.MinReplicas = ptr.To(int32(rng.IntN(4)))
		}
		if rng.IntN(3) == 0 {
			p.MaxReplicas = ptr.To(max(ptr.Deref(p.MinReplicas, 0), int32(rng.IntN(int(f.replicas)+1))))
		}
		if rng.IntN(2) == 0 {
			m.capacity = ptr.To(int32(rng.IntN(int(f.replicas) + 3)))
		}
		prefs = append(prefs, p)
		pm = append(pm, planner.Member{Name: m.name, Labels: m.labels, Health: planner.Healthy, FreeCapacity: m.capacity})
		f.members = append(f.members, m)
	}
	f.prefs, f.uid = prefs, fmt.Sprint(seed)
	plan := planner.Plan(planner.Input{UID: f.uid, Replicas: f.replicas, Placement: v1alpha1.Placement{Clusters: prefs}, Members: pm})
	f.shortfall = plan.Shortfall
	for _, m := range f.members {
		m.target = plan.Target(m.name)
		r := m.rev(oldRev)
		r.target = m.target
		r.avail = min(m.target, ptr.Deref(m.capacity, m.target))
		r.pending = m.target - r.avail
	}
	f.stages = f.drawStages()
	f.bad = rng.IntN(4) == 0
	f.policy = Policy{Stages: f.stages, ProgressDeadline: time.Hour, OnFailure: v1alpha1.FailurePause}
	if f.bad {
		f.policy.ProgressDeadline, f.policy.OnFailure = 40*time.Second, v1alpha1.FailureRollback
	}
	return f
}

func (f *fleet) drawStages() []Stage {
	u := &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling}
	switch f.rng.IntN(3) {
	case 1: // a canary in one member, baked and promoted by hand, then the rest
		u.Stages = []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{f.members[f.rng.IntN(len(f.members))].name},
			Canary: ptr.To(intstr.FromInt32(int32(1 + f.rng.IntN(3)))), BakeTime: v1alpha1.DurationOf(5 * time.Second), Promotion: v1alpha1.PromotionManual}}
	case 2: // half of one region, then that region, then the rest
		sel := &v1alpha1.ClusterLabelSelector{MatchLabels: map[string]string{"region": "eu"}}
		u.Stages = []v1alpha1.RolloutStage{
			{Name: "eu-half", ClusterSelector: sel, Canary: ptr.To(intstr.FromString("50%"))},
			{Name: "eu", ClusterSelector: sel},
		}
	}
	st, err := Resolve(u)
	if err != nil {
		panic(err)
	}
	return st
}

// input builds Step's input from the simulation.
func (f *fleet) input(s *State) Input {
	in := Input{Replicas: f.replicas, MaxSurge: f.surge, MaxUnavailable: f.unavail, UpdateRevision: s.UpdateRevision,
		StableRevision: s.StableRevision, Order: []string{oldRev, newRev}}
	for _, m := range f.members {
		mm := Member{Name: m.name, Target: m.target, Reachable: m.reachable}
		if m.capacity != nil {
			mm.Room = ptr.To(max(0, *m.capacity-m.pods()))
		}
		for _, name := range []string{oldRev, newRev} {
			if r := m.revs[name]; r != nil {
				mm.Revisions = append(mm.Revisions, Pods{Revision: name, Target: r.target, Replicas: r.replicas(), Available: r.avail})
			}
		}
		in.Members = append(in.Members, mm)
	}
	var shares map[string]int32
	switch {
	case s.Covering():
		shares = map[string]int32{}
		for _, m := range in.Members {
			shares[m.Name] = m.Target
		}
	case s.Frozen():
		shares = CurrentShares(s.UpdateRevision, in.Members)
	default:
		var ms []MemberShare
		for _, m := range f.members {
			ms = append(ms, MemberShare{Name: m.name, Labels: m.labels, Target: m.target})
		}
		shares = Shares(f.stages, s.Stage, ms)
	}
	for i := range in.Members {
		in.Members[i].UpdateShare = shares[in.Members[i].Name]
	}
	return in
}

// counted sums what Step counts: pods of members that are reachable or
// still have a target, and Available pods of reachable members.
func (f *fleet) counted() (pods, avail int32) {
	for _, m := range f.members {
		if m.reachable || m.target > 0 {
			pods += m.pods()
		}
		if m.reachable {
			avail += m.available()
		}
	}
	return pods, avail
}

// apply makes the reachable members follow the targets: deletions first
// (Pending, then not Available, then Available pods, as the engine ranks
// them), then some of the missing pods, which run while there is room.
func (f *fleet) apply(t *testing.T, out Output, step int) {
	for _, m := range f.members {
		mt := findTargets(out, m.name)
		if !m.reachable {
			for name, r := range m.revs {
				if mt.Target(name) != r.target {
					t.Fatalf("step %d: held member %s: target of %s changed %d -> %d", step, m.name, name, r.target, mt.Target(name))
				}
			}
			continue
		}
		for _, rt := range mt.Targets {
			r := m.rev(rt.Revision)
			r.target = rt.Replicas
			for drop := r.replicas() - r.target; drop > 0; drop-- {
				switch {
				case r.pending > 0:
					r.pending--
				case r.ready > 0:
					r.ready--
				default:
					r.avail--
				}
			}
		}
	}
	for _, m := range f.members {
		if !m.reachable {
			continue
		}
		for _, name := range []string{oldRev, newRev} {
			r := m.rev(name)
			if need := r.target - r.replicas(); need > 0 {
				r.pending += int32(f.rng.IntN(int(need) + 1))
			}
		}
		for _, name := range []string{oldRev, newRev} {
			r := m.rev(name)
			for r.pending > 0 && (m.capacity == nil || m.running() < *m.capacity) {
				r.pending--
				r.ready++
			}
		}
	}
}

// ripen makes running pods Available at random (never the bad revision's).
func (f *fleet) ripen() {
	for _, m := range f.members {
		if !m.reachable {
			continue
		}
		for name, r := range m.revs {
			if name == newRev && f.bad {
				continue
			}
			for k := r.ready; k > 0; k-- {
				if f.rng.IntN(2) == 0 {
					r.ready--
					r.avail++
				}
			}
		}
	}
}

func findTargets(o Output, name string) *MemberTargets {
	for i := range o.Members {
		if o.Members[i].Name == name {
			return &o.Members[i]
		}
	}
	return &MemberTargets{Name: name}
}

// TestStepProperty rolls random fleets (members with minReplicas,
// maxReplicas and capacity, divided by the planner; random availability;
// members unreachable for a while; scaling, re-divided by the planner,
// during the rollout; canary, selector and plain stages; one fleet in four
// with a template whose pods never become Available and onFailure
// Rollback) step by step and checks at every step:
//
//   - the fleet's pods never exceed replicas + maxSurge, neither the bound
//     Step reports nor the pods the members run, and no member's exceed
//     its target + maxSurge;
//   - the step's deletions never take the Available pods below
//     replicas - maxUnavailable (nor lower them when already below);
//   - Available pods removed ahead of replacements, summed over members,
//     never exceed maxUnavailable (with 0, no member loses an Available
//     pod before a replacement is Available there);
//   - an unreachable member's targets never change;
//   - no member runs more of the new revision than its stage allows.
//
// Once every member is reachable again, a rollout that can finish (no
// capacity shortfall, and room for a surge pod in every member or
// maxUnavailable >= 1) must complete, every member on the new revision
// only and all of it Available; a bad template must roll back, every
// member on the old revision only.
func TestStepProperty(t *testing.T) {
	fleets := 400
	if testing.Short() {
		fleets = 60
	}
	for seed := range uint64(fleets) {
		f := newFleet(seed)
		t.Run(fmt.Sprintf("seed-%d", seed), func(t *testing.T) { f.run(t) })
	}
}

func (f *fleet) run(t *testing.T) {
	now := time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	s, _ := Start(State{}, oldRev, now)
	s, _ = Start(s, newRev, now)
	const chaos, limit = 60, 4000
	for step := range limit {
		now = now.Add(time.Second)
		if step < chaos && f.rng.IntN(8) == 0 {
			m := f.members[f.rng.IntN(len(f.members))]
			m.reachable = !m.reachable
		}
		if step < chaos && f.rng.IntN(20) == 0 {
			f.replan(max(1, f.replicas+int32(f.rng.IntN(11))-5))
		}
		if step == chaos {
			for _, m := range f.members {
				m.reachable = true
			}
			f.replan(f.replicas) // as the planner would once every member answers
		}
		in := f.input(&s)
		out := Step(in)
		f.check(t, step, in, out)
		obs := Observation{Now: now, Settled: out.Settled, UpdatedAvailable: out.UpdatedAvailable, Health: HealthPassed}
		if s.Phase == v1alpha1.PhaseAwaitingPromotion {
			obs.Promote = s.StageName(f.stages)
		}
		s, _ = Advance(s, f.policy, obs)
		if step > chaos && f.done(&s, out) {
			return
		}
	}
	if f.feasible() {
		t.Fatalf("rollout did not finish in %d steps: phase %s stage %d (%s); fleet %s", limit, s.Phase, s.Stage, s.Message, f)
	}
}

func (f *fleet) check(t *testing.T, step int, in Input, out Output) {
	t.Helper()
	// Pods as Step counts them (committed targets may still create pods):
	// after a scale-down they may be above the new bound, and then the step
	// must not raise them.
	_, availBefore := f.counted()
	var podsBefore int32
	for _, m := range f.members {
		if m.reachable || m.target > 0 {
			podsBefore += memberLevels(m, nil)
		}
	}
	bound := f.replicas + f.surge
	if out.Pods > max(bound, podsBefore) {
		t.Fatalf("step %d: pods bound %d above replicas+surge %d (before %d); fleet %s", step, out.Pods, bound, podsBefore, f)
	}
	perMember := map[string]int32{}
	for _, m := range f.members {
		perMember[m.name] = m.available()
		before, after := memberLevels(m, nil), memberLevels(m, findTargets(out, m.name))
		if m.reachable && after > max(m.target+f.surge, before) {
			t.Fatalf("step %d: member %s: pods bound %d above its target+surge %d (before %d); fleet %s", step, m.name, after, m.target+f.surge, before, f)
		}
		mt := findTargets(out, m.name)
		if m.reachable && mt.Target(newRev) > max(in.memberShare(m.name), levelOf(m.revs[newRev])) && in.UpdateRevision == newRev {
			t.Fatalf("step %d: member %s: new revision target %d above its share %d", step, m.name, mt.Target(newRev), in.memberShare(m.name))
		}
	}
	f.apply(t, out, step)
	podsAfter, availAfter := f.counted()
	if podsAfter > max(bound, podsBefore) {
		t.Fatalf("step %d: fleet runs %d pods, above replicas+surge %d; fleet %s", step, podsAfter, bound, f)
	}
	floor := f.replicas - f.unavail
	if availAfter < min(availBefore, floor) {
		t.Fatalf("step %d: Available pods %d -> %d, below replicas-maxUnavailable %d; fleet %s", step, availBefore, availAfter, floor, f)
	}
	var ahead int32
	for _, m := range f.members {
		ahead += max(0, min(perMember[m.name], m.target)-m.available())
	}
	if ahead > f.unavail {
		t.Fatalf("step %d: %d Available pods removed ahead of their replacements, maxUnavailable %d; fleet %s", step, ahead, f.unavail, f)
	}
	f.ripen()
}

// memberLevels is a member's pods counted as Step counts them: per
// revision the larger of pods and committed target, and of the new
// targets when mt is given.
func memberLevels(m *simMember, mt *MemberTargets) int32 {
	var n int32
	for name, r := range m.revs {
		l := max(r.replicas(), r.target)
		if mt != nil {
			l = max(l, mt.Target(name))
		}
		n += l
	}
	return n
}

func levelOf(r *simRev) int32 {
	if r == nil {
		return 0
	}
	return max(r.target, r.replicas())
}

func (in *Input) memberShare(name string) int32 {
	for _, m := range in.Members {
		if m.Name == name {
			return min(m.UpdateShare, m.Target)
		}
	}
	return 0
}

// done reports whether the rollout (or its rollback) finished: the phase
// says so and every member runs its target of one revision, all Available.
func (f *fleet) done(s *State, out Output) bool {
	if s.Phase != v1alpha1.PhaseComplete && s.Phase != v1alpha1.PhaseRolledBack {
		return false
	}
	want, other := newRev, oldRev
	if f.bad {
		want, other = oldRev, newRev
		if s.Phase != v1alpha1.PhaseRolledBack {
			return false
		}
	}
	for _, m := range f.members {
		w, o := m.rev(want), m.rev(other)
		if w.avail != m.target || w.replicas() != m.target || o.replicas() != 0 {
			return false
		}
	}
	return out.Settled
}

// feasible reports whether the rollout can finish: every replica fits,
// and each member either has room for a surge pod or the budget lets an
// old pod go first.
func (f *fleet) feasible() bool {
	if f.shortfall > 0 {
		return false
	}
	if f.unavail >= 1 {
		return true
	}
	for _, m := range f.members {
		if m.target > 0 && m.capacity != nil && *m.capacity <= m.target {
			return false
		}
	}
	return true
}

func (f *fleet) String() string {
	s := fmt.Sprintf("replicas=%d surge=%d unavailable=%d bad=%v stages=%d:", f.replicas, f.surge, f.unavail, f.bad, len(f.stages))
	for _, m := range f.members {
		s += fmt.Sprintf(" %s[t=%d cap=%v reach=%v", m.name, m.target, ptr.Deref(m.capacity, -1), m.reachable)
		for _, name := range []string{oldRev, newRev} {
			if r := m.revs[name]; r != nil {
				s += fmt.Sprintf(" %s=%d/%d/%d+%dp", name, r.target, r.avail, r.ready, r.pending)
			}
		}
		s += "]"
	}
	return s
}

// TestStepArbitraryStates checks Step's promises on states no rollout of
// the simulation reaches: random counts per revision (up to three), committed
// targets above or below the pods, members above their targets, surplus
// Available pods, unreachable members and any share.
func TestStepArbitraryStates(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	revNames := []string{"r1", "r2", "r3"}
	for i := range 3000 {
		in := Input{Replicas: int32(rng.IntN(30)), MaxSurge: int32(rng.IntN(4)), MaxUnavailable: int32(rng.IntN(4)),
			UpdateRevision: "r3", StableRevision: revNames[rng.IntN(2)], Order: revNames}
		for j := range 1 + rng.IntN(5) {
			m := Member{Name: fmt.Sprintf("m%d", j), Target: int32(rng.IntN(12)), Reachable: rng.IntN(4) > 0}
			m.UpdateShare = int32(rng.IntN(int(m.Target) + 2))
			if rng.IntN(2) == 0 {
				m.Room = ptr.To(int32(rng.IntN(5)))
			}
			for _, r := range revNames {
				if rng.IntN(3) == 0 {
					continue
				}
				p := Pods{Revision: r, Replicas: int32(rng.IntN(8)), Target: int32(rng.IntN(8))}
				p.Available = int32(rng.IntN(int(p.Replicas) + 1))
				m.Revisions = append(m.Revisions, p)
			}
			in.Members = append(in.Members, m)
		}
		checkArbitrary(t, i, in, Step(in))
	}
}

func checkArbitrary(t *testing.T, i int, in Input, out Output) {
	t.Helper()
	surge, unavail := in.MaxSurge, in.MaxUnavailable
	if surge == 0 && unavail == 0 {
		surge = 1
	}
	var podsBefore, availBefore, availAfter, ahead int32
	for k, m := range in.Members {
		mt := &out.Members[k]
		if mt.Name != m.Name {
			t.Fatalf("case %d: members out of order", i)
		}
		var before, after, mAvail, mAvailAfter int32
		for _, p := range m.Revisions {
			nt := mt.Target(p.Revision)
			before += max(p.Replicas, p.Target)
			after += max(p.Replicas, p.Target, nt)
			mAvail += p.Available
			mAvailAfter += p.Available - max(0, p.Available-nt) // the engine deletes pods that are not Available first
			if !m.Reachable && nt != p.Target {
				t.Fatalf("case %d: held member %s: target of %s changed", i, m.Name, p.Revision)
			}
		}
		if n := mt.Target(in.UpdateRevision); m.Reachable && n > max(min(m.UpdateShare, m.Target), levelIn(m, in.UpdateRevision)) {
			t.Fatalf("case %d: member %s: update target %d above its share %d; %+v", i, m.Name, n, m.UpdateShare, in)
		}
		if m.Reachable && after > max(m.Target+surge, before) {
			t.Fatalf("case %d: member %s: pods bound %d above target+surge %d (before %d); %+v", i, m.Name, after, m.Target+surge, before, in)
		}
		if m.Reachable || m.Target > 0 {
			podsBefore += before
		}
		if m.Reachable {
			availBefore += mAvail
			availAfter += mAvailAfter
			ahead += max(0, min(mAvail, m.Target)-mAvailAfter)
		}
	}
	if out.Pods > max(in.Replicas+surge, podsBefore) {
		t.Fatalf("case %d: pods bound %d above replicas+surge %d (before %d); %+v", i, out.Pods, in.Replicas+surge, podsBefore, in)
	}
	if availAfter < min(availBefore, in.Replicas-unavail) {
		t.Fatalf("case %d: Available %d -> %d, below replicas-maxUnavailable %d; %+v", i, availBefore, availAfter, in.Replicas-unavail, in)
	}
	if ahead > unavail {
		t.Fatalf("case %d: %d Available pods removed ahead of replacements, maxUnavailable %d; %+v", i, ahead, unavail, in)
	}
}

func levelIn(m Member, rev string) int32 {
	for _, p := range m.Revisions {
		if p.Revision == rev {
			return max(p.Replicas, p.Target)
		}
	}
	return 0
}
