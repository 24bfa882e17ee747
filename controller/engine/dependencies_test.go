package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/replicastatus"
)

var (
	conf = dependencies.Ref{Kind: dependencies.ConfigMap, Name: "conf"}
	db   = dependencies.Ref{Kind: dependencies.Secret, Name: "db"}
)

func TestNeedsDependencyCheck(t *testing.T) {
	with := &Workload{Dependencies: []dependencies.Ref{conf}}
	for _, c := range []struct {
		name   string
		w      *Workload
		active int
		target int32
		want   bool
	}{
		{"creating with dependencies", with, 1, 3, true},
		{"at target", with, 3, 3, false},
		{"scaling down", with, 4, 3, false},
		{"no dependencies", &Workload{}, 0, 3, false},
	} {
		if got := needsDependencyCheck(c.w, c.active, c.target); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

func TestDependencyCondition(t *testing.T) {
	if c := dependencyCondition(nil, nil, now); c != nil {
		t.Errorf("nothing missing: %+v", c)
	}
	c := dependencyCondition([]dependencies.Ref{conf, db}, nil, now)
	if c == nil || c.Reason != ReasonDependenciesMissing || c.Status != metav1.ConditionTrue ||
		!strings.HasSuffix(c.Message, "ConfigMap/conf, Secret/db") || !c.LastTransitionTime.Time.Equal(now) {
		t.Errorf("missing: %+v", c)
	}
	c = dependencyCondition(nil, errors.New("forbidden"), now)
	if c == nil || c.Reason != ReasonDependencyCheckFailed || !strings.Contains(c.Message, "forbidden") {
		t.Errorf("check failed: %+v", c)
	}
}

func TestWithDependencyCondition(t *testing.T) {
	other := metav1.Condition{Type: replicastatus.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: "FailedCreate"}
	waiting := dependencyCondition([]dependencies.Ref{conf}, nil, now)
	later := dependencyCondition([]dependencies.Ref{conf}, nil, now.Add(time.Minute))
	changed := dependencyCondition([]dependencies.Ref{db}, nil, now.Add(time.Minute))
	for _, c := range []struct {
		name  string
		in    []metav1.Condition
		state gateState
		cond  *metav1.Condition
		want  []metav1.Condition
	}{
		{"not checked keeps it", []metav1.Condition{*waiting}, gateNotChecked, nil, []metav1.Condition{*waiting}},
		{"open removes it", []metav1.Condition{other, *waiting}, gateOpen, nil, []metav1.Condition{other}},
		{"open without it", []metav1.Condition{other}, gateOpen, nil, []metav1.Condition{other}},
		{"closed adds it", []metav1.Condition{other}, gateClosed, waiting, []metav1.Condition{other, *waiting}},
		{"same wait keeps the first time", []metav1.Condition{*waiting}, gateClosed, later, []metav1.Condition{*waiting}},
		{"different objects replace it", []metav1.Condition{*waiting}, gateClosed, changed, []metav1.Condition{*changed}},
	} {
		got := withDependencyCondition(slices.Clone(c.in), c.state, c.cond)
		if !slices.EqualFunc(got, c.want, func(a, b metav1.Condition) bool {
			return a.Type == b.Type && a.Reason == b.Reason && a.Message == b.Message && a.LastTransitionTime.Equal(&b.LastTransitionTime)
		}) {
			t.Errorf("%s: got %+v, want %+v", c.name, got, c.want)
		}
	}
}

// presence is a DependencyChecker over a set the test edits.
type presence struct {
	mu      sync.Mutex
	present map[dependencies.Key]bool
	err     error
	calls   int
}

func (p *presence) Missing(_ context.Context, namespace string, refs []dependencies.Ref) ([]dependencies.Ref, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls++
	if p.err != nil {
		return nil, p.err
	}
	var out []dependencies.Ref
	for _, r := range refs {
		if !p.present[r.Key()] {
			out = append(out, r)
		}
	}
	return out, nil
}

func (p *presence) add(r dependencies.Ref) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.present[r.Key()] = true
}

// Pods wait for their dependencies: no creation, no reservation, the
// condition and one event, a recheck soon; once they exist, pods are
// created and the condition goes.
func TestSyncWaitsForDependencies(t *testing.T) {
	w := workload(2)
	w.Dependencies = []dependencies.Ref{conf, db}
	deps := &presence{present: map[dependencies.Key]bool{conf.Key(): true}}
	h := newHarness(t, w, hopts{deps: deps})

	for range 2 {
		res, err := h.sync()
		if err != nil {
			t.Fatal(err)
		}
		if res.RequeueAfter != DefaultDependencyRecheck {
			t.Errorf("RequeueAfter = %v, want %v", res.RequeueAfter, DefaultDependencyRecheck)
		}
	}
	if n := h.n.creates.Load(); n != 0 {
		t.Fatalf("%d pods created before Secret/db exists", n)
	}
	if !h.store.Satisfied(h.key()) {
		t.Error("creations expected while waiting")
	}
	c := replicastatus.FindCondition(h.owner().Status.Conditions, ConditionWaitingForDependencies)
	if c == nil || c.Reason != ReasonDependenciesMissing || !strings.Contains(c.Message, "Secret/db") || strings.Contains(c.Message, "ConfigMap/conf") {
		t.Fatalf("condition = %+v", c)
	}
	var waited int
	for _, e := range h.events() {
		if strings.Contains(e, ConditionWaitingForDependencies) {
			waited++
		}
	}
	if waited != 1 {
		t.Errorf("%d WaitingForDependencies events over two syncs, want 1", waited)
	}

	deps.add(db)
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if n := h.n.creates.Load(); n != 2 {
		t.Fatalf("%d pods created once dependencies exist, want 2", n)
	}
	if c := replicastatus.FindCondition(h.owner().Status.Conditions, ConditionWaitingForDependencies); c != nil {
		t.Errorf("condition kept after the dependencies appeared: %+v", c)
	}
}

func TestSyncDependencyCheckFails(t *testing.T) {
	w := workload(1)
	w.Dependencies = []dependencies.Ref{conf}
	h := newHarness(t, w, hopts{deps: &presence{err: errors.New(`configmaps "conf" is forbidden`)}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if n := h.n.creates.Load(); n != 0 {
		t.Fatalf("%d pods created without a successful check", n)
	}
	c := replicastatus.FindCondition(h.owner().Status.Conditions, ConditionWaitingForDependencies)
	if c == nil || c.Reason != ReasonDependencyCheckFailed || !strings.Contains(c.Message, "forbidden") {
		t.Fatalf("condition = %+v", c)
	}
}

// Scale-down and steady state never ask the checker; a workload without
// dependencies is never held.
func TestDependencyCheckOnlyBeforeCreating(t *testing.T) {
	w := workload(1)
	w.Dependencies = []dependencies.Ref{conf}
	m := mrsFor(w)
	deps := &presence{present: map[dependencies.Key]bool{}}
	h := newHarness(t, w, hopts{deps: deps, objs: []client.Object{ownedPod(m, "a"), ownedPod(m, "b")}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if deps.calls != 0 || h.n.deletes.Load() != 1 {
		t.Errorf("scale-down: checker calls %d, deletes %d", deps.calls, h.n.deletes.Load())
	}

	plain := workload(2)
	deps = &presence{present: map[dependencies.Key]bool{}}
	h = newHarness(t, plain, hopts{deps: deps})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	if deps.calls != 0 || h.n.creates.Load() != 2 {
		t.Errorf("no dependencies: checker calls %d, creates %d", deps.calls, h.n.creates.Load())
	}
}
