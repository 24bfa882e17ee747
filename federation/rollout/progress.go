package rollout

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// State is a rollout's state: what the replicated store keeps (and status
// shows), so that a new leader continues the stage where the old one was.
// Times are absolute, never durations left, so a handover neither restarts
// a bake nor a deadline.
type State struct {
	// Phase of the rollout; empty before the first template is known.
	Phase v1alpha1.RolloutPhase
	// UpdateRevision is the revision the members move towards; during and
	// after a rollback it is the stable revision.
	UpdateRevision string
	// StableRevision is the revision the last completed rollout left (the
	// one a rollback returns to).
	StableRevision string
	// FailedRevision is the revision a rollback left, so the same template
	// does not start a rollout again.
	FailedRevision string
	// Stage is the index of the current stage in the resolved stages.
	Stage int
	// StageStart, BakeStart and LastProgress are when the stage started,
	// when its new pods were all Available, and when the rollout last made
	// progress.
	StageStart, BakeStart, LastProgress time.Time
	// UpdatedAvailable is the update revision's Available pods last seen.
	UpdatedAvailable int32
	// Resume is the phase a paused rollout returns to.
	Resume v1alpha1.RolloutPhase
	// Reason and Message explain the last transition.
	Reason, Message string
}

// Verdict is the health gate's judgement of the update revision's pods.
type Verdict uint8

const (
	// HealthUnknown means the gate has no verdict yet; the rollout waits.
	HealthUnknown Verdict = iota
	// HealthPassed means the gate holds.
	HealthPassed
	// HealthFailed means the new revision's pods are worse than allowed.
	HealthFailed
)

// Observation is what Advance reads about the fleet at one instant.
type Observation struct {
	// Now is the time of the observation (an injected clock's).
	Now time.Time
	// Settled is Step's Output.Settled for the current stage's shares.
	Settled bool
	// UpdatedAvailable is Step's Output.UpdatedAvailable.
	UpdatedAvailable int32
	// Health is the gate's verdict and HealthMessage its reason. A stage
	// completes only on HealthPassed; callers without a gate beyond the
	// pods' readiness (which Settled covers) pass HealthPassed.
	Health        Verdict
	HealthMessage string
	// Paused is spec.updateStrategy.paused.
	Paused bool
	// Promote is the value of the annotation AnnotationPromote, if any.
	Promote string
}

// Policy is the part of the spec Advance applies.
type Policy struct {
	// Stages are the resolved stages (Resolve).
	Stages []Stage
	// ProgressDeadline is progressDeadlineSeconds.
	ProgressDeadline time.Duration
	// OnFailure is what a failed stage leads to.
	OnFailure v1alpha1.FailurePolicy
}

// Transition is one change of phase or stage, for an event.
type Transition struct {
	// From and To are the phases.
	From, To v1alpha1.RolloutPhase
	// Stage is the name of the stage it happened in.
	Stage string
	// Reason and Message explain it (the condition reasons of v1alpha1).
	Reason, Message string
}

// Start returns the state after spec.template's revision became rev. A
// first template is stable at once (there is nothing to roll from). A new
// revision starts a rollout at the first stage, from the stable revision,
// whatever was under way; going back to the stable revision rolls every
// member back to it at once, within the budget; the revision a rollback
// left does not start again until the template changes.
func Start(s State, rev string, now time.Time) (State, []Transition) {
	switch {
	case rev == s.UpdateRevision && s.Phase == v1alpha1.PhaseRolledBack:
		// The template is back on the revision the fleet runs: settled.
		n := s
		n.Phase, n.FailedRevision = v1alpha1.PhaseComplete, ""
		n.Reason, n.Message = v1alpha1.ReasonNewRevisionAvailable, "template set to the revision the fleet runs"
		return n, []Transition{{From: s.Phase, To: n.Phase, Reason: n.Reason, Message: n.Message}}
	case rev == s.UpdateRevision && s.Phase != "":
		return s, nil
	case s.StableRevision == "":
		n := State{Phase: v1alpha1.PhaseComplete, UpdateRevision: rev, StableRevision: rev, LastProgress: now,
			Reason: v1alpha1.ReasonNewRevisionAvailable, Message: "first revision"}
		return n, []Transition{{From: s.Phase, To: n.Phase, Reason: n.Reason, Message: n.Message}}
	case rev == s.FailedRevision && (s.Phase == v1alpha1.PhaseRolledBack || s.Phase == v1alpha1.PhaseRollingBack):
		// The spec still holds the failed template while the fleet goes
		// back, and after: it starts again only once the template changes.
		return s, nil
	case rev == s.StableRevision:
		n := State{Phase: v1alpha1.PhaseRollingBack, UpdateRevision: rev, StableRevision: rev, StageStart: now, LastProgress: now,
			Reason: v1alpha1.ReasonTemplateReverted, Message: fmt.Sprintf("template reverted to %s during the rollout of %s", rev, s.UpdateRevision)}
		return n, []Transition{{From: s.Phase, To: n.Phase, Reason: n.Reason, Message: n.Message}}
	}
	n := State{Phase: v1alpha1.PhaseProgressing, UpdateRevision: rev, StableRevision: s.StableRevision,
		StageStart: now, LastProgress: now, Reason: v1alpha1.ReasonNewRevisionCreated,
		Message: fmt.Sprintf("rolling out %s over %s", rev, s.StableRevision)}
	return n, []Transition{{From: s.Phase, To: n.Phase, Reason: n.Reason, Message: n.Message}}
}

// Covering reports whether every member takes the update revision in full:
// after completion, and during and after a rollback, which ignores the
// stages. The caller then gives Step each member's whole target as share.
func (s *State) Covering() bool {
	switch s.Phase {
	case v1alpha1.PhaseComplete, v1alpha1.PhaseRollingBack, v1alpha1.PhaseRolledBack, "":
		return true
	}
	return false
}

// Frozen reports whether the split between revisions must not move (paused,
// or stopped on a failure): the caller then gives Step CurrentShares.
func (s *State) Frozen() bool {
	return s.Phase == v1alpha1.PhasePaused || s.Phase == v1alpha1.PhaseFailed
}

// StageName returns the current stage's name, or "" when no stage applies.
func (s *State) StageName(stages []Stage) string {
	if s.Covering() || s.Stage >= len(stages) {
		return ""
	}
	return stages[s.Stage].Name
}

// Advance moves the state machine on by one observation and returns the
// transitions it made. It reads no clock: o.Now is the time. Call it after
// every Step and when State's next deadline (NextDeadline) arrives.
func Advance(s State, p Policy, o Observation) (State, []Transition) {
	a := advancer{s: s, p: p, o: o}
	a.run()
	return a.s, a.ts
}

type advancer struct {
	s  State
	p  Policy
	o  Observation
	ts []Transition
}

func (a *advancer) to(phase v1alpha1.RolloutPhase, reason, msg string) {
	a.ts = append(a.ts, Transition{From: a.s.Phase, To: phase, Stage: a.s.StageName(a.p.Stages), Reason: reason, Message: msg})
	if phase != a.s.Phase {
		a.s.Phase = phase
	}
	a.s.Reason, a.s.Message = reason, msg
}

func (a *advancer) run() {
	s, o := &a.s, a.o
	switch s.Phase {
	case "", v1alpha1.PhaseComplete, v1alpha1.PhaseRolledBack:
		return
	}
	if o.Paused != (s.Phase == v1alpha1.PhasePaused) && s.Phase != v1alpha1.PhaseRollingBack {
		a.pause(o.Paused)
		if o.Paused {
			return
		}
	}
	if o.Health == HealthFailed && (s.Phase == v1alpha1.PhaseProgressing || s.Phase == v1alpha1.PhaseBaking || s.Phase == v1alpha1.PhaseAwaitingPromotion) {
		a.fail(v1alpha1.ReasonHealthGateFailed, "health gate failed: "+o.HealthMessage)
		return
	}
	switch s.Phase {
	case v1alpha1.PhaseProgressing:
		a.progressing()
	case v1alpha1.PhaseBaking:
		a.baking()
	case v1alpha1.PhaseAwaitingPromotion:
		if o.Settled && a.promoted() {
			a.next("promoted")
		}
	case v1alpha1.PhaseFailed:
		if a.promoted() {
			a.next("promoted after the failure")
		}
	case v1alpha1.PhaseRollingBack:
		if o.Settled {
			a.to(v1alpha1.PhaseRolledBack, s.Reason, fmt.Sprintf("every member runs %s again", s.UpdateRevision))
		}
	}
}

// pause enters or leaves PhasePaused; leaving restarts the progress
// deadline, as resuming a Deployment does.
func (a *advancer) pause(on bool) {
	if on {
		a.s.Resume = a.s.Phase
		a.to(v1alpha1.PhasePaused, v1alpha1.ReasonPausedByUser, "updateStrategy.paused is set")
		return
	}
	back := a.s.Resume
	if back == "" {
		back = v1alpha1.PhaseProgressing
	}
	a.s.Resume = ""
	a.s.LastProgress = a.o.Now
	a.to(back, v1alpha1.ReasonRevisionUpdating, "resumed")
}

func (a *advancer) progressing() {
	s, o := &a.s, a.o
	if o.UpdatedAvailable > s.UpdatedAvailable {
		s.LastProgress = o.Now
	}
	s.UpdatedAvailable = o.UpdatedAvailable
	if o.Settled {
		s.BakeStart, s.LastProgress = o.Now, o.Now
		a.to(v1alpha1.PhaseBaking, v1alpha1.ReasonStageBaking, fmt.Sprintf("stage %s: new pods Available", a.stage().Name))
		a.baking()
		return
	}
	if a.p.ProgressDeadline > 0 && !o.Now.Before(s.LastProgress.Add(a.p.ProgressDeadline)) {
		a.fail(v1alpha1.ReasonProgressDeadlineExceeded, fmt.Sprintf("stage %s made no progress for %s", a.stage().Name, a.p.ProgressDeadline))
	}
}

func (a *advancer) baking() {
	s, o := &a.s, a.o
	st := a.stage()
	if !o.Settled {
		a.to(v1alpha1.PhaseProgressing, v1alpha1.ReasonRevisionUpdating, fmt.Sprintf("stage %s: new pods no longer all Available", st.Name))
		return
	}
	baked := !o.Now.Before(s.BakeStart.Add(st.BakeTime))
	switch {
	case a.promoted():
		a.next("promoted")
	case !baked || o.Health != HealthPassed:
		return
	case st.Manual:
		a.to(v1alpha1.PhaseAwaitingPromotion, v1alpha1.ReasonAwaitingPromotion,
			fmt.Sprintf("stage %s baked; promote with the annotation %s=%s", st.Name, v1alpha1.AnnotationPromote, st.Name))
	default:
		a.next("baked")
	}
}

// promoted reports whether the promote annotation names the current stage.
func (a *advancer) promoted() bool {
	return a.o.Promote != "" && a.s.Stage < len(a.p.Stages) && a.o.Promote == a.p.Stages[a.s.Stage].Name
}

func (a *advancer) stage() *Stage {
	if a.s.Stage < len(a.p.Stages) {
		return &a.p.Stages[a.s.Stage]
	}
	return &Stage{Name: FinalStageName, All: true}
}

// next leaves the current stage: to the following one, or to completion.
func (a *advancer) next(why string) {
	s, now := &a.s, a.o.Now
	done := a.stage().Name
	s.Stage++
	s.StageStart, s.BakeStart, s.LastProgress = now, time.Time{}, now
	if s.Stage >= len(a.p.Stages) {
		s.StableRevision, s.FailedRevision = s.UpdateRevision, ""
		a.to(v1alpha1.PhaseComplete, v1alpha1.ReasonNewRevisionAvailable, fmt.Sprintf("stage %s %s; every member runs %s", done, why, s.UpdateRevision))
		return
	}
	a.to(v1alpha1.PhaseProgressing, v1alpha1.ReasonRevisionUpdating, fmt.Sprintf("stage %s %s; stage %s started", done, why, a.stage().Name))
}

// fail applies onFailure.
func (a *advancer) fail(reason, msg string) {
	s := &a.s
	switch a.p.OnFailure {
	case v1alpha1.FailureContinue:
		a.to(s.Phase, reason, msg+"; continuing (onFailure Continue)")
		a.next("failed")
	case v1alpha1.FailureRollback:
		if s.StableRevision == "" || s.StableRevision == s.UpdateRevision {
			a.to(v1alpha1.PhaseFailed, reason, msg+"; no stable revision to roll back to")
			return
		}
		s.FailedRevision, s.UpdateRevision = s.UpdateRevision, s.StableRevision
		s.LastProgress = a.o.Now
		a.to(v1alpha1.PhaseRollingBack, v1alpha1.ReasonAutomaticRollback, msg+"; rolling back to "+s.StableRevision)
	default:
		a.to(v1alpha1.PhaseFailed, reason, msg+"; paused (onFailure Pause)")
	}
}

// NextDeadline returns when Advance should run again with nothing else
// changing (a bake ending or the progress deadline), or zero.
func (s *State) NextDeadline(p Policy) time.Time {
	switch s.Phase {
	case v1alpha1.PhaseProgressing:
		if p.ProgressDeadline > 0 {
			return s.LastProgress.Add(p.ProgressDeadline)
		}
	case v1alpha1.PhaseBaking:
		if s.Stage < len(p.Stages) {
			return s.BakeStart.Add(p.Stages[s.Stage].BakeTime)
		}
	}
	return time.Time{}
}

// Conditions returns the rollout's conditions for status: Progressing,
// RolloutPaused and RolledBack, with the reasons of v1alpha1.
func (s *State) Conditions(generation int64, now time.Time) []metav1.Condition {
	c := func(typ string, ok bool, reason, msg string) metav1.Condition {
		st := metav1.ConditionFalse
		if ok {
			st = metav1.ConditionTrue
		}
		return metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	}
	failed := s.Reason == v1alpha1.ReasonProgressDeadlineExceeded || s.Reason == v1alpha1.ReasonHealthGateFailed
	out := []metav1.Condition{c(v1alpha1.ConditionProgressing, !failed, orDefault(s.Reason, v1alpha1.ReasonRevisionUpdating), s.Message)}
	switch s.Phase {
	case v1alpha1.PhasePaused, v1alpha1.PhaseAwaitingPromotion:
		out = append(out, c(v1alpha1.ConditionRolloutPaused, true, s.Reason, s.Message))
	case v1alpha1.PhaseFailed:
		out = append(out, c(v1alpha1.ConditionRolloutPaused, true, v1alpha1.ReasonPausedOnFailure, s.Message))
	default:
		out = append(out, c(v1alpha1.ConditionRolloutPaused, false, "NotPaused", ""))
	}
	if s.Phase == v1alpha1.PhaseRolledBack || s.Phase == v1alpha1.PhaseRollingBack {
		out = append(out, c(v1alpha1.ConditionRolledBack, s.Phase == v1alpha1.PhaseRolledBack, s.Reason, s.Message))
	} else {
		out = append(out, c(v1alpha1.ConditionRolledBack, false, "NotRolledBack", ""))
	}
	return out
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
