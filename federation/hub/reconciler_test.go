package hub

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/fakecluster"
)

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type fakeMembers map[string]*registry.Member

func (f fakeMembers) Members() []*registry.Member {
	var out []*registry.Member
	for _, n := range []string{"a", "b", "c"} {
		if m, ok := f[n]; ok {
			out = append(out, m)
		}
	}
	return out
}

func (f fakeMembers) Get(name string) (*registry.Member, bool) { m, ok := f[name]; return m, ok }

type fakeHealth map[string]v1alpha1.ClusterHealth

func (f fakeHealth) State(c string) (health.State, bool) {
	h, ok := f[c]
	return health.State{Health: h, Since: now.Add(-time.Hour)}, ok
}

type memTargets struct {
	mu      sync.Mutex
	targets map[string]map[string]int32
	gens    map[string]int64
	err     error
	deleted []string
}

func (m *memTargets) Targets(frs fedref.FRS) (map[string]int32, int64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.targets[frs.Namespace+"/"+frs.Name]
	return t, m.gens[frs.Namespace+"/"+frs.Name], ok
}

func (m *memTargets) SetTargets(_ context.Context, frs fedref.FRS, gen int64, t map[string]int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return m.err
	}
	m.targets[frs.Namespace+"/"+frs.Name] = t
	m.gens[frs.Namespace+"/"+frs.Name] = gen
	return nil
}

func (m *memTargets) DeleteTargets(_ context.Context, frs fedref.FRS) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.targets, frs.Namespace+"/"+frs.Name)
	m.deleted = append(m.deleted, frs.Namespace+"/"+frs.Name)
	return nil
}

type gate struct{ open bool }

func (g gate) Allowed() (context.Context, bool) { return context.Background(), g.open }

type pokes struct {
	mu   sync.Mutex
	keys []fedref.MemberObject
}

func (p *pokes) Enqueue(k fedref.MemberObject) {
	p.mu.Lock()
	p.keys = append(p.keys, k)
	p.mu.Unlock()
}

type forgotten struct {
	mu   sync.Mutex
	keys []fedref.MemberObject
}

func (f *forgotten) Delete(k fedref.MemberObject) {
	f.mu.Lock()
	f.keys = append(f.keys, k)
	f.mu.Unlock()
}

// frs is the test's FederatedReplicaSet default/web (UID uid-1, generation
// 3) of replicas replicas, changed by mods.
func frs(replicas int32, mods ...func(*v1alpha1.FederatedReplicaSet)) *v1alpha1.FederatedReplicaSet {
	b := builder.FRS("default", "web").Replicas(replicas).UID("uid-1").Generation(3)
	for _, m := range mods {
		b.Edit(m)
	}
	return b.Obj()
}

func node(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("100"), corev1.ResourceCPU: resource.MustParse("8")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
		},
	}
}

type env struct {
	r       *Reconciler
	hub     client.Client
	members map[string]client.Client
	targets *memTargets
	pokes   *pokes
	forgot  *forgotten
}

func newEnv(t *testing.T, open bool, hubObj *v1alpha1.FederatedReplicaSet, health fakeHealth, memberObjs map[string][]client.Object, funcs map[string]interceptor.Funcs) *env {
	t.Helper()
	s := testScheme(t)
	hb := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.FederatedReplicaSet{})
	if hubObj != nil {
		hb = hb.WithObjects(hubObj)
	}
	e := &env{hub: hb.Build(), members: map[string]client.Client{}, targets: &memTargets{targets: map[string]map[string]int32{}, gens: map[string]int64{}}, pokes: &pokes{}, forgot: &forgotten{}}
	ms := fakeMembers{}
	for name := range health {
		b := fake.NewClientBuilder().WithScheme(s).WithObjects(node(name+"-n1")).WithObjects(memberObjs[name]...).
			WithIndex(&corev1.Pod{}, engine.PodControllerIndex, engine.PodControllerIndexFunc)
		if f, ok := funcs[name]; ok {
			b = b.WithInterceptorFuncs(f)
		}
		c := b.Build()
		e.members[name] = c
		ms[name] = &registry.Member{Name: name, Cluster: fakecluster.New(c)}
	}
	e.r = &Reconciler{
		Hub: e.hub, Registry: ms, Health: health, Targets: e.targets, Reports: NewReports(nil),
		Gate: gate{open: open}, Poker: e.pokes, Expectations: e.forgot, Clock: clocktesting.NewFakePassiveClock(now),
		// Far above any fake client's answer on a loaded machine: a test
		// about stalls sets its own.
		MemberTimeout: time.Minute,
	}
	return e
}

func req() ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "default", Name: "web"}}
}

func get(t *testing.T, c client.Client) *v1alpha1.FederatedReplicaSet {
	t.Helper()
	f := &v1alpha1.FederatedReplicaSet{}
	if err := c.Get(context.Background(), req().NamespacedName, f); err != nil {
		t.Fatal(err)
	}
	return f
}

func healthy(names ...string) fakeHealth {
	h := fakeHealth{}
	for _, n := range names {
		h[n] = v1alpha1.ClusterHealthy
	}
	return h
}

func TestFollowerWritesNothing(t *testing.T) {
	e := newEnv(t, false, frs(4), healthy("a", "b"), nil, nil)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if got := get(t, e.hub); len(got.Finalizers) != 0 || len(got.Status.Clusters) != 0 {
		t.Fatalf("follower wrote to the hub: finalizers %v, status %+v", got.Finalizers, got.Status)
	}
	if len(e.targets.targets) != 0 || len(e.pokes.keys) != 0 {
		t.Fatalf("follower committed targets %v or poked %v", e.targets.targets, e.pokes.keys)
	}
}

// afterFirstHold moves r's fake clock past the hold of a new object's first
// status (aggregate.FirstProgress) and reconciles rq again, which writes it.
func afterFirstHold(t *testing.T, r *Reconciler, rq ctrl.Request) ctrl.Result {
	t.Helper()
	clk := r.Clock.(*clocktesting.FakePassiveClock)
	clk.SetTime(clk.Now().Add(countHold))
	res, err := r.Reconcile(context.Background(), rq)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestLeaderPlansCommitsAndReports(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	rec := events.NewFakeRecorder(20)
	e.r.Recorder = rec
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	// The new object's first status waits for its pods, up to the hold.
	if st := get(t, e.hub).Status; st.ObservedGeneration != 0 || res.RequeueAfter != countHold {
		t.Fatalf("first status of a new object: observed generation %d, requeue %s; want it held for %s", st.ObservedGeneration, res.RequeueAfter, countHold)
	}
	// One event for the plan, not one per member.
	if evs := drain(rec.Events); len(evs) != 1 || !strings.Contains(evs[0], "ScaleUp") ||
		!strings.Contains(evs[0], "a 0 -> 2") || !strings.Contains(evs[0], "b 0 -> 2") {
		t.Fatalf("plan events = %q, want one ScaleUp event naming a and b", evs)
	}
	tg, gen, ok := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"})
	if !ok || gen != 3 || tg["a"] != 2 || tg["b"] != 2 {
		t.Fatalf("targets = %v gen %d, want a:2 b:2 gen 3", tg, gen)
	}
	if len(e.pokes.keys) != 2 {
		t.Fatalf("poked %v, want both members", e.pokes.keys)
	}
	// The members report their first pods, not Ready yet; past the hold
	// the first status is written.
	for _, m := range []string{"a", "b"} {
		e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
			engine.MemberStatus{Target: 2, Replicas: 1, FullyLabeledReplicas: 1, ReportedAt: now})
	}
	afterFirstHold(t, e.r, req())
	got := get(t, e.hub)
	if len(got.Finalizers) != 1 || got.Finalizers[0] != v1alpha1.FinalizerCascade {
		t.Fatalf("finalizers = %v", got.Finalizers)
	}
	st := got.Status
	if st.ObservedGeneration != 3 || st.ClusterCount != 2 || len(st.Clusters) != 2 || st.Selector != "app=web" {
		t.Fatalf("status = %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Progressing = %+v", c)
	}

	// Reports arrive: the status sums them and the FRS becomes Ready.
	for _, m := range []string{"a", "b"} {
		e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
			engine.MemberStatus{Target: 2, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
	}
	e.pokes.keys = nil
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	st = get(t, e.hub).Status
	if st.Replicas != 4 || st.ReadyReplicas != 4 || st.AvailableReplicas != 4 {
		t.Fatalf("summed status = %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("Ready = %+v", c)
	}
	if len(e.pokes.keys) != 0 {
		t.Fatalf("unchanged plan poked workers: %v", e.pokes.keys)
	}
}

func TestUnhealthyMemberPastGraceIsFailedOver(t *testing.T) {
	h := healthy("a", "b")
	h["b"] = v1alpha1.ClusterUnreachable // since an hour ago, past the 60s default
	e := newEnv(t, true, frs(4), h, nil, nil)
	e.r.Defaults = v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(time.Minute)}
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2, "b": 2})
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: 2, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"})
	if tg["a"] != 4 || tg["b"] != 0 {
		t.Fatalf("targets = %v, want a:4 b:0", tg)
	}
	st := get(t, e.hub).Status
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionClusterUnavailable); c == nil || !strings.Contains(c.Message, "b") {
		t.Fatalf("ClusterUnavailable = %+v", c)
	}
}

// A new leader has no member reports yet: it waits for them (bounded) rather
// than plan blind and move running replicas.
func TestPlanWaitsForReportsAfterTakeover(t *testing.T) {
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, nil)
	// The previous leader placed 4:2 (say, capacity-bound); a fresh plan from
	// weights alone would say 3:3.
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 4, "b": 2})
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 {
		t.Fatalf("no requeue while reports are missing: %+v", res)
	}
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); tg["a"] != 4 || tg["b"] != 2 {
		t.Fatalf("targets changed before reports arrived: %v", tg)
	}
	// Reports arrive: ready pods stay where they are.
	for m, n := range map[string]int32{"a": 4, "b": 2} {
		e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
			engine.MemberStatus{Target: n, Replicas: n, ReadyReplicas: n, AvailableReplicas: n, ReportedAt: now})
	}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); tg["a"] != 4 || tg["b"] != 2 {
		t.Fatalf("ready replicas moved after takeover: %v", tg)
	}
}

func TestPlanWaitForReportsIsBounded(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	clk := clocktesting.NewFakePassiveClock(now)
	e.r.Clock = clk
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 2, map[string]int32{"a": 2, "b": 2})
	if res, _ := e.r.Reconcile(context.Background(), req()); res.RequeueAfter <= 0 {
		t.Fatalf("expected a wait for reports")
	}
	clk.SetTime(now.Add(reportGrace + time.Second))
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if _, gen, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); gen != 3 {
		t.Fatalf("no plan committed after the grace: generation %d", gen)
	}
}

func TestCommitFailureIsReturned(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a"), nil, nil)
	e.targets.err = errors.New("leadership lost")
	_, err := e.r.Reconcile(context.Background(), req())
	if err == nil || !strings.Contains(err.Error(), "leadership lost") {
		t.Fatalf("Reconcile error = %v, want the commit failure", err)
	}
	if len(e.pokes.keys) != 0 {
		t.Fatalf("workers poked after a failed commit: %v", e.pokes.keys)
	}
}

func deleting(extraFinalizers ...string) func(*v1alpha1.FederatedReplicaSet) {
	return func(f *v1alpha1.FederatedReplicaSet) {
		ts := metav1.NewTime(now)
		f.DeletionTimestamp = &ts
		f.Finalizers = append([]string{v1alpha1.FinalizerCascade}, extraFinalizers...)
	}
}

func mrs(uid types.UID) *v1alpha1.MemberReplicaSet {
	return &v1alpha1.MemberReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "mrs-" + uid},
		Spec:       v1alpha1.MemberReplicaSetSpec{Replicas: 2, Hub: v1alpha1.HubReference{Namespace: "default", Name: "web", UID: uid}},
	}
}

// recordDeletes captures the propagation policy of member deletes.
func recordDeletes(got *[]metav1.DeletionPropagation) interceptor.Funcs {
	return interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		o := &client.DeleteOptions{}
		o.ApplyOptions(opts)
		if o.PropagationPolicy != nil {
			*got = append(*got, *o.PropagationPolicy)
		}
		return c.Delete(ctx, obj, opts...)
	}}
}

func TestDeletion(t *testing.T) {
	tests := []struct {
		name        string
		extra       []string
		health      fakeHealth
		memberUID   types.UID
		wantPolicy  metav1.DeletionPropagation
		wantDeleted bool // MemberReplicaSet removed from member a
		wantDone    bool // finalizer released
		wantMessage string
	}{
		{"background cascades with foreground member deletes", nil, healthy("a"), "uid-1", metav1.DeletePropagationForeground, true, true, ""},
		{"orphan keeps pods", []string{metav1.FinalizerOrphanDependents}, healthy("a"), "uid-1", metav1.DeletePropagationOrphan, true, true, ""},
		{"unreachable member holds the finalizer", nil, fakeHealth{"a": v1alpha1.ClusterUnreachable}, "uid-1", "", false, false, "waiting for unreachable members: a"},
		{"another object's MemberReplicaSet is left alone", nil, healthy("a"), "uid-other", "", false, true, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var policies []metav1.DeletionPropagation
			e := newEnv(t, true, frs(2, deleting(tc.extra...)), tc.health,
				map[string][]client.Object{"a": {mrs(tc.memberUID)}},
				map[string]interceptor.Funcs{"a": recordDeletes(&policies)})
			_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2})
			var err error
			for i := 0; i < 3 && err == nil; i++ { // delete, then observe it gone
				_, err = e.r.Reconcile(context.Background(), req())
			}
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantPolicy != "" && (len(policies) != 1 || policies[0] != tc.wantPolicy) {
				t.Fatalf("member delete policies = %v, want [%s]", policies, tc.wantPolicy)
			}
			if tc.wantPolicy == "" && len(policies) != 0 {
				t.Fatalf("member deleted with %v, want no delete", policies)
			}
			err = e.members["a"].Get(context.Background(), req().NamespacedName, &v1alpha1.MemberReplicaSet{})
			if gone := apierrors.IsNotFound(err); gone != tc.wantDeleted {
				t.Fatalf("MemberReplicaSet gone = %v, want %v", gone, tc.wantDeleted)
			}
			hubObj := &v1alpha1.FederatedReplicaSet{}
			err = e.hub.Get(context.Background(), req().NamespacedName, hubObj)
			released := apierrors.IsNotFound(err) || (err == nil && !contains(hubObj.Finalizers, v1alpha1.FinalizerCascade))
			if released != tc.wantDone {
				t.Fatalf("finalizer released = %v, want %v (err %v, finalizers %v)", released, tc.wantDone, err, hubObj.Finalizers)
			}
			if tc.wantDone {
				if len(e.targets.deleted) != 1 || len(e.forgot.keys) == 0 {
					t.Fatalf("targets deleted %v, expectations forgotten %v", e.targets.deleted, e.forgot.keys)
				}
			}
			if tc.wantMessage != "" {
				c := meta.FindStatusCondition(hubObj.Status.Conditions, ConditionDeleting)
				if c == nil || !strings.Contains(c.Message, tc.wantMessage) {
					t.Fatalf("Deleting condition = %+v, want %q", c, tc.wantMessage)
				}
			}
		})
	}
}

// The hub's garbage collector removes the "orphan" finalizer before replicafed
// reconciles; the intent seen on the event path (or recorded in the
// annotation) still orphans the pods.
func TestOrphanIntentSurvivesFinalizerRemoval(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seen   bool
		annot  string
		policy metav1.DeletionPropagation
	}{
		{"seen on the event path", true, "", metav1.DeletePropagationOrphan},
		{"recorded by an earlier leader", false, "Orphan", metav1.DeletePropagationOrphan},
		{"plain deletion", false, "", metav1.DeletePropagationForeground},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var policies []metav1.DeletionPropagation
			obj := frs(2, deleting())
			if tc.annot != "" {
				obj.Annotations = map[string]string{AnnotationPropagation: tc.annot}
			}
			e := newEnv(t, true, obj, healthy("a"), map[string][]client.Object{"a": {mrs("uid-1")}},
				map[string]interceptor.Funcs{"a": recordDeletes(&policies)})
			e.r.Intents = &DeletionIntents{}
			if tc.seen {
				withOrphan := obj.DeepCopy()
				withOrphan.Finalizers = append(withOrphan.Finalizers, metav1.FinalizerOrphanDependents)
				e.r.Intents.Observe(withOrphan)
			}
			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			if len(policies) != 1 || policies[0] != tc.policy {
				t.Fatalf("member delete policies = %v, want [%s]", policies, tc.policy)
			}
			got := &v1alpha1.FederatedReplicaSet{}
			if err := e.hub.Get(context.Background(), req().NamespacedName, got); err == nil {
				if a := got.Annotations[AnnotationPropagation]; a != string(tc.policy) {
					t.Fatalf("propagation annotation = %q, want %q", a, tc.policy)
				}
			}
		})
	}
}

func TestHeldMemberRequeuesAtGraceExpiry(t *testing.T) {
	h := healthy("a", "b")
	h["b"] = v1alpha1.ClusterUnreachable
	e := newEnv(t, true, frs(4), h, nil, nil)
	e.r.Health = sinceHealth{fakeHealth: h, since: now.Add(-15 * time.Second)}
	e.r.Defaults = v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(time.Minute)}
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2, "b": 2})
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
		engine.MemberStatus{Target: 2, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2, ReportedAt: now})
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); tg["b"] != 2 {
		t.Fatalf("member within its grace period lost its target: %v", tg)
	}
	if want := 45 * time.Second; res.RequeueAfter != want {
		t.Fatalf("RequeueAfter = %v, want %v (grace expiry)", res.RequeueAfter, want)
	}
}

type sinceHealth struct {
	fakeHealth
	since time.Time
}

func (s sinceHealth) State(c string) (health.State, bool) {
	st, ok := s.fakeHealth.State(c)
	st.Since = s.since
	return st, ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestWorkloadsHandsOff(t *testing.T) {
	s := testScheme(t)
	live := frs(3)
	gone := frs(3, deleting())
	gone.Name = "gone"
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default", Labels: map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}}}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(live, gone, ns).Build()
	tg := &memTargets{targets: map[string]map[string]int32{"default/web": {"a": 2}, "default/gone": {"a": 1}, "other/web": {"a": 1}}, gens: map[string]int64{"default/web": 3}}
	def := &v1alpha1.NodeCost{Key: "tier", Values: []string{"spot", "reserved"}}
	w := &Workloads{Hub: c, Targets: tg, DefaultNodeCost: def}
	got, ok := w.Workload(fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"})
	if !ok || got.Target != 2 || got.Hub.UID != "uid-1" || got.Hub.Generation != 3 {
		t.Fatalf("Workload = %+v, %v", got, ok)
	}
	if got.NamespaceLabels["pod-security.kubernetes.io/enforce"] != "baseline" {
		t.Errorf("NamespaceLabels = %v, want the hub namespace's Pod Security labels", got.NamespaceLabels)
	}
	if got.NodeCost == nil || got.NodeCost.Key != "tier" {
		t.Errorf("NodeCost = %+v, want the configured default", got.NodeCost)
	}
	other := frs(3)
	other.Namespace = "other" // no Namespace object in the hub cache
	if err := c.Create(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	for _, k := range []fedref.MemberObject{
		{Cluster: "a", Namespace: "other", Name: "web"},    // namespace unreadable
		{Cluster: "b", Namespace: "default", Name: "web"},  // no target for the member
		{Cluster: "a", Namespace: "default", Name: "gone"}, // being deleted
		{Cluster: "a", Namespace: "default", Name: "nope"}, // not in the hub
	} {
		if _, ok := w.Workload(k); ok {
			t.Errorf("Workload(%v) should be hands off", k)
		}
	}
}

// An object deleted while its plan waits for member facts leaves no wait
// behind: a later object of the same name must wait for its own facts.
func TestDeletedObjectForgetsItsWait(t *testing.T) {
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, nil)
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 4, "b": 2})
	if res, err := e.r.Reconcile(context.Background(), req()); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("expected a wait for reports: %+v, %v", res, err)
	}
	if _, ok := e.r.awaiting.Load("default/web"); !ok {
		t.Fatal("the wait was not recorded")
	}
	obj := get(t, e.hub)
	obj.Finalizers = nil
	if err := e.hub.Update(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	if since, ok := e.r.awaiting.Load("default/web"); ok {
		t.Fatalf("deleted object still waits since %v", since)
	}
}

// termGate is an open gate whose leader context is replaced to model a new
// term of this replica.
type termGate struct{ ctx context.Context }

func (g *termGate) Allowed() (context.Context, bool) { return g.ctx, true }

// A wait begun in an earlier term of this replica does not count in a later
// one: the new term lacks the facts again and waits its own grace.
func TestWaitForFactsStartsAgainInANewTerm(t *testing.T) {
	e := newEnv(t, true, frs(6), healthy("a", "b"), nil, nil)
	clk := clocktesting.NewFakePassiveClock(now)
	e.r.Clock = clk
	g := &termGate{ctx: context.Background()}
	e.r.Gate = g
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 4, "b": 2})
	if res, err := e.r.Reconcile(context.Background(), req()); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("expected a wait for reports: %+v, %v", res, err)
	}
	// Leadership lost before the reports came, and won again later.
	g.ctx = context.WithValue(context.Background(), termGate{}, "next term")
	clk.SetTime(now.Add(reportGrace + time.Minute))
	if res, err := e.r.Reconcile(context.Background(), req()); err != nil || res.RequeueAfter <= 0 {
		t.Fatalf("the new term planned without waiting for reports: %+v, %v", res, err)
	}
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); tg["a"] != 4 || tg["b"] != 2 {
		t.Fatalf("targets changed before the new term's reports arrived: %v", tg)
	}
}

// TestConvergedStatusIsNotPaced: within the pause between status writes a
// count change waits, but the status that turns Ready true is written at
// once.
func TestConvergedStatusIsNotPaced(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	e.r.StatusInterval = time.Hour // the fake clock never reaches its end
	report := func(ready int32) {
		for _, m := range []string{"a", "b"} {
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
				engine.MemberStatus{Target: 2, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: ready, AvailableReplicas: ready, ReportedAt: now})
		}
	}
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	report(1)
	res, err := e.r.Reconcile(context.Background(), req())
	if err != nil {
		t.Fatal(err)
	}
	if st := get(t, e.hub).Status; st.ReadyReplicas != 0 || res.RequeueAfter <= 0 {
		t.Fatalf("a count change within the interval: ready %d written, requeue %s; want it held back", st.ReadyReplicas, res.RequeueAfter)
	}
	report(2)
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	st := get(t, e.hub).Status
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue || st.ReadyReplicas != 4 {
		t.Fatalf("converged status not written within the interval: ready %d, Ready %+v", st.ReadyReplicas, c)
	}
}

// TestCountOnlyStatusIsHeld: past the pause between status writes, a
// count-only change still waits for the count hold from when it first
// waited (the next counts coalesce into one write), while counts that
// settle (the end of a scale-down, Ready already True) are written at once.
func TestCountOnlyStatusIsHeld(t *testing.T) {
	e := newEnv(t, true, frs(4), healthy("a", "b"), nil, nil)
	clk := clocktesting.NewFakePassiveClock(now)
	e.r.Clock = clk
	e.r.StatusInterval = time.Second
	report := func(replicas, ready int32) {
		for _, m := range []string{"a", "b"} {
			e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: m, Namespace: "default", Name: "web"},
				engine.MemberStatus{Target: 2, Replicas: replicas, FullyLabeledReplicas: replicas, ReadyReplicas: ready, AvailableReplicas: ready, ReportedAt: now})
		}
	}
	reconcile := func(at time.Duration) ctrl.Result {
		t.Helper()
		clk.SetTime(now.Add(at))
		res, err := e.r.Reconcile(context.Background(), req())
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	// The first status of the new object waits the hold, then is written.
	reconcile(0)
	const first = countHold
	report(0, 0)
	reconcile(first)
	if st := get(t, e.hub).Status; st.ObservedGeneration == 0 {
		t.Fatal("the first status is not written after its hold")
	}
	report(1, 0)
	if res := reconcile(first + 2*time.Second); res.RequeueAfter != countHold {
		t.Fatalf("a count-only change past the interval: requeue %s, want the hold %s", res.RequeueAfter, countHold)
	}
	if st := get(t, e.hub).Status; st.Replicas != 0 {
		t.Fatalf("count-only change written at once: replicas %d", st.Replicas)
	}
	report(2, 1)
	if res := reconcile(first + 4*time.Second); res.RequeueAfter != countHold-2*time.Second {
		t.Fatalf("a later count change: requeue %s, want the rest of the hold", res.RequeueAfter)
	}
	reconcile(first + 2*time.Second + countHold)
	if st := get(t, e.hub).Status; st.Replicas != 4 || st.ReadyReplicas != 2 {
		t.Fatalf("after the hold: replicas %d ready %d, want 4 and 2 in one write", st.Replicas, st.ReadyReplicas)
	}
	report(2, 2)
	reconcile(first + 2*time.Second + countHold + 2*time.Second)
	if c := meta.FindStatusCondition(get(t, e.hub).Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("converged status held: Ready %+v", c)
	}
	// A pod of a terminates (written after the hold) and is gone: count-only
	// changes, Ready stays True; the one that settles the counts is not held.
	terminating := func(n int32, at time.Duration) ctrl.Result {
		e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"},
			engine.MemberStatus{Target: 2, Replicas: 2, FullyLabeledReplicas: 2, ReadyReplicas: 2, AvailableReplicas: 2,
				TerminatingReplicas: n, ReportedAt: now})
		return reconcile(at)
	}
	base := first + 4*time.Second + countHold
	terminating(1, base)
	terminating(1, base+countHold)
	if st := get(t, e.hub).Status; st.TerminatingReplicas == nil || *st.TerminatingReplicas != 1 {
		t.Fatalf("terminating pod not written after the hold: %v", st.TerminatingReplicas)
	}
	if res := terminating(0, base+countHold+2*time.Second); res.RequeueAfter != 0 {
		t.Fatalf("settled counts held back: requeue %s", res.RequeueAfter)
	}
	if st := get(t, e.hub).Status; st.TerminatingReplicas == nil || *st.TerminatingReplicas != 0 {
		t.Fatalf("settled counts not written: terminating %v", st.TerminatingReplicas)
	}
}
