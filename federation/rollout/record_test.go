package rollout

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func tmpl(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: image}}},
	}
}

func revName(t *testing.T, image string) string {
	t.Helper()
	h, err := TemplateHash(tmpl(image), 0)
	if err != nil {
		t.Fatal(err)
	}
	return RevisionName("web", h)
}

// passFleet is three members of target 2 each running counts per object.
func passFleet(pods map[string]map[string]Counts) []PassMember {
	var out []PassMember
	for _, n := range []string{"a", "b", "c"} {
		out = append(out, PassMember{Name: n, Target: 2, Reachable: true, Pods: pods[n]})
	}
	return out
}

// A summary of a pass's result for table comparisons.
type passSummary struct {
	Phase         v1alpha1.RolloutPhase
	Stage         string
	Update        string
	Stable        string
	Failed        string
	Objects       map[string]string // revision -> object
	Labelled      map[string]bool
	Targets       targets
	Retired       []string
	TransitionsTo []v1alpha1.RolloutPhase
}

func summarize(r PassResult) passSummary {
	s := passSummary{Phase: r.Record.State.Phase, Stage: r.Record.State.StageName(r.Stages),
		Update: r.Record.State.UpdateRevision, Stable: r.Record.State.StableRevision, Failed: r.Record.State.FailedRevision,
		Objects: map[string]string{}, Labelled: map[string]bool{}, Targets: targetsOf(r.Step)}
	for _, l := range r.Record.Revisions {
		s.Objects[l.Name], s.Labelled[l.Name] = l.Object, l.Labelled
	}
	for _, l := range r.Retired {
		s.Retired = append(s.Retired, l.Name)
	}
	for _, t := range r.Transitions {
		s.TransitionsTo = append(s.TransitionsTo, t.To)
	}
	return s
}

func TestPass(t *testing.T) {
	v1, v2 := revName(t, "web:1"), revName(t, "web:2")
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	canary := &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, OnFailure: v1alpha1.FailureRollback, ProgressDeadlineSeconds: ptr.To[int32](60),
		Stages: []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1)), Promotion: v1alpha1.PromotionManual}}}
	stableV1 := Record{
		State:      State{Phase: v1alpha1.PhaseComplete, UpdateRevision: v1, StableRevision: v1, LastProgress: t0},
		LastNumber: 1,
		Revisions:  []LiveRevision{{Name: v1, Number: 1, Object: "web", Template: *tmpl("web:1")}},
		Targets:    map[string][]RevisionTarget{"a": {{v1, 2}}, "b": {{v1, 2}}, "c": {{v1, 2}}},
	}
	allV1 := map[string]map[string]Counts{"a": {"web": {2, 2, 2, 0}}, "b": {"web": {2, 2, 2, 0}}, "c": {"web": {2, 2, 2, 0}}}
	rolling := stableV1
	rolling.State = State{Phase: v1alpha1.PhaseProgressing, UpdateRevision: v2, StableRevision: v1, StageStart: t0, LastProgress: t0}
	rolling.LastNumber = 2
	rolling.Revisions = append(rolling.Revisions[:1:1], LiveRevision{Name: v2, Number: 2, Object: v2, Labelled: true, Template: *tmpl("web:2")})
	rolling.Targets = map[string][]RevisionTarget{"a": {{v1, 2}}, "b": {{v1, 2}}, "c": {{v1, 2}, {v2, 1}}}
	canaryPending := map[string]map[string]Counts{"a": {"web": {2, 2, 2, 0}}, "b": {"web": {2, 2, 2, 0}}, "c": {"web": {2, 2, 2, 0}, v2: {1, 0, 0, 0}}}
	done := stableV1
	done.State = State{Phase: v1alpha1.PhaseComplete, UpdateRevision: v2, StableRevision: v2, LastProgress: t0}
	done.Revisions = rolling.Revisions
	done.Targets = map[string][]RevisionTarget{"a": {{v1, 0}, {v2, 2}}, "b": {{v1, 0}, {v2, 2}}, "c": {{v1, 0}, {v2, 2}}}
	allV2 := map[string]map[string]Counts{"a": {v2: {2, 2, 2, 0}}, "b": {v2: {2, 2, 2, 0}}, "c": {v2: {2, 2, 2, 0}}}

	for _, tc := range []struct {
		name  string
		rec   Record
		image string
		adopt bool
		pods  map[string]map[string]Counts
		now   time.Time
		want  passSummary
	}{{
		name: "a new object's first template is stable at once, named after the revision", image: "web:1", now: t0,
		want: passSummary{Phase: v1alpha1.PhaseComplete, Stage: "", Update: v1, Stable: v1,
			Objects: map[string]string{v1: v1}, Labelled: map[string]bool{v1: true},
			Targets: targets{"a": {v1: 2}, "b": {v1: 2}, "c": {v1: 2}}, TransitionsTo: []v1alpha1.RolloutPhase{v1alpha1.PhaseComplete}},
	}, {
		name: "an existing object switched to Rolling adopts its MemberReplicaSet, unlabelled", image: "web:1", adopt: true, pods: allV1, now: t0,
		want: passSummary{Phase: v1alpha1.PhaseComplete, Update: v1, Stable: v1,
			Objects: map[string]string{v1: "web"}, Labelled: map[string]bool{v1: false},
			Targets: targets{"a": {v1: 2}, "b": {v1: 2}, "c": {v1: 2}}, TransitionsTo: []v1alpha1.RolloutPhase{v1alpha1.PhaseComplete}},
	}, {
		name: "a new template starts the canary: one surge pod in c only", rec: stableV1, image: "web:2", pods: allV1, now: t0,
		want: passSummary{Phase: v1alpha1.PhaseProgressing, Stage: "canary", Update: v2, Stable: v1,
			Objects: map[string]string{v1: "web", v2: v2}, Labelled: map[string]bool{v1: false, v2: true},
			Targets: targets{"a": {v1: 2, v2: 0}, "b": {v1: 2, v2: 0}, "c": {v1: 2, v2: 1}}, TransitionsTo: []v1alpha1.RolloutPhase{v1alpha1.PhaseProgressing}},
	}, {
		name: "a canary that never turns Available rolls back at the deadline", rec: rolling, image: "web:2", pods: canaryPending, now: t0.Add(61 * time.Second),
		want: passSummary{Phase: v1alpha1.PhaseRollingBack, Update: v1, Stable: v1, Failed: v2,
			Objects: map[string]string{v1: "web", v2: v2}, Labelled: map[string]bool{v1: false, v2: true},
			Targets: targets{"a": {v1: 2}, "b": {v1: 2}, "c": {v1: 2, v2: 0}}, TransitionsTo: []v1alpha1.RolloutPhase{v1alpha1.PhaseRollingBack}},
	}, {
		name: "the old revision leaves the record once no member runs it", rec: done, image: "web:2", pods: allV2, now: t0,
		want: passSummary{Phase: v1alpha1.PhaseComplete, Update: v2, Stable: v2,
			Objects: map[string]string{v2: v2}, Labelled: map[string]bool{v2: true},
			Targets: targets{"a": {v2: 2}, "b": {v2: 2}, "c": {v2: 2}}, Retired: []string{v1}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := Pass(tc.rec, PassInput{Name: "web", Template: tmpl(tc.image), Strategy: canary, Replicas: 6, MaxSurge: 1,
				Adopt: tc.adopt, Members: passFleet(tc.pods), Now: tc.now, Health: HealthPassed})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summarize(res)); diff != "" {
				t.Errorf("pass (-want +got):\n%s", diff)
			}
		})
	}
}

// A Manual canary waits for the annotation naming it, then the implicit
// last stage takes every member.
func TestPassPromotion(t *testing.T) {
	v1, v2 := revName(t, "web:1"), revName(t, "web:2")
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	strategy := &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling,
		Stages: []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1)), Promotion: v1alpha1.PromotionManual}}}
	rec := Record{
		State:      State{Phase: v1alpha1.PhaseProgressing, UpdateRevision: v2, StableRevision: v1, StageStart: t0, LastProgress: t0},
		LastNumber: 2,
		Revisions:  []LiveRevision{{Name: v1, Number: 1, Object: "web", Template: *tmpl("web:1")}, {Name: v2, Number: 2, Object: v2, Labelled: true, Template: *tmpl("web:2")}},
		Targets:    map[string][]RevisionTarget{"a": {{v1, 2}}, "b": {{v1, 2}}, "c": {{v1, 1}, {v2, 1}}},
	}
	pods := map[string]map[string]Counts{"a": {"web": {2, 2, 2, 0}}, "b": {"web": {2, 2, 2, 0}}, "c": {"web": {1, 1, 1, 0}, v2: {1, 1, 1, 0}}}
	in := PassInput{Name: "web", Template: tmpl("web:2"), Strategy: strategy, Replicas: 6, MaxSurge: 1, Members: passFleet(pods), Now: t0.Add(time.Minute), Health: HealthPassed}
	res, err := Pass(rec, in)
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Record.State.Phase; got != v1alpha1.PhaseAwaitingPromotion {
		t.Fatalf("phase after the canary is Available = %s, want AwaitingPromotion", got)
	}
	in.Promote = "canary"
	res, err = Pass(res.Record, in)
	if err != nil {
		t.Fatal(err)
	}
	want := targets{"a": {v1: 2, v2: 1}, "b": {v1: 2, v2: 0}, "c": {v1: 1, v2: 1}}
	if diff := cmp.Diff(want, targetsOf(res.Step)); diff != "" || res.Record.State.StageName(res.Stages) != FinalStageName {
		t.Errorf("after the promotion: stage %q, targets (-want +got):\n%s", res.Record.State.StageName(res.Stages), diff)
	}
}
