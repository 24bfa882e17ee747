package worker_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

// shutGate permits nothing.
type shutGate struct{}

func (shutGate) Enter() (context.Context, uint64, func(), bool) { return nil, 0, nil, false }

// memberGate is one member's own open FencedGate, counting its Enters.
type memberGate struct {
	fence  expectations.Fence
	enters atomic.Int64
}

func (g *memberGate) Enter() (context.Context, uint64, func(), bool) {
	ctx, f, done, ok := g.EnterFenced()
	return ctx, f.Epoch, done, ok
}

func (g *memberGate) EnterFenced() (context.Context, expectations.Fence, func(), bool) {
	g.enters.Add(1)
	return context.Background(), g.fence, func() {}, true
}

// statusCalls records Options.MemberStatusChanged calls.
type statusCalls struct {
	mu    sync.Mutex
	calls []string
}

func (s *statusCalls) changed(k fedref.MemberObject, hub v1alpha1.HubReference) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, fmt.Sprintf("%s/%s/%s hub=%s/%s", k.Cluster, k.Namespace, k.Name, hub.Namespace, hub.Name))
}

func (s *statusCalls) has(call string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.calls, call)
}

func (s *statusCalls) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("calls %v", s.calls)
}

// TestIntegrationMemberGate: with GateFor every member's worker writes
// through the member's own gate (here open while Options.Gate is shut),
// under its fence; the status the worker writes to a MemberReplicaSet
// reaches MemberStatusChanged with its key and hub reference.
func TestIntegrationMemberGate(t *testing.T) {
	gate := &memberGate{fence: expectations.Fence{Owner: "r1", Epoch: 7}}
	var mu sync.Mutex
	var asked []string
	status := &statusCalls{}
	e := startEnv(t, envOpts{gate: shutGate{}, statusChanged: status.changed, gateFor: func(cluster string) engine.Gate {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, cluster)
		return gate
	}})
	e.set("gated", 2)
	e.converged("gated", 2)
	mu.Lock()
	if !slices.Equal(asked, []string{member}) {
		t.Errorf("GateFor asked for %v, want [%s]", asked, member)
	}
	mu.Unlock()
	if gate.enters.Load() == 0 {
		t.Error("the member's gate was never entered")
	}
	e.store.mu.Lock()
	if len(e.store.fences) == 0 || e.store.fences[0] != gate.fence {
		t.Errorf("creations asked under fences %v, want %+v", e.store.fences, gate.fence)
	}
	e.store.mu.Unlock()
	want := fmt.Sprintf("%s/%s/gated hub=%s/gated", member, e.ns, e.ns)
	e.eventually("the status change reported", 30*time.Second, func() (bool, string) {
		return status.has(want), status.String()
	})
}

// TestIntegrationEnqueueMember: EnqueueMember syncs every MemberReplicaSet
// of the member, so a target changed without an enqueue (as when another
// replica wrote it while this one did not own the member) is acted on.
func TestIntegrationEnqueueMember(t *testing.T) {
	e := startEnv(t, envOpts{})
	e.set("owned", 1)
	e.converged("owned", 1)
	k := e.key("owned")
	e.src.Set(k, testworkload.Workload(k, 2))
	if err := e.mgr.EnqueueMember(context.Background(), member); err != nil {
		t.Fatal(err)
	}
	e.converged("owned", 2)
	if err := e.mgr.EnqueueMember(context.Background(), "not-engaged"); err != nil {
		t.Fatalf("a member not engaged: %v", err)
	}
}
