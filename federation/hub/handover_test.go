package hub

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

var ref = fedref.FRS{Namespace: "default", Name: "web"}

// memberMRS is the MemberReplicaSet an earlier leader's worker left in a
// member, with the status it wrote: what the member runs.
func memberMRS(target, ready int32) *v1alpha1.MemberReplicaSet {
	m := mrs("uid-1")
	m.Spec.Replicas = target
	m.Status = v1alpha1.MemberReplicaSetStatus{Replicas: ready, ReadyReplicas: ready, AvailableReplicas: ready, FullyLabeledReplicas: ready}
	return m
}

func neverFRS(replicas int32) *v1alpha1.FederatedReplicaSet {
	return frs(replicas, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Failover.MoveBack = v1alpha1.MoveBackNever
	})
}

func registered(names ...string) func(context.Context) ([]registry.Registration, error) {
	return func(context.Context) ([]registry.Registration, error) {
		out := make([]registry.Registration, len(names))
		for i, n := range names {
			out[i] = registry.Registration{Name: n}
		}
		return out, nil
	}
}

// The scale-up of issue 9: the old leader committed 10/10/10 and each member
// runs 10 ready pods; spec.replicas is now 300. A new leader lacks some facts
// when it first reconciles. It must commit nothing until it has them, and
// then exactly what a leader with every fact commits.
func TestHandoverPlansLikeAnUndisturbedLeader(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(10, 10)}, "b": {memberMRS(10, 10)}, "c": {memberMRS(10, 10)}}
	undisturbed := func(t *testing.T) map[string]int32 {
		e := newEnv(t, true, neverFRS(300), healthy("a", "b", "c"), members, nil)
		_ = e.targets.SetTargets(context.Background(), ref, 2, map[string]int32{"a": 10, "b": 10, "c": 10})
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
		tg, _, _ := e.targets.Targets(ref)
		return tg
	}
	want := undisturbed(t)
	if want["a"] != 100 || want["b"] != 100 || want["c"] != 100 {
		t.Fatalf("undisturbed plan = %v, want 100 each", want)
	}

	tests := []struct {
		name    string
		disturb func(e *env) (restore func())
	}{
		{"two members not engaged on the new leader yet", func(e *env) func() {
			ms := e.r.Registry.(fakeMembers)
			b, c := ms["b"], ms["c"]
			delete(ms, "b")
			delete(ms, "c")
			// a's worker already reported in this term: nothing about a is missing.
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
				engine.MemberStatus{Target: 10, Replicas: 10, ReadyReplicas: 10, AvailableReplicas: 10, ReportedAt: now})
			return func() { ms["b"], ms["c"] = b, c }
		}},
		{"two members' health unknown on the new leader", func(e *env) func() {
			h := e.r.Health.(fakeHealth)
			h["b"], h["c"] = v1alpha1.ClusterHealthUnknown, v1alpha1.ClusterHealthUnknown
			return func() { h["b"], h["c"] = v1alpha1.ClusterHealthy, v1alpha1.ClusterHealthy }
		}},
		{"no local reports, MemberReplicaSets only: no wait needed", func(e *env) func() { return func() {} }},
		{"stale local reports from an earlier term of this replica", func(e *env) func() {
			for _, m := range []string{"a", "b", "c"} {
				e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
					engine.MemberStatus{Target: 150, Replicas: 150, ReadyReplicas: 150, ReportedAt: now.Add(-time.Hour)})
			}
			return func() {}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, true, neverFRS(300), healthy("a", "b", "c"), members, nil)
			e.r.Registered = registered("a", "b", "c")
			clk := clocktesting.NewFakeClock(now)
			e.r.Clock = clk
			_ = e.targets.SetTargets(context.Background(), ref, 2, map[string]int32{"a": 10, "b": 10, "c": 10})
			restore := tc.disturb(e)
			for range 3 {
				if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
					t.Fatal(err)
				}
				if tg, gen, _ := e.targets.Targets(ref); gen != 2 && !maps.Equal(tg, want) {
					t.Fatalf("committed %v without the facts, want nothing or %v", tg, want)
				}
				clk.Step(time.Second) // within the wait for facts
			}
			restore()
			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			if tg, _, _ := e.targets.Targets(ref); !maps.Equal(tg, want) {
				t.Fatalf("after the handover the plan is %v, want the undisturbed %v", tg, want)
			}
		})
	}
}

// When the wait for facts runs out, the plan made without them is marked, and
// once the facts are in the spread is repaired within the move budget even
// with moveBack Never, then the mark goes.
func TestSpreadPlannedWithoutFactsIsRepaired(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(10, 10)}, "b": {memberMRS(10, 10)}, "c": {memberMRS(10, 10)}}
	e := newEnv(t, true, neverFRS(300), healthy("a", "b", "c"), members, nil)
	e.r.Registered = registered("a", "b", "c")
	clk := clocktesting.NewFakeClock(now)
	e.r.Clock = clk
	_ = e.targets.SetTargets(context.Background(), ref, 2, map[string]int32{"a": 10, "b": 10, "c": 10})
	h := e.r.Health.(fakeHealth)
	h["b"], h["c"] = v1alpha1.ClusterHealthUnknown, v1alpha1.ClusterHealthUnknown
	for i := 0; ; i++ {
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
		if _, gen, _ := e.targets.Targets(ref); gen == 3 {
			break
		}
		if i > 20 {
			t.Fatal("no plan after the wait for facts ran out")
		}
		clk.Step(time.Second)
	}
	tg, _, _ := e.targets.Targets(ref)
	if tg["a"] != 280 || tg["b"] != 10 || tg["c"] != 10 {
		t.Fatalf("plan with b, c held = %v, want a:280 b:10 c:10", tg)
	}
	if _, ok := get(t, e.hub).Annotations[AnnotationReplan]; !ok {
		t.Fatal("plan made without facts was not marked for repair")
	}

	// a created 140 more pods meanwhile; then b and c are known again.
	setStatus := func(name string, ready int32) {
		m := &v1alpha1.MemberReplicaSet{}
		if err := e.members[name].Get(context.Background(), req().NamespacedName, m); err != nil {
			t.Fatal(err)
		}
		m.Status.Replicas, m.Status.ReadyReplicas, m.Status.AvailableReplicas = ready, ready, ready
		if err := e.members[name].Update(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	setStatus("a", 150)
	h["b"], h["c"] = v1alpha1.ClusterHealthy, v1alpha1.ClusterHealthy
	for step := 0; step < 10; step++ {
		clk.Step(time.Second)
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
		tg, _, _ = e.targets.Targets(ref)
		if tg["a"]+tg["b"]+tg["c"] > 300+75 {
			t.Fatalf("repair exceeds the surge budget: %v", tg)
		}
		// Members catch up with their targets (ready pods, no over-delete).
		for _, m := range []string{"a", "b", "c"} {
			setStatus(m, tg[m])
		}
		if tg["a"] == 100 && tg["b"] == 100 && tg["c"] == 100 {
			break
		}
	}
	if tg["a"] != 100 || tg["b"] != 100 || tg["c"] != 100 {
		t.Fatalf("spread after repair = %v, want 100 each", tg)
	}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if v, ok := get(t, e.hub).Annotations[AnnotationReplan]; ok {
		t.Fatalf("repair mark %q left after the spread was repaired", v)
	}
}

// Issue 10: the hub's own target write is refused; the status must still say
// what the members run, and why the plan is not in force.
func TestStatusReflectsMembersWhenCommitFails(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(25, 25)}, "b": {memberMRS(2, 2)}, "c": {memberMRS(2, 2)}}
	e := newEnv(t, true, frs(9), healthy("a", "b", "c"), members, nil)
	hubObj := get(t, e.hub)
	hubObj.Status = v1alpha1.FederatedReplicaSetStatus{Replicas: 8, ObservedGeneration: 3}
	if err := e.hub.Status().Update(context.Background(), hubObj); err != nil {
		t.Fatal(err)
	}
	e.targets.targets["default/web"] = map[string]int32{"a": 25}
	e.targets.gens["default/web"] = 999999
	e.targets.err = errors.New("stale command: targets of default/web are at generation 999999, command has 3")
	_, err := e.r.Reconcile(context.Background(), req())
	if err == nil || !strings.Contains(err.Error(), "999999") {
		t.Fatalf("Reconcile error = %v, want the refused commit", err)
	}
	st := get(t, e.hub).Status
	if st.Replicas != 29 {
		t.Fatalf("status replicas = %d, want the 29 the members run", st.Replicas)
	}
	if len(st.Clusters) != 3 {
		t.Fatalf("status rows = %+v, want one per member running pods", st.Clusters)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionPlanned)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "CommitFailed" || !strings.Contains(c.Message, "999999") {
		t.Fatalf("Planned = %+v, want False/CommitFailed naming the refusal", c)
	}
	if p := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); p == nil || p.Reason == "MembersAtTarget" {
		t.Fatalf("Progressing = %+v, must not claim every member is at its target", p)
	}
	// The store accepts again: the condition turns True.
	e.targets.err = nil
	e.targets.gens["default/web"] = 0
	e.r.StatusInterval = 0
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, v1alpha1.ConditionPlanned); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Planned after a good commit = %+v", c)
	}

}

// A member the placement does not select, holding no target, is not waited for.
func TestUnselectedMemberIsNotWaitedFor(t *testing.T) {
	obj := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a"}, {Name: "b"}}
	})
	h := healthy("a", "b", "c")
	h["c"] = v1alpha1.ClusterHealthUnknown
	e := newEnv(t, true, obj, h, nil, nil)
	e.r.Registered = registered("a", "b", "c")
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if tg, _, ok := e.targets.Targets(ref); !ok || tg["a"] != 2 || tg["b"] != 2 {
		t.Fatalf("targets = %v (requeue %v), want a:2 b:2 at once", tg, res.RequeueAfter)
	}
}

// A registered member this replica never connects to (a broken kubeconfig,
// say) is held while the wait for facts and then the grace period run, and is
// then failed over like an unreachable one.
func TestUnconnectedMemberIsFailedOverAfterGrace(t *testing.T) {
	members := map[string][]client.Object{"a": {memberMRS(2, 2)}, "b": {memberMRS(2, 2)}}
	e := newEnv(t, true, frs(4), healthy("a", "b"), members, nil)
	e.r.Registered = registered("a", "b")
	e.r.Defaults = v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(time.Minute)}
	clk := clocktesting.NewFakeClock(now)
	e.r.Clock = clk
	_ = e.targets.SetTargets(context.Background(), ref, 3, map[string]int32{"a": 2, "b": 2})
	delete(e.r.Registry.(fakeMembers), "b")
	check := func(wantA, wantB int32) {
		t.Helper()
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
		if tg, _, _ := e.targets.Targets(ref); tg["a"] != wantA || tg["b"] != wantB {
			t.Fatalf("at %v: targets %v, want a:%d b:%d", clk.Now().Sub(now), tg, wantA, wantB)
		}
	}
	check(2, 2)
	clk.Step(reportGrace + time.Second)
	check(2, 2) // held within the grace period
	clk.Step(time.Minute)
	check(4, 0)
}
