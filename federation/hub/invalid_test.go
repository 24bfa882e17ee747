package hub

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
)

// countingTargets records every commit, so a test can tell "no raft write".
type countingTargets struct {
	*memTargets
	sets int
}

func (c *countingTargets) SetTargets(ctx context.Context, frs fedref.FRS, gen int64, t map[string]int32) error {
	c.sets++
	return c.memTargets.SetTargets(ctx, frs, gen, t)
}

func warningsWith(evs []string, reason string) []string {
	var out []string
	for _, e := range evs {
		if strings.HasPrefix(e, "Warning "+reason+" ") {
			out = append(out, e)
		}
	}
	return out
}

// Issue 24, item 2: a running FederatedReplicaSet patched with an
// uninterpretable spec keeps its members' targets (no raft write, nothing
// deleted), says Invalid with the field, warns once, and is planned again
// once the spec is fixed.
func TestInvalidSpecKeepsTargets(t *testing.T) {
	lower := func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: "in", Values: []string{"eu"}}}}
	}
	for _, tc := range []struct {
		name   string
		mod    func(*v1alpha1.FederatedReplicaSet)
		reason string
		field  string
	}{
		{"lowercase selector operator", lower, planner.ReasonInvalidClusterSelector, "spec.placement.clusterSelector.matchExpressions[0].operator"},
		{"negative replicas", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.Replicas = ptr.To[int32](-3) }, planner.ReasonInvalidReplicas, "spec.replicas"},
		{"lowercase toleration operator", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "maintenance", Operator: "exists"}}
		}, planner.ReasonInvalidToleration, "spec.placement.tolerations[0].operator"},
		{"template outside the selector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Template.Labels = map[string]string{"app": "other"}
		}, ReasonSelectorMismatch, "spec.template.metadata.labels"},
		{"duration with a unit Go lacks (issue 24: 3d)", func(f *v1alpha1.FederatedReplicaSet) {
			d := v1alpha1.Duration("3d")
			f.Spec.Failover.UnreachableGracePeriod = &d
		}, planner.ReasonInvalidDuration, "spec.failover.unreachableGracePeriod"},
		{"a bound only the schema states", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MinReadySeconds = 1 << 30
		}, ReasonInvalidSpec, "spec.minReadySeconds"},
		{"name too long for a label value", func(f *v1alpha1.FederatedReplicaSet) {
			f.Name = strings.Repeat("n", 69)
		}, ReasonNameTooLong, "metadata.name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := frs(4)
			tc.mod(obj)
			key := fedref.FRS{Namespace: "default", Name: obj.Name}
			e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
			ct := &countingTargets{memTargets: e.targets}
			e.r.Targets = ct
			rec := events.NewFakeRecorder(20)
			e.r.Recorder = rec
			e.r.Registered = registrations(registry.Registration{Name: "a", Labels: map[string]string{"region": "eu"}},
				registry.Registration{Name: "b", Labels: map[string]string{"region": "eu"}})
			_ = e.targets.SetTargets(context.Background(), key, 2, map[string]int32{"a": 2, "b": 2})
			for _, m := range []string{"a", "b"} {
				e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: obj.Name},
					memberStatus(2))
			}
			r := req()
			r.Name = obj.Name
			for range 2 {
				if _, err := e.r.Reconcile(context.Background(), r); err != nil {
					t.Fatal(err)
				}
			}
			if ct.sets != 0 {
				t.Fatalf("an invalid spec was committed %d times", ct.sets)
			}
			if tg, _, _ := e.targets.Targets(key); !cmp.Equal(tg, map[string]int32{"a": 2, "b": 2}) {
				t.Fatalf("targets = %v, want a=2 b=2 kept", tg)
			}
			got := &v1alpha1.FederatedReplicaSet{}
			if err := e.hub.Get(context.Background(), r.NamespacedName, got); err != nil {
				t.Fatal(err)
			}
			c := meta.FindStatusCondition(got.Status.Conditions, ConditionInvalid)
			if c == nil || c.Status != metav1.ConditionTrue || c.Reason != tc.reason || !strings.Contains(c.Message, tc.field) {
				t.Fatalf("Invalid condition = %+v, want True, reason %s, naming %s", c, tc.reason, tc.field)
			}
			if p := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionPlanned); p == nil || p.Status != metav1.ConditionFalse {
				t.Fatalf("Planned = %+v, want False", p)
			}
			if u := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionUnschedulable); u != nil {
				t.Fatalf("Unschedulable = %+v on an invalid spec", u)
			}
			if rows := got.Status.Clusters; len(rows) != 2 || rows[0].Target != 2 || rows[1].Target != 2 {
				t.Fatalf("status rows = %+v, want both members at their kept target", rows)
			}
			evs := drain(rec.Events)
			if w := warningsWith(evs, tc.reason); len(w) != 1 {
				t.Fatalf("warnings %s over two passes = %q (all events %q), want one", tc.reason, w, evs)
			}
			// The members hand it off when it concerns what they would run.
			if err := e.hub.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
				t.Fatal(err)
			}
			_, handsOff := (&Workloads{Hub: e.hub, Targets: e.targets}).Workload(fedref.MemberObject{Cluster: "a", Namespace: "default", Name: obj.Name})
			if wantOff := len(workloadProblems(got)) > 0; handsOff == wantOff {
				t.Fatalf("Workload offered = %v, want %v", handsOff, !wantOff)
			}
		})
	}
}

// memberStatus is a settled report of n replicas.
func memberStatus(n int32) engine.MemberStatus {
	return engine.MemberStatus{Target: n, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ReportedAt: now}
}

// Once fixed, the object is planned again and Invalid goes.
func TestInvalidClearsWhenFixed(t *testing.T) {
	obj := frs(6, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: "in", Values: []string{"eu"}}}}
	})
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	rec := events.NewFakeRecorder(20)
	e.r.Recorder = rec
	ref := fedref.FRS{Namespace: "default", Name: "web"}
	_ = e.targets.SetTargets(context.Background(), ref, 2, map[string]int32{"a": 2, "b": 2})
	report(e, "a", 2)
	report(e, "b", 2)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, ConditionInvalid); c == nil {
		t.Fatal("no Invalid condition")
	}
	fixed := get(t, e.hub)
	fixed.Spec.Placement.ClusterSelector.MatchExpressions[0].Operator = metav1.LabelSelectorOpIn
	fixed.Generation++
	if err := e.hub.Update(context.Background(), fixed); err != nil {
		t.Fatal(err)
	}
	// The members carry the label the fixed selector asks for.
	e.r.Registered = registrations(registry.Registration{Name: "a", Labels: map[string]string{"region": "eu"}},
		registry.Registration{Name: "b", Labels: map[string]string{"region": "eu"}})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	got := get(t, e.hub)
	if c := meta.FindStatusCondition(got.Status.Conditions, ConditionInvalid); c != nil {
		t.Fatalf("Invalid still set after the fix: %+v", c)
	}
	if tg, gen, _ := e.targets.Targets(ref); gen != fixed.Generation || tg["a"]+tg["b"] != 6 {
		t.Fatalf("targets %v generation %d after the fix, want 6 replicas for generation %d", tg, gen, fixed.Generation)
	}
}

// A valid placement that selects no member holds the targets instead of
// deleting what runs, and says so; replicas 0 still scales down.
func TestNoCandidateHoldsTargets(t *testing.T) {
	nowhere := func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "mars"}}
	}
	for _, tc := range []struct {
		name     string
		replicas int32
		want     map[string]int32
		planned  metav1.ConditionStatus
	}{
		{"replicas wanted: held", 4, map[string]int32{"a": 2, "b": 2}, metav1.ConditionFalse},
		{"replicas 0: scaled down as asked", 0, map[string]int32{"a": 0, "b": 0}, metav1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true, frs(tc.replicas, nowhere), healthy("a", "b"), nil, nil)
			rec := events.NewFakeRecorder(20)
			e.r.Recorder = rec
			ref := fedref.FRS{Namespace: "default", Name: "web"}
			_ = e.targets.SetTargets(context.Background(), ref, 2, map[string]int32{"a": 2, "b": 2})
			report(e, "a", 2)
			report(e, "b", 2)
			for range 2 {
				if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
					t.Fatal(err)
				}
			}
			afterFirstHold(t, e.r, req())
			if tg, _, _ := e.targets.Targets(ref); !cmp.Equal(tg, tc.want) {
				t.Fatalf("targets = %v, want %v", tg, tc.want)
			}
			st := get(t, e.hub).Status
			p := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPlanned)
			if p == nil || p.Status != tc.planned {
				t.Fatalf("Planned = %+v, want %s", p, tc.planned)
			}
			if tc.planned == metav1.ConditionFalse {
				if p.Reason != ReasonNoCandidateClusters {
					t.Fatalf("Planned reason = %s, want %s", p.Reason, ReasonNoCandidateClusters)
				}
				if w := warningsWith(drain(rec.Events), ReasonNoCandidateClusters); len(w) != 1 {
					t.Fatalf("NoCandidateClusters warnings over two passes = %q, want one", w)
				}
				if c := meta.FindStatusCondition(st.Conditions, ConditionInvalid); c != nil {
					t.Fatalf("a valid spec selecting nothing is reported Invalid: %+v", c)
				}
			}
		})
	}
}

// Issue 24, item 3: the plan's notes reach the Planned condition and a
// warning, emitted once per distinct set of notes.
func TestPlanNotesShown(t *testing.T) {
	minimums := func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{
			{Name: "a", MinReplicas: ptr.To[int32](3)}, {Name: "b", MinReplicas: ptr.To[int32](3)}}
	}
	e := newEnv(t, true, frs(4, minimums), healthy("a", "b"), nil, nil)
	rec := events.NewFakeRecorder(20)
	e.r.Recorder = rec
	report(e, "a", 2)
	report(e, "b", 2)
	for range 2 {
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
	}
	p := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, v1alpha1.ConditionPlanned)
	if p == nil || p.Status != metav1.ConditionTrue || !strings.Contains(p.Message, "minReplicas add up to 6") {
		t.Fatalf("Planned = %+v, want True with the minimums note", p)
	}
	if w := warningsWith(drain(rec.Events), "PlanNotes"); len(w) != 1 {
		t.Fatalf("PlanNotes warnings over two passes = %q, want one", w)
	}
	// Another note set: another warning.
	obj := get(t, e.hub)
	obj.Spec.Replicas = ptr.To[int32](5)
	obj.Generation++
	if err := e.hub.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if w := warningsWith(drain(rec.Events), "PlanNotes"); len(w) != 1 || !strings.Contains(w[0], "than the 5 replicas") {
		t.Fatalf("PlanNotes warnings after the change = %q, want one about 5 replicas", w)
	}
}

func TestBoundedJoin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		parts []string
		limit int
		want  string
	}{
		{"fits", []string{"a", "b"}, 10, "a; b"},
		{"cut after whole parts", []string{"aaaa", "bbbb", "cccc"}, 15, "aaaa; (+2 more)"},
		{"first part too long", []string{strings.Repeat("x", 40)}, 20, strings.Repeat("x", 17) + "..."},
		{"first part too long, more after it", []string{strings.Repeat("x", 40), "y"}, 20, "xxxxxx...; (+1 more)"},
		{"rune boundary", []string{"ééééééééé"}, 17, "ééééééé..."},
		{"empty", nil, 10, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := boundedJoin(tc.parts, "; ", tc.limit)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("boundedJoin (-want +got):\n%s", diff)
			}
			if len(got) > tc.limit {
				t.Fatalf("len %d above the limit %d", len(got), tc.limit)
			}
		})
	}
}

// Many problems make a bounded condition message that still names the first.
func TestInvalidConditionBounded(t *testing.T) {
	var problems []planner.Problem
	for i := range 500 {
		problems = append(problems, planner.Problem{Field: "spec.placement.tolerations[" + strings.Repeat("9", i%7) + "]", Reason: "R", Message: strings.Repeat("m", 50)})
	}
	c := invalidCondition(problems, 7)
	if len(c.Message) > maxConditionMessage || !strings.HasPrefix(c.Message, problems[0].Field) || !strings.Contains(c.Message, "more)") {
		t.Fatalf("message of %d bytes: %.80q...", len(c.Message), c.Message)
	}
	if c.Reason != "R" || c.ObservedGeneration != 7 || c.Status != metav1.ConditionTrue {
		t.Fatalf("condition = %+v", c)
	}
}

// Issue 24, item 6: what the hub keeps per object (status pacing, warnings,
// waits, reports, orphan intents, the shortfall series) goes with it, on the
// leader and on a replica that led before.
func TestDeletedObjectLeavesNothing(t *testing.T) {
	for _, leader := range []bool{true, false} {
		t.Run(map[bool]string{true: "leader", false: "former leader"}[leader], func(t *testing.T) {
			capped := func(f *v1alpha1.FederatedReplicaSet) {
				f.Name = "gone"
				f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", MaxReplicas: ptr.To[int32](1)}}
			}
			e := newEnv(t, true, frs(4, capped), healthy("a"), nil, nil)
			e.r.Recorder = events.NewFakeRecorder(20)
			e.r.Intents = &DeletionIntents{}
			r := req()
			r.Name = "gone"
			if _, err := e.r.Reconcile(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "gone"}, memberStatus(1))
			obj := &v1alpha1.FederatedReplicaSet{}
			if err := e.hub.Get(context.Background(), r.NamespacedName, obj); err != nil {
				t.Fatal(err)
			}
			orphaned := obj.DeepCopy()
			ts := metav1.NewTime(now)
			orphaned.DeletionTimestamp = &ts
			orphaned.Finalizers = []string{metav1.FinalizerOrphanDependents}
			e.r.Intents.Observe(orphaned)
			key := "default/gone"
			e.r.warned.mu.Lock()
			warned := len(e.r.warned.last[key])
			e.r.warned.mu.Unlock()
			e.r.status.mu.Lock()
			_, paced := e.r.status.last[key]
			e.r.status.mu.Unlock()
			if warned == 0 || !paced || e.r.Intents.len() != 1 {
				t.Fatalf("nothing kept to forget: warnings %d, paced %v, intents %d", warned, paced, e.r.Intents.len())
			}

			// Gone from the hub without this replica's finalizer pass (say
			// it was removed by hand).
			obj.Finalizers = nil
			if err := e.hub.Update(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			if err := e.hub.Delete(context.Background(), obj); err != nil {
				t.Fatal(err)
			}
			e.r.Gate = gate{open: leader}
			if _, err := e.r.Reconcile(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			e.r.warned.mu.Lock()
			_, warnedLeft := e.r.warned.last[key]
			e.r.warned.mu.Unlock()
			e.r.status.mu.Lock()
			_, pacedLeft := e.r.status.last[key]
			e.r.status.mu.Unlock()
			_, awaitLeft := e.r.awaiting.Load(key)
			_, reportLeft := e.r.Reports.Get(fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "gone"})
			seriesLeft := metrics.Shortfall.DeleteLabelValues("default", "gone")
			if warnedLeft || pacedLeft || awaitLeft || reportLeft || seriesLeft || e.r.Intents.len() != 0 {
				t.Fatalf("left behind: warnings %v, pacing %v, wait %v, report %v, shortfall series %v, intents %d",
					warnedLeft, pacedLeft, awaitLeft, reportLeft, seriesLeft, e.r.Intents.len())
			}
		})
	}
}

func TestReasonFor(t *testing.T) {
	for path, want := range map[string]string{
		"metadata.name": ReasonInvalidName,
		"spec.selector.matchExpressions[0].operator":                  ReasonInvalidSelector,
		"spec.template.metadata.labels":                               ReasonSelectorMismatch,
		"spec.replicas":                                               planner.ReasonInvalidReplicas,
		"spec.placement.clusterSelector.matchExpressions[0].operator": planner.ReasonInvalidClusterSelector,
		"spec.placement.tolerations[2].tolerationSeconds":             planner.ReasonInvalidToleration,
		"spec.placement.clusters[0].weight":                           planner.ReasonInvalidPlacement,
		"spec.failover.moveBack":                                      planner.ReasonInvalidFailover,
		"spec.failover.unschedulableThreshold":                        planner.ReasonInvalidDuration,
		"spec.moveBudget.maxSurge":                                    planner.ReasonInvalidMoveBudget,
		"spec.deletionPolicy":                                         ReasonInvalidSpec,
	} {
		if got := reasonFor(path); got != want {
			t.Errorf("reasonFor(%s) = %s, want %s", path, got, want)
		}
	}
}
