package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

var t0 = time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return t0.Add(d) }

// sb builds a State for tests: rolling r2 over r1 unless changed.
type sb struct{ s State }

func state(phase v1alpha1.RolloutPhase) *sb {
	return &sb{s: State{Phase: phase, UpdateRevision: "r2", StableRevision: "r1", StageStart: t0, LastProgress: t0}}
}

func (b *sb) stage(i int) *sb                    { b.s.Stage = i; return b }
func (b *sb) bake(at time.Time) *sb              { b.s.BakeStart = at; return b }
func (b *sb) progress(at time.Time) *sb          { b.s.LastProgress = at; return b }
func (b *sb) started(at time.Time) *sb           { b.s.StageStart = at; return b }
func (b *sb) updated(n int32) *sb                { b.s.UpdatedAvailable = n; return b }
func (b *sb) resume(p v1alpha1.RolloutPhase) *sb { b.s.Resume = p; return b }
func (b *sb) revisions(update, stable string) *sb {
	b.s.UpdateRevision, b.s.StableRevision = update, stable
	return b
}
func (b *sb) failed(rev string) *sb { b.s.FailedRevision = rev; return b }
func (b *sb) why(reason string) *sb { b.s.Reason = reason; return b }
func (b *sb) obj() State            { return b.s }

func testPolicy(onFailure v1alpha1.FailurePolicy) Policy {
	st, err := Resolve(&v1alpha1.UpdateStrategy{Stages: []v1alpha1.RolloutStage{
		{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1)), BakeTime: v1alpha1.DurationOf(5 * time.Minute), Promotion: v1alpha1.PromotionManual},
	}})
	if err != nil {
		panic(err)
	}
	return Policy{Stages: st, ProgressDeadline: 10 * time.Minute, OnFailure: onFailure}
}

// ignoreText leaves messages out of the comparison; reasons are compared.
var ignoreText = cmpopts.IgnoreFields(State{}, "Message")

func reasons(ts []Transition) []string {
	var out []string
	for _, t := range ts {
		out = append(out, string(t.To)+"/"+t.Reason)
	}
	return out
}

func TestAdvance(t *testing.T) {
	healthy := func(now time.Time, settled bool, updated int32) Observation {
		return Observation{Now: now, Settled: settled, UpdatedAvailable: updated, Health: HealthPassed}
	}
	with := func(o Observation, f func(*Observation)) Observation { f(&o); return o }
	pause, rollback, cont := testPolicy(v1alpha1.FailurePause), testPolicy(v1alpha1.FailureRollback), testPolicy(v1alpha1.FailureContinue)
	cases := []struct {
		name    string
		from    State
		policy  Policy
		obs     Observation
		want    State
		reasons []string
	}{
		{"progress moves the deadline", state(v1alpha1.PhaseProgressing).obj(), pause, healthy(at(9*time.Minute), false, 1),
			state(v1alpha1.PhaseProgressing).progress(at(9 * time.Minute)).updated(1).obj(), nil},
		{"no progress: the deadline counts from the last progress", state(v1alpha1.PhaseProgressing).updated(1).obj(), pause, healthy(at(9*time.Minute), false, 1),
			state(v1alpha1.PhaseProgressing).updated(1).obj(), nil},
		{"deadline, onFailure Pause: stopped", state(v1alpha1.PhaseProgressing).obj(), pause, healthy(at(10*time.Minute), false, 0),
			state(v1alpha1.PhaseFailed).why(v1alpha1.ReasonProgressDeadlineExceeded).obj(),
			[]string{"Failed/ProgressDeadlineExceeded"}},
		{"deadline, onFailure Rollback: back to the stable revision", state(v1alpha1.PhaseProgressing).obj(), rollback, healthy(at(10*time.Minute), false, 0),
			state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").failed("r2").progress(at(10 * time.Minute)).why(v1alpha1.ReasonAutomaticRollback).obj(),
			[]string{"RollingBack/AutomaticRollback"}},
		{"deadline, onFailure Continue: the next stage", state(v1alpha1.PhaseProgressing).obj(), cont, healthy(at(10*time.Minute), false, 0),
			state(v1alpha1.PhaseProgressing).stage(1).started(at(10 * time.Minute)).progress(at(10 * time.Minute)).why(v1alpha1.ReasonRevisionUpdating).obj(),
			[]string{"Progressing/ProgressDeadlineExceeded", "Progressing/RevisionUpdating"}},
		{"rollback without a stable revision: stopped", state(v1alpha1.PhaseProgressing).revisions("r2", "").obj(), rollback, healthy(at(10*time.Minute), false, 0),
			state(v1alpha1.PhaseFailed).revisions("r2", "").why(v1alpha1.ReasonProgressDeadlineExceeded).obj(),
			[]string{"Failed/ProgressDeadlineExceeded"}},
		{"settled: the bake starts", state(v1alpha1.PhaseProgressing).obj(), pause, healthy(at(time.Minute), true, 1),
			state(v1alpha1.PhaseBaking).bake(at(time.Minute)).progress(at(time.Minute)).updated(1).why(v1alpha1.ReasonStageBaking).obj(),
			[]string{"Baking/StageBaking"}},
		{"baking, not baked yet", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause, healthy(at(5*time.Minute), true, 1),
			state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), nil},
		{"baked, manual: awaits promotion", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause, healthy(at(6*time.Minute), true, 1),
			state(v1alpha1.PhaseAwaitingPromotion).bake(at(time.Minute)).why(v1alpha1.ReasonAwaitingPromotion).obj(),
			[]string{"AwaitingPromotion/AwaitingPromotion"}},
		{"baked, no health verdict yet: waits", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause,
			with(healthy(at(6*time.Minute), true, 1), func(o *Observation) { o.Health = HealthUnknown }),
			state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), nil},
		{"baking, pods lost: back to progressing", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause, healthy(at(2*time.Minute), false, 0),
			state(v1alpha1.PhaseProgressing).bake(at(time.Minute)).why(v1alpha1.ReasonRevisionUpdating).obj(),
			[]string{"Progressing/RevisionUpdating"}},
		{"health gate fails while baking", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), rollback,
			with(healthy(at(2*time.Minute), true, 1), func(o *Observation) { o.Health = HealthFailed; o.HealthMessage = "restarts" }),
			state(v1alpha1.PhaseRollingBack).bake(at(time.Minute)).revisions("r1", "r1").failed("r2").progress(at(2 * time.Minute)).why(v1alpha1.ReasonAutomaticRollback).obj(),
			[]string{"RollingBack/AutomaticRollback"}},
		{"promotion naming another stage: still waiting", state(v1alpha1.PhaseAwaitingPromotion).obj(), pause,
			with(healthy(at(7*time.Minute), true, 1), func(o *Observation) { o.Promote = "later" }),
			state(v1alpha1.PhaseAwaitingPromotion).obj(), nil},
		{"promoted: the next stage", state(v1alpha1.PhaseAwaitingPromotion).obj(), pause,
			with(healthy(at(7*time.Minute), true, 1), func(o *Observation) { o.Promote = "canary" }),
			state(v1alpha1.PhaseProgressing).stage(1).started(at(7 * time.Minute)).progress(at(7 * time.Minute)).why(v1alpha1.ReasonRevisionUpdating).obj(),
			[]string{"Progressing/RevisionUpdating"}},
		{"promoted while baking: the rest of the bake is skipped", state(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause,
			with(healthy(at(2*time.Minute), true, 1), func(o *Observation) { o.Promote = "canary" }),
			state(v1alpha1.PhaseProgressing).stage(1).started(at(2 * time.Minute)).progress(at(2 * time.Minute)).why(v1alpha1.ReasonRevisionUpdating).obj(),
			[]string{"Progressing/RevisionUpdating"}},
		{"last stage settled: complete, the revision is stable", state(v1alpha1.PhaseProgressing).stage(1).obj(), pause, healthy(at(3*time.Minute), true, 8),
			state(v1alpha1.PhaseComplete).stage(2).revisions("r2", "r2").started(at(3 * time.Minute)).progress(at(3 * time.Minute)).updated(8).why(v1alpha1.ReasonNewRevisionAvailable).obj(),
			[]string{"Baking/StageBaking", "Complete/NewRevisionAvailable"}},
		{"paused", state(v1alpha1.PhaseProgressing).obj(), pause, with(healthy(at(time.Minute), false, 0), func(o *Observation) { o.Paused = true }),
			state(v1alpha1.PhasePaused).resume(v1alpha1.PhaseProgressing).why(v1alpha1.ReasonPausedByUser).obj(),
			[]string{"Paused/PausedByUser"}},
		{"paused: no deadline", state(v1alpha1.PhasePaused).resume(v1alpha1.PhaseProgressing).obj(), pause,
			with(healthy(at(time.Hour), false, 0), func(o *Observation) { o.Paused = true }),
			state(v1alpha1.PhasePaused).resume(v1alpha1.PhaseProgressing).obj(), nil},
		{"resumed: the deadline starts again", state(v1alpha1.PhasePaused).resume(v1alpha1.PhaseBaking).bake(at(time.Minute)).obj(), pause, healthy(at(time.Hour), true, 1),
			state(v1alpha1.PhaseAwaitingPromotion).bake(at(time.Minute)).progress(at(time.Hour)).why(v1alpha1.ReasonAwaitingPromotion).obj(),
			[]string{"Baking/RevisionUpdating", "AwaitingPromotion/AwaitingPromotion"}},
		{"stopped on a failure, promoted: goes on", state(v1alpha1.PhaseFailed).obj(), pause,
			with(healthy(at(time.Hour), false, 0), func(o *Observation) { o.Promote = "canary" }),
			state(v1alpha1.PhaseProgressing).stage(1).started(at(time.Hour)).progress(at(time.Hour)).why(v1alpha1.ReasonRevisionUpdating).obj(),
			[]string{"Progressing/RevisionUpdating"}},
		{"rollback settled: rolled back", state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").failed("r2").why(v1alpha1.ReasonAutomaticRollback).obj(), pause,
			healthy(at(time.Hour), true, 8),
			state(v1alpha1.PhaseRolledBack).revisions("r1", "r1").failed("r2").why(v1alpha1.ReasonAutomaticRollback).obj(),
			[]string{"RolledBack/AutomaticRollback"}},
		{"a rollback is not paused", state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").obj(), pause,
			with(healthy(at(time.Hour), false, 0), func(o *Observation) { o.Paused = true }),
			state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").obj(), nil},
		{"complete: nothing to do", state(v1alpha1.PhaseComplete).obj(), pause, healthy(at(time.Hour), false, 0),
			state(v1alpha1.PhaseComplete).obj(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ts := Advance(c.from, c.policy, c.obs)
			if diff := cmp.Diff(c.want, got, ignoreText); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.reasons, reasons(ts)); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStart(t *testing.T) {
	cases := []struct {
		name    string
		from    State
		rev     string
		want    State
		reasons []string
	}{
		{"first template: stable at once", State{}, "r1",
			State{Phase: v1alpha1.PhaseComplete, UpdateRevision: "r1", StableRevision: "r1", LastProgress: t0, Reason: v1alpha1.ReasonNewRevisionAvailable},
			[]string{"Complete/NewRevisionAvailable"}},
		{"new template: a rollout from the first stage", state(v1alpha1.PhaseComplete).revisions("r1", "r1").stage(1).obj(), "r2",
			state(v1alpha1.PhaseProgressing).why(v1alpha1.ReasonNewRevisionCreated).obj(), []string{"Progressing/NewRevisionCreated"}},
		{"another template mid-rollout: restarts from the stable revision", state(v1alpha1.PhaseBaking).stage(1).bake(t0).obj(), "r3",
			state(v1alpha1.PhaseProgressing).revisions("r3", "r1").why(v1alpha1.ReasonNewRevisionCreated).obj(), []string{"Progressing/NewRevisionCreated"}},
		{"same template: nothing", state(v1alpha1.PhaseBaking).obj(), "r2", state(v1alpha1.PhaseBaking).obj(), nil},
		{"back to the stable template mid-rollout: every member back at once", state(v1alpha1.PhaseProgressing).obj(), "r1",
			state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").why(v1alpha1.ReasonTemplateReverted).obj(), []string{"RollingBack/TemplateReverted"}},
		{"the failed template after a rollback: does not start again",
			state(v1alpha1.PhaseRolledBack).revisions("r1", "r1").failed("r2").obj(), "r2",
			state(v1alpha1.PhaseRolledBack).revisions("r1", "r1").failed("r2").obj(), nil},
		{"the failed template while rolling back: the rollback goes on",
			state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").failed("r2").obj(), "r2",
			state(v1alpha1.PhaseRollingBack).revisions("r1", "r1").failed("r2").obj(), nil},
		{"template set to the revision rolled back to: complete",
			state(v1alpha1.PhaseRolledBack).revisions("r1", "r1").failed("r2").obj(), "r1",
			state(v1alpha1.PhaseComplete).revisions("r1", "r1").why(v1alpha1.ReasonNewRevisionAvailable).obj(), []string{"Complete/NewRevisionAvailable"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ts := Start(c.from, c.rev, t0)
			if diff := cmp.Diff(c.want, got, ignoreText); diff != "" {
				t.Errorf("state (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(c.reasons, reasons(ts)); diff != "" {
				t.Errorf("transitions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestConditionsAndDeadlines(t *testing.T) {
	p := testPolicy(v1alpha1.FailurePause)
	short := func(cs []metav1.Condition) map[string]string {
		out := map[string]string{}
		for _, c := range cs {
			out[c.Type] = string(c.Status) + "/" + c.Reason
		}
		return out
	}
	for _, c := range []struct {
		name string
		s    State
		want map[string]string
	}{
		{"updating", state(v1alpha1.PhaseProgressing).why(v1alpha1.ReasonRevisionUpdating).obj(),
			map[string]string{"Progressing": "True/RevisionUpdating", "RolloutPaused": "False/NotPaused", "RolledBack": "False/NotRolledBack"}},
		{"awaiting promotion", state(v1alpha1.PhaseAwaitingPromotion).why(v1alpha1.ReasonAwaitingPromotion).obj(),
			map[string]string{"Progressing": "True/AwaitingPromotion", "RolloutPaused": "True/AwaitingPromotion", "RolledBack": "False/NotRolledBack"}},
		{"failed", state(v1alpha1.PhaseFailed).why(v1alpha1.ReasonProgressDeadlineExceeded).obj(),
			map[string]string{"Progressing": "False/ProgressDeadlineExceeded", "RolloutPaused": "True/PausedOnFailure", "RolledBack": "False/NotRolledBack"}},
		{"rolling back", state(v1alpha1.PhaseRollingBack).why(v1alpha1.ReasonAutomaticRollback).obj(),
			map[string]string{"Progressing": "True/AutomaticRollback", "RolloutPaused": "False/NotPaused", "RolledBack": "False/AutomaticRollback"}},
		{"rolled back", state(v1alpha1.PhaseRolledBack).why(v1alpha1.ReasonAutomaticRollback).obj(),
			map[string]string{"Progressing": "True/AutomaticRollback", "RolloutPaused": "False/NotPaused", "RolledBack": "True/AutomaticRollback"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, short(c.s.Conditions(3, t0))); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
	progressing := state(v1alpha1.PhaseProgressing).progress(at(time.Minute)).obj()
	baking := state(v1alpha1.PhaseBaking).bake(at(2 * time.Minute)).obj()
	awaiting := state(v1alpha1.PhaseAwaitingPromotion).obj()
	for name, c := range map[string]struct {
		s    State
		want time.Time
	}{
		"progress deadline": {progressing, at(11 * time.Minute)},
		"bake end":          {baking, at(7 * time.Minute)},
		"none":              {awaiting, time.Time{}},
	} {
		if got := c.s.NextDeadline(p); !got.Equal(c.want) {
			t.Errorf("%s: next deadline %v, want %v", name, got, c.want)
		}
	}
}
