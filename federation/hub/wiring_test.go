package hub

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
)

func registrations(regs ...registry.Registration) func(context.Context) ([]registry.Registration, error) {
	return func(context.Context) ([]registry.Registration, error) { return regs, nil }
}

func report(e *env, cluster string, n int32) {
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: cluster, Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: n, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ReportedAt: now})
}

func drain(ch chan string) []string {
	var out []string
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		default:
			return out
		}
	}
}

// A NoExecute taint registered without timeAdded is tolerated for
// tolerationSeconds from when the hub first saw it: the reconcile comes back
// then, and the member's replicas are planned elsewhere.
func TestTaintWithoutTimeAddedRunsOutFromFirstSight(t *testing.T) {
	obj := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{
			Key: "maintenance", Operator: v1alpha1.TolerationExists, Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](30),
		}}
	})
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	clk := clocktesting.NewFakeClock(now)
	e.r.Clock = clk
	e.r.Registered = registrations(registry.Registration{Name: "a"},
		registry.Registration{Name: "b", Taints: []v1alpha1.ClusterTaint{{Key: "maintenance", Effect: v1alpha1.TaintNoExecute}}})
	ref := fedref.FRS{Namespace: "default", Name: "web"}
	_ = e.targets.SetTargets(context.Background(), ref, 3, map[string]int32{"a": 2, "b": 2})
	report(e, "a", 2)
	report(e, "b", 2)

	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if tg, _, _ := e.targets.Targets(ref); tg["b"] != 2 {
		t.Fatalf("tolerated member lost its replicas at once: %v", tg)
	}
	if res.RequeueAfter != 30*time.Second {
		t.Fatalf("RequeueAfter = %v, want 30s (toleration runs out)", res.RequeueAfter)
	}
	clk.Step(10 * time.Second)
	if res, err = e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 20*time.Second {
		t.Fatalf("RequeueAfter after 10s = %v, want 20s (counted from first sight, not from each pass)", res.RequeueAfter)
	}
	clk.Step(20 * time.Second)
	if _, err = e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if tg, _, _ := e.targets.Targets(ref); tg["b"] != 0 || tg["a"] != 4 {
		t.Fatalf("targets after the toleration ran out = %v, want a=4 b=0", tg)
	}
}

// An unreadable taints annotation keeps new replicas away and says why.
func TestInvalidTaintsCordonAndWarnOnce(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	rec := events.NewFakeRecorder(20)
	e.r.Recorder = rec
	taints, why := registry.ParseTaints("not json")
	e.r.Registered = registrations(registry.Registration{Name: "a"},
		registry.Registration{Name: "b", Taints: taints, TaintsError: why})
	for range 2 {
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
	}
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); tg["b"] != 0 || tg["a"] != 4 {
		t.Fatalf("targets = %v, want everything on a", tg)
	}
	var warned int
	for _, ev := range drain(rec.Events) {
		if strings.Contains(ev, "InvalidTaints") {
			warned++
		}
	}
	if warned != 1 {
		t.Fatalf("InvalidTaints events over two passes = %d, want 1", warned)
	}
}

// An unsatisfiable spread constraint shows as a condition, and its warning
// is emitted when it starts, not on every pass, and again after it cleared.
func TestSpreadUnsatisfiedConditionAndEvents(t *testing.T) {
	obj := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "region", MinGroups: ptr.To[int32](2)}}
	})
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	rec := events.NewFakeRecorder(50)
	e.r.Recorder = rec
	same := registrations(registry.Registration{Name: "a", Labels: map[string]string{"region": "eu"}},
		registry.Registration{Name: "b", Labels: map[string]string{"region": "eu"}})
	e.r.Registered = same
	countSpread := func() int {
		n := 0
		for _, ev := range drain(rec.Events) {
			if strings.Contains(ev, "SpreadUnsatisfied") {
				n++
			}
		}
		return n
	}
	for i := range 3 {
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			report(e, "a", 2)
			report(e, "b", 2)
		}
	}
	c := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, v1alpha1.ConditionSpreadUnsatisfied)
	if c == nil || c.Status != metav1.ConditionTrue || c.Message == "" {
		t.Fatalf("SpreadUnsatisfied condition = %+v, want True with a message", c)
	}
	if n := countSpread(); n != 1 {
		t.Fatalf("SpreadUnsatisfied events over three passes = %d, want 1", n)
	}

	e.r.Registered = registrations(registry.Registration{Name: "a", Labels: map[string]string{"region": "eu"}},
		registry.Registration{Name: "b", Labels: map[string]string{"region": "us"}})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, v1alpha1.ConditionSpreadUnsatisfied); c != nil {
		t.Fatalf("SpreadUnsatisfied condition still set once satisfied: %+v", c)
	}
	e.r.Registered = same
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if n := countSpread(); n != 1 {
		t.Fatalf("SpreadUnsatisfied events after it recurred = %d, want 1", n)
	}
}

// Duplicated mode wants spec.replicas in every member: status compares the
// fleet with the sum of the targets, and the spread shows each member.
func TestDuplicatedDesiredIsSumOfTargets(t *testing.T) {
	obj := frs(3, func(f *v1alpha1.FederatedReplicaSet) { f.Spec.Placement.Mode = v1alpha1.PlacementDuplicated })
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	report(e, "a", 3)
	report(e, "b", 3)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	st := get(t, e.hub).Status
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "6 of 6") {
		t.Fatalf("Ready = %+v, want True with 6 of 6", c)
	}
	if st.Spread != "a=3,b=3" {
		t.Fatalf("spread = %q, want a=3,b=3", st.Spread)
	}
}

// A new leader continues the toleration window recorded for a taint
// registered without timeAdded, instead of starting its own.
func TestTaintWindowContinuesFromRecordedTime(t *testing.T) {
	obj := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{
			Key: "maintenance", Operator: v1alpha1.TolerationExists, Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](30),
		}}
	})
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	taint := v1alpha1.ClusterTaint{Key: "maintenance", Effect: v1alpha1.TaintNoExecute}
	e.r.Registered = registrations(registry.Registration{Name: "a"}, registry.Registration{Name: "b", Taints: []v1alpha1.ClusterTaint{taint}})
	recorded := taint
	recorded.TimeAdded = &metav1.Time{Time: now.Add(-20 * time.Second)}
	e.r.RecordedTaints = func(_ context.Context, cluster string) []v1alpha1.ClusterTaint {
		if cluster == "b" {
			return []v1alpha1.ClusterTaint{recorded}
		}
		return nil
	}
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2, "b": 2})
	report(e, "a", 2)
	report(e, "b", 2)
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter != 10*time.Second {
		t.Fatalf("RequeueAfter = %v, want 10s (30s from the recorded time, 20s ago)", res.RequeueAfter)
	}
}

// Relabelling a member's registration moves replicas per clusterSelector
// without re-engaging it: the registration's current labels win over those
// read when the member was engaged.
func TestRelabelledMemberReplanned(t *testing.T) {
	obj := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
	})
	e := newEnv(t, true, obj, healthy("a", "b"), nil, nil)
	ms := e.r.Registry.(fakeMembers)
	ms["a"].Labels = map[string]string{"region": "eu"} // as read when engaged
	ms["b"].Labels = map[string]string{"region": "us"}
	e.r.Registered = registrations(registry.Registration{Name: "a", Labels: map[string]string{"region": "us"}},
		registry.Registration{Name: "b", Labels: map[string]string{"region": "eu"}})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	ref := fedref.FRS{Namespace: "default", Name: "web"}
	if tg, _, _ := e.targets.Targets(ref); tg["b"] != 4 || tg["a"] != 0 {
		t.Fatalf("targets = %v, want all 4 on b (now region=eu), none on a", tg)
	}
}
