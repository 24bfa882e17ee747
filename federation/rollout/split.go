package rollout

import (
	"slices"
	"strings"
)

// Pods is one revision's state in one member.
type Pods struct {
	// Revision is the revision's name.
	Revision string
	// Target is the member's last committed target for this revision: pods
	// up to it may still be on their way.
	Target int32
	// Replicas is the number of active pods of the revision.
	Replicas int32
	// Available is the number of those pods that are Available.
	Available int32
}

// level is how many pods of the revision may exist: those running and
// those a committed target may still create.
func (p *Pods) level() int32 { return max(p.Replicas, p.Target, 0) }

// Member is one member cluster as Step sees it.
type Member struct {
	// Name of the member.
	Name string
	// Target is the planner's target for the member, all revisions together.
	Target int32
	// UpdateShare is how many of Target the current stage puts on the update
	// revision (Shares); it is clamped to [0, Target].
	UpdateShare int32
	// Reachable is false while the member does not answer: its counts are
	// the last known ones and its targets are left as they are.
	Reachable bool
	// Room is how many more pods of this template the member can run beyond
	// the pods it has; nil means unknown (no limit).
	Room *int32
	// Revisions are the member's pods per revision, in any order.
	Revisions []Pods
}

// Input is one step of a rollout over the fleet.
type Input struct {
	// Replicas is the fleet-wide target (spec.replicas).
	Replicas int32
	// MaxSurge and MaxUnavailable are the resolved budget in pods
	// (planner.ResolveBudget); a negative value counts as 0, and when both
	// are 0 the surge is 1, as the planner does.
	MaxSurge, MaxUnavailable int32
	// UpdateRevision is the revision the step moves towards.
	UpdateRevision string
	// StableRevision is where a member's old-revision pods grow when its
	// target rises before a stage reaches it (status.currentRevision). When
	// the member has none of it, the newest old revision it runs grows.
	StableRevision string
	// Order lists revisions oldest first: the old revisions give up pods in
	// that order. Revisions missing from it count as the oldest.
	Order []string
	// Members are the member clusters; names are unique.
	Members []Member
}

// RevisionTarget is one revision's target in one member.
type RevisionTarget struct {
	// Revision is the revision's name.
	Revision string
	// Replicas is the target.
	Replicas int32
}

// MemberTargets is the step's result for one member.
type MemberTargets struct {
	// Name of the member.
	Name string
	// Targets has one entry per revision the member has pods or a target of,
	// plus the update revision, oldest first as in Input.Order; a held
	// member's are its input revisions as they were.
	Targets []RevisionTarget
	// Held is true for an unreachable member, whose targets were kept.
	Held bool
}

// Target returns the member's target for a revision (0 when absent).
func (m *MemberTargets) Target(revision string) int32 {
	for _, t := range m.Targets {
		if t.Revision == revision {
			return t.Replicas
		}
	}
	return 0
}

// Output is the result of Step.
type Output struct {
	// Members has one entry per input member, sorted by name.
	Members []MemberTargets
	// Settled is true when every counted member runs exactly its share of
	// the update revision, all of it Available, and exactly the rest of its
	// target on old revisions: the stage's work is done.
	Settled bool
	// UpdatedAvailable is the number of Available pods of the update
	// revision in reachable members; the state machine reads progress from it.
	UpdatedAvailable int32
	// Pods bounds the fleet's pods once members follow the new targets:
	// over counted members, the larger of pods, committed and new target
	// per revision. Step keeps it at most max(Replicas+MaxSurge, its value
	// before the step).
	Pods int32
	// Available is the number of Available pods in reachable members before
	// the step.
	Available int32
}

// Step returns per member and per revision targets for one step of a
// rollout. Call it again whenever the members' counts change; each call
// moves as far as the budget allows.
//
// With R = Replicas, S = MaxSurge and U = MaxUnavailable:
//
//   - Surge: new targets never take the fleet's pods (counted as in
//     Output.Pods) above R + S, nor a member's above its Target + S; when
//     either is already above, the step creates nothing there.
//   - Availability: the step's deletions never take the Available pods in
//     reachable members below R - U; when the fleet is already below, it
//     deletes no Available pod.
//   - Replacement first: in a member, Available pods of a revision are
//     deleted only as replacements, while the member has more Available
//     pods than its target, or ahead of replacements within U, fleet-wide.
//     With U = 0 a member's old revision shrinks only as the new one's pods
//     become Available there. Pods that are not Available go first, which
//     is also the order in which a member's engine deletes.
//   - Unreachable members keep their targets. Their last known pods count
//     as pods (they may run) but never as Available; once the planner has
//     failed such a member over (target 0) its pods are not counted, as the
//     planner does not count them. They take budget, so they slow the
//     others only within it.
//   - Each member's split moves towards UpdateShare on the update revision
//     and the rest of Target on old revisions; room for new pods (the
//     surge) is shared fairly among members and never exceeds Room.
func Step(in Input) Output {
	st := newStepper(in)
	st.scaleDown()
	st.scaleUp()
	return st.output()
}

// bucket is one member's pods of the update revision (new) or of every
// other revision together (old).
type bucket struct {
	revs    []Pods // the revisions in the bucket, oldest first
	desired int32  // where the bucket is going
	target  int32  // the step's total target for the bucket
	level   int32  // Σ level of revs
	avail   int32  // Σ Available
	grow    string // the revision that takes growth
}

type memberStep struct {
	m        *Member
	counted  bool
	new, old bucket
	surplus  int32 // Available pods above the member's target
	deleted  int32 // pods the step deletes in the member
	inflight int32 // pods committed targets may still create
}

type stepper struct {
	in      Input
	members []memberStep
	surge   int64 // S, resolved
	room    int64 // new pods the fleet may still get: R + S - pods
	budget  int64 // Available pods the step may still delete: A - (R - U)
	ahead   int64 // of those, deletions ahead of replacements
	out     Output
}

func newStepper(in Input) *stepper {
	surge, unavailable := max(in.MaxSurge, 0), max(in.MaxUnavailable, 0)
	if surge == 0 && unavailable == 0 {
		surge = 1
	}
	age := make(map[string]int, len(in.Order))
	for i, r := range in.Order {
		age[r] = i + 1
	}
	st := &stepper{in: in}
	var pods, avail int64
	for i := range in.Members {
		ms := newMemberStep(&in.Members[i], in.UpdateRevision, in.StableRevision, age)
		if ms.counted {
			pods += int64(ms.new.level + ms.old.level)
		}
		if ms.m.Reachable {
			avail += int64(ms.new.avail + ms.old.avail)
			st.out.UpdatedAvailable += ms.new.avail
		}
		st.members = append(st.members, ms)
	}
	slices.SortFunc(st.members, func(a, b memberStep) int { return strings.Compare(a.m.Name, b.m.Name) })
	r := int64(max(in.Replicas, 0))
	st.surge = int64(surge)
	st.room = max(0, r+int64(surge)-pods)
	st.budget = max(0, avail-(r-int64(unavailable)))
	st.ahead = min(st.budget, int64(unavailable))
	st.out.Available = int32(avail)
	return st
}

func newMemberStep(m *Member, update, stable string, age map[string]int) memberStep {
	ms := memberStep{m: m, counted: m.Reachable || m.Target > 0}
	target := max(m.Target, 0)
	ms.new.desired = min(max(m.UpdateShare, 0), target)
	ms.old.desired = target - ms.new.desired
	revs := slices.Clone(m.Revisions)
	for i := range revs {
		// Counts from a status report may be inconsistent (a negative value,
		// more Available pods than pods); read them as the engine would.
		revs[i].Replicas = max(revs[i].Replicas, 0)
		revs[i].Available = min(max(revs[i].Available, 0), revs[i].Replicas)
	}
	slices.SortStableFunc(revs, func(a, b Pods) int { return age[a.Revision] - age[b.Revision] })
	for _, p := range revs {
		b := &ms.old
		if p.Revision == update {
			b = &ms.new
		}
		b.revs = append(b.revs, p)
		b.level += p.level()
		b.avail += max(p.Available, 0)
		ms.inflight += max(p.Target-p.Replicas, 0)
	}
	if len(ms.new.revs) == 0 {
		ms.new.revs = []Pods{{Revision: update}}
	}
	ms.new.grow = update
	ms.old.grow = stable
	if !slices.ContainsFunc(ms.old.revs, func(p Pods) bool { return p.Revision == stable }) {
		ms.old.grow = ""
		if n := len(ms.old.revs); n > 0 {
			ms.old.grow = ms.old.revs[n-1].Revision
		}
	}
	ms.surplus = max(0, ms.new.avail+ms.old.avail-target)
	ms.new.target, ms.old.target = ms.new.level, ms.old.level
	return ms
}

// scaleDown lowers the buckets above where they are going, old revisions
// before the update revision, spending the availability budget on
// replacements first and then, within U, ahead of them.
func (st *stepper) scaleDown() {
	for _, ahead := range []bool{false, true} {
		for i := range st.members {
			ms := &st.members[i]
			if !ms.m.Reachable {
				continue
			}
			for _, b := range []*bucket{&ms.old, &ms.new} {
				st.lower(ms, b, ahead)
			}
		}
	}
}

// lower brings b's target down towards b.desired: first targets not yet
// reached, then pods that are not Available, then Available pods as far as
// the budget allows.
func (st *stepper) lower(ms *memberStep, b *bucket, ahead bool) {
	if b.desired >= b.target {
		return
	}
	// Available pods the current target would delete (the rest it deletes
	// are not Available), and how many more reaching desired would.
	gone := max(0, b.avail-b.target)
	need := int64(max(0, b.avail-b.desired) - gone)
	var take int64
	if !ahead {
		take = min(need, int64(ms.surplus), st.budget)
		ms.surplus -= int32(take)
	} else {
		take = min(need, st.ahead, st.budget)
		st.ahead -= take
	}
	st.budget -= take
	before := b.target
	b.target = max(b.desired, min(b.target, b.avail-gone-int32(take)))
	if b.target < before {
		ms.deleted += max(0, min(before, sumReplicas(b.revs))-max(b.target, 0))
	}
}

func sumReplicas(ps []Pods) int32 {
	var n int32
	for _, p := range ps {
		n += max(p.Replicas, 0)
	}
	return n
}

// demand is one bucket's wish for new pods.
type demand struct {
	ms   *memberStep
	b    *bucket
	want int64
}

// scaleUp raises the buckets below where they are going, sharing the
// fleet's room for new pods fairly among them (an equal part each, the
// rest one by one in member order), within each member's Room and its
// Target + S.
func (st *stepper) scaleUp() {
	var ds []demand
	memberCap := make(map[*memberStep]int64)
	for i := range st.members {
		ms := &st.members[i]
		if !ms.m.Reachable {
			continue
		}
		// A member's pods stay within its target plus the surge, as the
		// fleet's stay within replicas plus the surge.
		memberCap[ms] = max(0, int64(max(ms.m.Target, 0))+st.surge-int64(ms.new.level+ms.old.level))
		if ms.m.Room != nil {
			memberCap[ms] = min(memberCap[ms], max(0, int64(*ms.m.Room)+int64(ms.deleted)-int64(ms.inflight)))
		}
		for _, b := range []*bucket{&ms.new, &ms.old} {
			if b.desired > b.target && b.grow != "" {
				ds = append(ds, demand{ms: ms, b: b, want: int64(b.desired - b.target)})
			}
		}
	}
	for len(ds) > 0 && st.room > 0 {
		share := max(1, st.room/int64(len(ds)))
		next := ds[:0]
		for _, d := range ds {
			give := min(d.want, share, st.room)
			give = min(give, memberCap[d.ms])
			memberCap[d.ms] -= give
			d.b.target += int32(give)
			d.want -= give
			st.room -= give
			if d.want > 0 && memberCap[d.ms] != 0 && give > 0 {
				next = append(next, d)
			}
		}
		ds = next
	}
}

func (st *stepper) output() Output {
	out := st.out
	out.Settled = true
	for i := range st.members {
		ms := &st.members[i]
		mt := MemberTargets{Name: ms.m.Name, Held: !ms.m.Reachable}
		if ms.m.Reachable {
			mt.Targets = append(distribute(&ms.old), distribute(&ms.new)...)
		} else {
			for _, p := range ms.m.Revisions {
				mt.Targets = append(mt.Targets, RevisionTarget{Revision: p.Revision, Replicas: max(p.Target, 0)})
			}
		}
		if ms.counted {
			for _, b := range []*bucket{&ms.old, &ms.new} {
				for _, p := range b.revs {
					out.Pods += max(p.level(), mt.Target(p.Revision))
				}
			}
			out.Settled = out.Settled && settled(ms, &mt)
		}
		out.Members = append(out.Members, mt)
	}
	return out
}

// settled reports whether a member runs exactly its split, the update
// revision's pods all Available, and its targets say so.
func settled(ms *memberStep, mt *MemberTargets) bool {
	n := ms.new.revs[0]
	if n.Replicas != ms.new.desired || n.Available != ms.new.desired || mt.Target(n.Revision) != ms.new.desired {
		return false
	}
	var cur, tgt int32
	for _, p := range ms.old.revs {
		cur += p.Replicas
		tgt += mt.Target(p.Revision)
		if p.Target > p.Replicas {
			return false
		}
	}
	return cur == ms.old.desired && tgt == ms.old.desired
}

// distribute spreads a bucket's target over its revisions: growth goes to
// b.grow; a cut removes, in order, pods not yet created, pods that are not
// Available, then Available pods, each oldest revision first (the order in
// which the bucket's Available count was budgeted).
func distribute(b *bucket) []RevisionTarget {
	out := make([]RevisionTarget, len(b.revs))
	for i, p := range b.revs {
		out[i] = RevisionTarget{Revision: p.Revision, Replicas: p.level()}
	}
	if b.target >= b.level {
		for i := range out {
			if out[i].Revision == b.grow {
				out[i].Replicas += b.target - b.level
			}
		}
		return out
	}
	cut := b.level - b.target
	for _, part := range []func(p *Pods, now int32) int32{
		func(p *Pods, now int32) int32 { return now - max(p.Replicas, 0) },
		func(p *Pods, now int32) int32 { return now - max(p.Available, 0) },
		func(_ *Pods, now int32) int32 { return now },
	} {
		for i := range out {
			take := min(cut, max(0, part(&b.revs[i], out[i].Replicas)))
			out[i].Replicas -= take
			cut -= take
		}
	}
	return out
}

// CurrentShares returns, for each member, the update revision's pods it
// runs or is to run, within its target: the shares that keep the split
// where it is while a rollout is paused or stopped on a failure, as Step's
// UpdateShare. Scaling and failover still change the members' targets.
func CurrentShares(update string, members []Member) map[string]int32 {
	out := make(map[string]int32, len(members))
	for i := range members {
		var n int32
		for _, p := range members[i].Revisions {
			if p.Revision == update {
				n += p.level()
			}
		}
		out[members[i].Name] = min(n, max(members[i].Target, 0))
	}
	return out
}
