package rollout

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// Record is one FederatedReplicaSet's rollout as the replicated store keeps
// it: the state machine, the live revisions with their templates (the
// members need an old revision's template to replace its pods while the
// spec holds only the new one) and the committed per-member, per-revision
// targets. A new leader reads it and continues where the old one was.
type Record struct {
	// State is the state machine's state.
	State State `json:"state"`
	// CollisionCount is status.collisionCount.
	CollisionCount int32 `json:"collisionCount,omitempty"`
	// LastNumber is the highest revision number given out, so numbers never
	// go back when old revisions leave the record.
	LastNumber int64 `json:"lastNumber,omitempty"`
	// Revisions are the live revisions (the update and stable revisions,
	// and older ones until their pods are gone), oldest first.
	Revisions []LiveRevision `json:"revisions,omitempty"`
	// Targets are the committed targets per member and revision.
	Targets map[string][]RevisionTarget `json:"targets,omitempty"`
}

// LiveRevision is a revision the members may run.
type LiveRevision struct {
	// Name, Hash and Number identify the revision (see Revision).
	Name   string `json:"name"`
	Hash   string `json:"hash"`
	Number int64  `json:"number"`
	// Object is the name of the revision's MemberReplicaSet in members:
	// the revision's name, or the FederatedReplicaSet's own name for the
	// revision adopted when an existing object was switched to Rolling.
	Object string `json:"object"`
	// Labelled is true when the revision's pods and selector carry
	// LabelTemplateHash (every revision but an adopted one, whose running
	// pods were created without it).
	Labelled bool `json:"labelled,omitempty"`
	// Template is the revision's pod template as the spec had it.
	Template corev1.PodTemplateSpec `json:"template"`
}

// PodTemplate returns the template the revision's pods are created from:
// Template with LabelTemplateHash added when the revision is Labelled, so
// pods of different revisions are told apart (as Deployments do with
// pod-template-hash).
func (l *LiveRevision) PodTemplate() corev1.PodTemplateSpec {
	t := *l.Template.DeepCopy()
	if l.Labelled {
		if t.Labels == nil {
			t.Labels = map[string]string{}
		}
		t.Labels[v1alpha1.LabelTemplateHash] = l.Hash
	}
	return t
}

// Selector returns the revision's MemberReplicaSet selector: sel, plus
// LabelTemplateHash when the revision is Labelled.
func (l *LiveRevision) Selector(sel *metav1.LabelSelector) *metav1.LabelSelector {
	out := sel.DeepCopy()
	if out == nil {
		out = &metav1.LabelSelector{}
	}
	if l.Labelled {
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[v1alpha1.LabelTemplateHash] = l.Hash
	}
	return out
}

// Revision returns the live revision named name, or nil.
func (r *Record) Revision(name string) *LiveRevision {
	for i := range r.Revisions {
		if r.Revisions[i].Name == name {
			return &r.Revisions[i]
		}
	}
	return nil
}

// ByObject returns the live revision whose MemberReplicaSet is named
// object, or nil.
func (r *Record) ByObject(object string) *LiveRevision {
	for i := range r.Revisions {
		if r.Revisions[i].Object == object {
			return &r.Revisions[i]
		}
	}
	return nil
}

// Target returns the committed target of a revision in a member.
func (r *Record) Target(member, revision string) int32 {
	for _, t := range r.Targets[member] {
		if t.Revision == revision {
			return t.Replicas
		}
	}
	return 0
}

// HasMember reports whether the record holds targets for member.
func (r *Record) HasMember(member string) bool {
	_, ok := r.Targets[member]
	return ok
}

func (r *Record) known() []Revision {
	out := make([]Revision, len(r.Revisions))
	for i := range r.Revisions {
		l := &r.Revisions[i]
		out[i] = Revision{Name: l.Name, Hash: l.Hash, Number: l.Number, Template: &l.Template}
	}
	return out
}

// Counts are one revision's pods in one member, as its MemberReplicaSet
// reports them.
type Counts struct {
	Replicas, Ready, Available, Terminating int32
}

// PassMember is one member as a hub pass sees it.
type PassMember struct {
	// Name and Labels identify the member for the stages.
	Name   string
	Labels map[string]string
	// Target is the planner's committed target (all revisions).
	Target int32
	// Reachable is false while the member's counts are not current.
	Reachable bool
	// Room is its free capacity for this template; nil is unknown.
	Room *int32
	// Pods are its counts per revision object (LiveRevision.Object).
	Pods map[string]Counts
}

// PassInput is what one hub pass knows of a rolling FederatedReplicaSet.
type PassInput struct {
	// Name is the FederatedReplicaSet's name; Template its spec.template.
	Name     string
	Template *corev1.PodTemplateSpec
	// Strategy is spec.updateStrategy (nil or type ReplicaSet once a
	// record exists: every stage is the implicit final one).
	Strategy *v1alpha1.UpdateStrategy
	// Replicas is the fleet-wide target; MaxSurge and MaxUnavailable the
	// resolved budget in pods.
	Replicas, MaxSurge, MaxUnavailable int32
	// Adopt names the first revision's MemberReplicaSet after the object
	// itself, unlabelled: the members may already run it (an existing
	// object switched to Rolling).
	Adopt bool
	// Members are the members with a committed target or a record entry.
	Members []PassMember
	// Now is the pass's time; Promote the promote annotation's value.
	Now     time.Time
	Promote string
	// Health is the health gate's verdict on the update revision.
	Health        Verdict
	HealthMessage string
}

// PassResult is what one pass decided.
type PassResult struct {
	// Record is the record to commit.
	Record Record
	// Step is the split of the pass.
	Step Output
	// Transitions are the state machine's transitions (one event each).
	Transitions []Transition
	// Retired are the revisions that left the record: no member runs or is
	// to run any of their pods; their MemberReplicaSets can go.
	Retired []LiveRevision
	// Stages are the resolved stages; Policy what Advance applied.
	Stages []Stage
	Policy Policy
}

// Pass runs one hub pass of a rollout: it identifies the template's
// revision, starts a rollout when it is new, splits every member's target
// between revisions (Step), advances the state machine on what the members
// run, and retires revisions no member needs any more. It is pure: the
// caller commits Record and acts on the rest.
func Pass(rec Record, in PassInput) (PassResult, error) {
	rec = *rec.deepCopy()
	stages, err := Resolve(in.Strategy)
	if err != nil {
		return PassResult{}, fmt.Errorf("resolving stages: %w", err)
	}
	policy := policyOf(in.Strategy, stages)
	id, err := Identify(in.Name, in.Template, rec.CollisionCount, rec.known())
	if err != nil {
		return PassResult{}, fmt.Errorf("identifying the template's revision: %w", err)
	}
	state, ts := Start(rec.State, id.Revision.Name, in.Now)
	rec.CollisionCount = id.CollisionCount
	if id.New && (state.UpdateRevision == id.Revision.Name || state.StableRevision == id.Revision.Name) {
		rec.addRevision(id.Revision, in)
	}
	out := rec.step(state, stages, in)
	obs := Observation{Now: in.Now, Settled: out.Settled, UpdatedAvailable: out.UpdatedAvailable,
		Health: in.Health, HealthMessage: in.HealthMessage, Promote: in.Promote}
	if in.Strategy != nil {
		obs.Paused = in.Strategy.Paused
	}
	if StartedRollout(ts) {
		// A promotion given for an earlier rollout does not promote this one.
		obs.Promote = ""
	}
	next, more := Advance(state, policy, obs)
	ts = append(ts, more...)
	if len(more) > 0 {
		// The stage or the direction changed: split for the new state now,
		// from the same counts, rather than commit a step for the old one.
		out = rec.step(next, stages, in)
	}
	rec.State = next
	rec.Targets = map[string][]RevisionTarget{}
	for _, m := range out.Members {
		rec.Targets[m.Name] = m.Targets
	}
	retired := rec.retire(in.Members)
	return PassResult{Record: rec, Step: out, Transitions: ts, Retired: retired, Stages: stages, Policy: policy}, nil
}

// StartedRollout reports whether ts start a new rollout (a new template),
// after which a promote annotation left from an earlier one is stale.
func StartedRollout(ts []Transition) bool {
	for _, t := range ts {
		if t.Reason == v1alpha1.ReasonNewRevisionCreated {
			return true
		}
	}
	return false
}

func policyOf(u *v1alpha1.UpdateStrategy, stages []Stage) Policy {
	p := Policy{Stages: stages, ProgressDeadline: v1alpha1.DefaultProgressDeadlineSeconds * time.Second, OnFailure: v1alpha1.FailurePause}
	if u != nil {
		if u.ProgressDeadlineSeconds != nil {
			p.ProgressDeadline = time.Duration(*u.ProgressDeadlineSeconds) * time.Second
		}
		if u.OnFailure != "" {
			p.OnFailure = u.OnFailure
		}
	}
	return p
}

func (r *Record) addRevision(rev Revision, in PassInput) {
	r.LastNumber = max(r.LastNumber+1, rev.Number)
	l := LiveRevision{Name: rev.Name, Hash: rev.Hash, Number: r.LastNumber, Object: rev.Name, Labelled: true, Template: *rev.Template.DeepCopy()}
	if in.Adopt && len(r.Revisions) == 0 {
		l.Object, l.Labelled = in.Name, false
	}
	r.Revisions = append(r.Revisions, l)
}

// step splits every member's target for state s.
func (r *Record) step(s State, stages []Stage, in PassInput) Output {
	sin := Input{Replicas: in.Replicas, MaxSurge: in.MaxSurge, MaxUnavailable: in.MaxUnavailable,
		UpdateRevision: s.UpdateRevision, StableRevision: s.StableRevision}
	for i := range r.Revisions {
		sin.Order = append(sin.Order, r.Revisions[i].Name)
	}
	shareIn := make([]MemberShare, 0, len(in.Members))
	for _, pm := range in.Members {
		m := Member{Name: pm.Name, Target: pm.Target, Reachable: pm.Reachable, Room: pm.Room}
		for i := range r.Revisions {
			l := &r.Revisions[i]
			c, has := pm.Pods[l.Object]
			t := r.Target(pm.Name, l.Name)
			if !has && t == 0 && l.Name != s.UpdateRevision {
				continue
			}
			m.Revisions = append(m.Revisions, Pods{Revision: l.Name, Target: t, Replicas: c.Replicas, Available: c.Available})
		}
		sin.Members = append(sin.Members, m)
		shareIn = append(shareIn, MemberShare{Name: pm.Name, Labels: pm.Labels, Target: pm.Target})
	}
	var shares map[string]int32
	switch {
	case s.Covering():
		shares = Shares(stages, len(stages), shareIn)
	case s.Frozen():
		shares = CurrentShares(s.UpdateRevision, sin.Members)
	default:
		shares = Shares(stages, s.Stage, shareIn)
	}
	for i := range sin.Members {
		sin.Members[i].UpdateShare = shares[sin.Members[i].Name]
	}
	return Step(sin)
}

// retire drops the revisions that are neither the update nor the stable
// one and that no member runs or is to run: every member with a target
// for it is reachable and reports neither pods nor terminating pods.
func (r *Record) retire(members []PassMember) []LiveRevision {
	var out []LiveRevision
	keep := r.Revisions[:0]
	for _, l := range r.Revisions {
		if l.Name == r.State.UpdateRevision || l.Name == r.State.StableRevision || !r.drained(l, members) {
			keep = append(keep, l)
			continue
		}
		out = append(out, l)
		for m, ts := range r.Targets {
			r.Targets[m] = slices.DeleteFunc(ts, func(t RevisionTarget) bool { return t.Revision == l.Name })
		}
	}
	r.Revisions = keep
	return out
}

func (r *Record) drained(l LiveRevision, members []PassMember) bool {
	for _, pm := range members {
		c := pm.Pods[l.Object]
		if r.Target(pm.Name, l.Name) != 0 || c.Replicas != 0 || c.Terminating != 0 || (!pm.Reachable && pm.Target > 0) {
			return false
		}
	}
	return true
}

func (r *Record) deepCopy() *Record {
	out := *r
	out.Revisions = make([]LiveRevision, len(r.Revisions))
	for i := range r.Revisions {
		out.Revisions[i] = r.Revisions[i]
		out.Revisions[i].Template = *r.Revisions[i].Template.DeepCopy()
	}
	out.Targets = make(map[string][]RevisionTarget, len(r.Targets))
	for k, v := range r.Targets {
		out.Targets[k] = slices.Clone(v)
	}
	return &out
}
