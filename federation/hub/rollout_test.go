package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/history"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/fedref"
)

// memRollouts keeps records as JSON, as raft does, so a test sees what a
// new leader would decode.
type memRollouts struct {
	mu   sync.Mutex
	recs map[string][]byte
}

func (m *memRollouts) Rollout(frs fedref.FRS) (*rollout.Record, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.recs[frs.String()]
	if !ok {
		return nil, false
	}
	rec := &rollout.Record{}
	if err := json.Unmarshal(b, rec); err != nil {
		return nil, false
	}
	return rec, true
}

func (m *memRollouts) SetRollout(_ context.Context, frs fedref.FRS, rec *rollout.Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs == nil {
		m.recs = map[string][]byte{}
	}
	m.recs[frs.String()] = b
	return nil
}

func (m *memRollouts) DeleteRollout(_ context.Context, frs fedref.FRS) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.recs, frs.String())
	return nil
}

// rolloutEnv is a hub reconciler over members a, b and c with a rolling
// web of 6 replicas, and members that do at once what their targets say.
type rolloutEnv struct {
	*env
	t        *testing.T
	clk      *clocktesting.FakeClock
	rollouts *memRollouts
	events   *events.FakeRecorder
	// ready is false for a revision whose pods never turn Available.
	ready map[string]bool
	// crash is true for a revision whose pods crash-loop (still Ready
	// between crashes, so readiness alone would pass them).
	crash map[string]bool
}

func newRolloutEnv(t *testing.T, strategy *v1alpha1.UpdateStrategy) *rolloutEnv {
	obj := frs(6, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.UpdateStrategy = strategy
		f.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
	})
	e := &rolloutEnv{env: newEnv(t, true, obj, healthy("a", "b", "c"), nil, nil), t: t,
		clk: clocktesting.NewFakeClock(now), rollouts: &memRollouts{}, events: events.NewFakeRecorder(100), ready: map[string]bool{}, crash: map[string]bool{}}
	e.r.Clock, e.r.Rollouts, e.r.Recorder = e.clk, e.rollouts, e.events
	return e
}

// pass runs one reconcile, then lets every member run its targets: pods of
// a ready revision are Available, others exist but never are.
func (e *rolloutEnv) pass() {
	e.t.Helper()
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		e.t.Fatal(err)
	}
	rec, ok := e.rollouts.Rollout(fedref.FRS{Namespace: "default", Name: "web"})
	if !ok {
		e.t.Fatal("no rollout record after a pass")
	}
	for member := range rec.Targets {
		for _, l := range rec.Revisions {
			n := rec.Target(member, l.Name)
			avail := n
			if ready, set := e.ready[l.Name]; set && !ready {
				avail = 0
			}
			st := engine.MemberStatus{Target: n, Replicas: n, ReadyReplicas: avail, AvailableReplicas: avail, ReportedAt: e.clk.Now(),
				Hub: v1alpha1.HubReference{Namespace: "default", Name: "web", UID: "uid-1"}}
			if e.crash[l.Name] {
				st.Restarts, st.CrashLoopingReplicas = 3*n, n
			}
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: member, Namespace: "default", Name: l.Object}, st)
		}
	}
	e.clk.Step(10 * time.Second)
}

func (e *rolloutEnv) record() *rollout.Record {
	rec, _ := e.rollouts.Rollout(fedref.FRS{Namespace: "default", Name: "web"})
	return rec
}

func (e *rolloutEnv) setImage(image string) string {
	e.t.Helper()
	f := get(e.t, e.hub)
	f.Spec.Template.Spec.Containers[0].Image = image
	if err := e.hub.Update(context.Background(), f); err != nil {
		e.t.Fatal(err)
	}
	h, err := rollout.TemplateHash(&f.Spec.Template, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	return rollout.RevisionName("web", h)
}

func (e *rolloutEnv) reasons() []string {
	var out []string
	for _, ev := range drain(e.events.Events) {
		for _, r := range []string{v1alpha1.ReasonNewRevisionCreated, v1alpha1.ReasonStageBaking, v1alpha1.ReasonAwaitingPromotion,
			v1alpha1.ReasonRevisionUpdating, v1alpha1.ReasonNewRevisionAvailable, v1alpha1.ReasonAutomaticRollback, "RevisionRetired"} {
			if strings.Contains(ev, " "+r+" ") {
				out = append(out, r)
			}
		}
	}
	return out
}

// An object switched to Rolling adopts what runs; a new template then goes
// to one canary pod in c, waits for the promotion naming the stage, goes to
// every member, and the old revision's objects are deleted once empty.
func TestRollingCanaryPromotionCompletes(t *testing.T) {
	e := newRolloutEnv(t, &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, Stages: []v1alpha1.RolloutStage{
		{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1)), Promotion: v1alpha1.PromotionManual}}})
	if err := e.hub.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2, "b": 2, "c": 2})
	for _, m := range []string{"a", "b", "c"} {
		report(e.env, m, 2)
	}
	e.pass()
	rec := e.record()
	if len(rec.Revisions) != 1 || rec.Revisions[0].Object != "web" || rec.Revisions[0].Labelled {
		t.Fatalf("first revision = %+v, want the adopted object web, unlabelled", rec.Revisions)
	}
	v1 := rec.Revisions[0].Name
	v2 := e.setImage("registry.example/web:2")
	e.pass()
	if diff := cmp.Diff(map[string]int32{"a": 0, "b": 0, "c": 1}, e.updateTargets(v2)); diff != "" {
		t.Fatalf("canary targets of %s (-want +got):\n%s", v2, diff)
	}
	w := &Workloads{Hub: e.hub, Targets: e.targets, Rollouts: e.rollouts}
	wl, ok := w.Workload(fedref.MemberObject{Cluster: "c", Namespace: "default", Name: v2})
	if !ok || wl.Target != 1 || wl.TemplateHash == "" || wl.Template.Labels[v1alpha1.LabelTemplateHash] != wl.TemplateHash ||
		wl.Selector.MatchLabels[v1alpha1.LabelTemplateHash] != wl.TemplateHash {
		t.Fatalf("workload of %s in c = %+v, %v; want target 1, labelled with its hash", v2, wl, ok)
	}
	for range 4 {
		e.pass()
	}
	st := get(t, e.hub).Status
	if st.Rollout == nil || st.Rollout.Phase != v1alpha1.PhaseAwaitingPromotion || st.UpdateRevision != v2 || st.CurrentRevision != v1 {
		t.Fatalf("status before the promotion: rollout %+v, update %q current %q", st.Rollout, st.UpdateRevision, st.CurrentRevision)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRolloutPaused); c == nil || c.Reason != v1alpha1.ReasonAwaitingPromotion {
		t.Fatalf("RolloutPaused = %+v, want reason AwaitingPromotion", c)
	}
	f := get(t, e.hub)
	f.Annotations = map[string]string{v1alpha1.AnnotationPromote: "canary"}
	if err := e.hub.Update(context.Background(), f); err != nil {
		t.Fatal(err)
	}
	for range 12 {
		e.pass()
	}
	st = get(t, e.hub).Status
	if st.Rollout == nil || st.Rollout.Phase != v1alpha1.PhaseComplete || st.CurrentRevision != v2 || st.UpdatedReplicas != 6 {
		t.Fatalf("status after the promotion: rollout %+v, current %q, updated %d", st.Rollout, st.CurrentRevision, st.UpdatedReplicas)
	}
	if rec := e.record(); len(rec.Revisions) != 1 || rec.Revisions[0].Name != v2 {
		t.Fatalf("live revisions after completion = %+v, want only %s", rec.Revisions, v2)
	}
	got := e.reasons()
	for _, want := range []string{v1alpha1.ReasonNewRevisionCreated, v1alpha1.ReasonStageBaking, v1alpha1.ReasonAwaitingPromotion, v1alpha1.ReasonNewRevisionAvailable} {
		if !strings.Contains(strings.Join(got, ","), want) {
			t.Errorf("events %v lack %s", got, want)
		}
	}

	// The next rollout is not promoted by the annotation left from this one.
	e.setImage("registry.example/web:3")
	for range 4 {
		e.pass()
	}
	f = get(t, e.hub)
	if _, left := f.Annotations[v1alpha1.AnnotationPromote]; left || f.Status.Rollout.Phase != v1alpha1.PhaseAwaitingPromotion {
		t.Fatalf("next rollout: annotation left %v, phase %s; want the annotation cleared and the canary awaiting its promotion", left, f.Status.Rollout.Phase)
	}
}

// A template whose pods never turn Available fails its stage at the
// progress deadline and, with onFailure Rollback, every member returns to
// the stable revision by itself.
func TestRollingBadTemplateRollsBack(t *testing.T) {
	e := newRolloutEnv(t, &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, OnFailure: v1alpha1.FailureRollback,
		ProgressDeadlineSeconds: ptr.To[int32](60),
		Stages:                  []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1))}}})
	e.pass() // a new object: its first revision is named after the revision
	v1 := e.record().Revisions[0].Name
	e.pass()
	v2 := e.setImage("registry.example/web:broken")
	e.ready[v2] = false
	for range 10 {
		e.pass()
	}
	st := get(t, e.hub).Status
	if st.Rollout == nil || st.Rollout.Phase != v1alpha1.PhaseRolledBack || st.Rollout.FailedRevision != v2 || st.CurrentRevision != v1 {
		t.Fatalf("status after the deadline: rollout %+v, current %q", st.Rollout, st.CurrentRevision)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionRolledBack); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("RolledBack = %+v, want True", c)
	}
	if diff := cmp.Diff(map[string]int32{"a": 2, "b": 2, "c": 2}, e.revisionTargets(v1)); diff != "" {
		t.Errorf("targets of the stable revision (-want +got):\n%s", diff)
	}
	if got := e.reasons(); !strings.Contains(strings.Join(got, ","), v1alpha1.ReasonAutomaticRollback) {
		t.Errorf("events %v lack %s", got, v1alpha1.ReasonAutomaticRollback)
	}
}

func (e *rolloutEnv) updateTargets(rev string) map[string]int32 { return e.revisionTargets(rev) }

func (e *rolloutEnv) revisionTargets(rev string) map[string]int32 {
	rec := e.record()
	out := map[string]int32{}
	for m := range rec.Targets {
		out[m] = rec.Target(m, rev)
	}
	return out
}

// Workloads answers for a rolling object's revision objects, and only for
// live ones; the object of a key's own name always wins.
func TestWorkloadsRevisionObjects(t *testing.T) {
	e := newRolloutEnv(t, &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling})
	ctx := context.Background()
	if err := e.hub.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		t.Fatal(err)
	}
	plain := frs(1, func(f *v1alpha1.FederatedReplicaSet) { f.Name, f.UID = "web-plain", "uid-2" })
	if err := e.hub.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	_ = e.targets.SetTargets(ctx, fedref.FRS{Namespace: "default", Name: "web-plain"}, 3, map[string]int32{"a": 1})
	e.pass() // a new object: its revision's objects are named after it
	rev := e.record().Revisions[0]
	w := &Workloads{Hub: e.hub, Targets: e.targets, Rollouts: e.rollouts}
	for _, tc := range []struct {
		name       string
		key        string
		wantOK     bool
		wantHub    string
		wantTarget int32
	}{
		{"the revision's object", rev.Object, true, "web", 2},
		{"the object's own name is no live revision: hands off", "web", false, "", 0},
		{"an unknown hash: hands off", "web-zzzzzz", false, "", 0},
		{"a plain object whose name looks like a revision's", "web-plain", true, "web-plain", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wl, ok := w.Workload(fedref.MemberObject{Cluster: "a", Namespace: "default", Name: tc.key})
			if ok != tc.wantOK {
				t.Fatalf("Workload(%s) ok = %v, want %v", tc.key, ok, tc.wantOK)
			}
			if ok && (wl.Hub.Name != tc.wantHub || wl.Target != tc.wantTarget) {
				t.Errorf("Workload(%s) = hub %s target %d, want hub %s target %d", tc.key, wl.Hub.Name, wl.Target, tc.wantHub, tc.wantTarget)
			}
		})
	}
	keys, err := w.WorkloadKeys(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.Name)
	}
	if diff := cmp.Diff([]string{rev.Object, "web-plain"}, names); diff != "" {
		t.Errorf("workload keys of a (-want +got):\n%s", diff)
	}
	for _, tc := range []struct {
		name    string
		ref     fedref.FRS
		cluster string
		want    []string
	}{
		{"a rolling object: its revisions' objects", fedref.FRS{Namespace: "default", Name: "web"}, "a", []string{rev.Object}},
		{"a plain object: its own name", fedref.FRS{Namespace: "default", Name: "web-plain", UID: "uid-2"}, "a", []string{"web-plain"}},
		{"another object of that name: none", fedref.FRS{Namespace: "default", Name: "web-plain", UID: "uid-old"}, "a", nil},
		{"no target in the member: none", fedref.FRS{Namespace: "default", Name: "web-plain"}, "b", nil},
		{"not in the hub: none", fedref.FRS{Namespace: "default", Name: "gone"}, "a", nil},
	} {
		var got []string
		for _, k := range w.KeysOf(ctx, tc.ref, tc.cluster) {
			if k.Cluster != tc.cluster || k.Namespace != "default" {
				t.Errorf("%s: key %v is not in %s/default", tc.name, k, tc.cluster)
			}
			got = append(got, k.Name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("KeysOf, %s (-want +got):\n%s", tc.name, diff)
		}
	}
}

// historyOf lists the ControllerRevisions the hub kept, as number:image.
func (e *rolloutEnv) historyOf() []string {
	e.t.Helper()
	f := get(e.t, e.hub)
	revs, err := history.List(context.Background(), e.hub, f)
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range revs {
		out = append(out, fmt.Sprintf("%d:%s", r.Number, r.Template.Spec.Containers[0].Image))
	}
	return out
}

// The hub keeps one ControllerRevision per revision, prunes those no longer
// live beyond revisionHistoryLimit, and renumbers a template that comes
// back (an undo) instead of recording it twice.
func TestRollingHistory(t *testing.T) {
	e := newRolloutEnv(t, &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, RevisionHistoryLimit: ptr.To[int32](1)})
	e.r.History = e.hub
	e.pass()
	first := get(t, e.hub).Spec.Template.Spec.Containers[0].Image
	e.passUntilComplete(e.setImage("registry.example/web:2"))
	want := []string{"1:" + first, "2:registry.example/web:2"}
	if diff := cmp.Diff(want, e.historyOf()); diff != "" {
		t.Fatalf("history after the first rollout (-want +got):\n%s", diff)
	}
	e.passUntilComplete(e.setImage("registry.example/web:3"))
	// Limit 1: revision 1, retired, leaves; 2 (retired) stays as the one
	// kept; 3 is live.
	want = []string{"2:registry.example/web:2", "3:registry.example/web:3"}
	if diff := cmp.Diff(want, e.historyOf()); diff != "" {
		t.Fatalf("history after the second rollout (-want +got):\n%s", diff)
	}
	// What `kubectl replicafed undo` does: the template of revision 2 again.
	e.passUntilComplete(e.setImage("registry.example/web:2"))
	want = []string{"3:registry.example/web:3", "4:registry.example/web:2"}
	if diff := cmp.Diff(want, e.historyOf()); diff != "" {
		t.Fatalf("history after the undo (-want +got):\n%s", diff)
	}
}

// passUntilComplete runs passes until the rollout completes; one surge pod
// at a time over 6 replicas takes about 13.
func (e *rolloutEnv) passUntilComplete(rev string) {
	e.t.Helper()
	for range 40 {
		e.pass()
		if st := get(e.t, e.hub).Status; st.Rollout != nil && st.Rollout.Phase == v1alpha1.PhaseComplete && st.CurrentRevision == rev {
			return
		}
	}
	e.t.Fatalf("rollout not Complete after 40 passes: %+v", get(e.t, e.hub).Status.Rollout)
}

// A canary whose pods crash-loop but are Ready between crashes passes the
// readiness part of the gate; the restarts part fails the stage before it
// bakes, and onFailure Rollback returns every member to the stable
// revision.
func TestRollingCrashLoopFailsGate(t *testing.T) {
	e := newRolloutEnv(t, &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, OnFailure: v1alpha1.FailureRollback,
		Stages: []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{"c"}, Canary: ptr.To(intstr.FromInt32(1)),
			BakeTime: v1alpha1.DurationOf(10 * time.Minute)}}})
	e.pass()
	v1 := e.record().Revisions[0].Name
	e.pass()
	v2 := e.setImage("registry.example/web:crashy")
	e.crash[v2] = true
	for range 6 {
		e.pass()
	}
	st := get(t, e.hub).Status
	if st.Rollout == nil || st.Rollout.FailedRevision != v2 || st.CurrentRevision != v1 {
		t.Fatalf("status after crash loops: rollout %+v, current %q; want %s failed and %s current", st.Rollout, st.CurrentRevision, v2, v1)
	}
	evs := strings.Join(drain(e.events.Events), "\n")
	if !strings.Contains(evs, "Warning "+v1alpha1.ReasonAutomaticRollback+" stage canary: Progressing -> RollingBack: health gate failed: 1 of 1 new pods are in CrashLoopBackOff") {
		t.Errorf("events lack a Warning %s from the canary saying the gate failed and why:\n%s", v1alpha1.ReasonAutomaticRollback, evs)
	}
	if diff := cmp.Diff(map[string]int32{"a": 0, "b": 0, "c": 0}, e.revisionTargets(v2)); diff != "" {
		t.Errorf("targets of the crash-looping revision after the rollback (-want +got):\n%s", diff)
	}
}
