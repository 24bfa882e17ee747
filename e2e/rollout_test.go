package e2e

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// rolloutSampler checks, every interval, the pods of a rolling
// FederatedReplicaSet in every member: never more than maxPods in the fleet
// nor perMember in a member, never fewer than minReady Ready pods (pods are
// Available once Ready: minReadySeconds is 0).
type rolloutSampler struct {
	e                          *env
	name                       string
	maxPods, perMember, minRdy int
	stop, done                 chan struct{}
	mu                         sync.Mutex
	samples, mostPods, fewest  int
	violations                 []string
}

func (e *env) startRolloutSampler(name string, maxPods, perMember, minReady int) *rolloutSampler {
	s := &rolloutSampler{e: e, name: name, maxPods: maxPods, perMember: perMember, minRdy: minReady,
		stop: make(chan struct{}), done: make(chan struct{}), fewest: 1 << 30}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *rolloutSampler) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := time.Now().Format("15:04:05.000")
	pods, ready, seen := 0, 0, 0
	for _, m := range allMembers {
		c, err := s.e.count(ctx, m, s.name)
		if err != nil {
			continue
		}
		seen++
		pods += c.active
		ready += c.ready
		if c.active > s.perMember {
			s.violations = append(s.violations, fmt.Sprintf("%s %s runs %d pods > %d", now, m, c.active, s.perMember))
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.samples++
	s.mostPods = max(s.mostPods, pods)
	if pods > s.maxPods {
		s.violations = append(s.violations, fmt.Sprintf("%s fleet runs %d pods > %d", now, pods, s.maxPods))
	}
	if seen == len(allMembers) {
		s.fewest = min(s.fewest, ready)
		if ready < s.minRdy {
			s.violations = append(s.violations, fmt.Sprintf("%s fleet has %d Ready pods < %d", now, ready, s.minRdy))
		}
	}
}

func (s *rolloutSampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	logf(t, "sampled %d times every 100ms: most pods %d (bound %d), fewest Ready %d (bound %d)", s.samples, s.mostPods, s.maxPods, s.fewest, s.minRdy)
	for i, v := range s.violations {
		if i == 20 {
			t.Errorf("... %d more violations", len(s.violations)-20)
			break
		}
		t.Errorf("bound exceeded: %s", v)
	}
}

// rollingSpec is a 6-replica FederatedReplicaSet over the three members
// (2 each) with maxSurge 1 and maxUnavailable unavailable, and the edit
// that sets its update strategy.
func rollingSpec(name string, unavailable int32, strategy v1alpha1.UpdateStrategy) (frsSpec, func(*v1alpha1.FederatedReplicaSet)) {
	s := frsSpec{name: name, replicas: 6,
		clusters: []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)},
		budget:   v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(1)), MaxUnavailable: ptr.To(intstr.FromInt32(unavailable))},
		// Pending pods of a bad template must not move replicas away, nor
		// a member's short outage.
		failover: v1alpha1.Failover{UnschedulableThreshold: v1alpha1.DurationOf(time.Hour), UnreachableGracePeriod: v1alpha1.DurationOf(10 * time.Minute)},
	}
	return s, func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy = &strategy }
}

// editFRS applies edit to the hub object, retrying on conflicts.
func (e *env) editFRS(name string, edit func(*v1alpha1.FederatedReplicaSet)) {
	e.t.Helper()
	ctx := context.Background()
	for range 10 {
		f := e.getFRS(name)
		edit(f)
		err := e.f.HubClient.Update(ctx, f)
		if err == nil {
			return
		}
		if !apierrors.IsConflict(err) {
			e.t.Fatalf("updating %s: %v", name, err)
		}
	}
	e.t.Fatalf("updating %s: conflicts", name)
}

// waitPhase waits for status.rollout.phase and returns the object.
func (e *env) waitPhase(name string, phase v1alpha1.RolloutPhase, timeout time.Duration) *v1alpha1.FederatedReplicaSet {
	e.t.Helper()
	var last *v1alpha1.FederatedReplicaSet
	ok := tryPoll(timeout, func(ctx context.Context) (bool, error) {
		f := &v1alpha1.FederatedReplicaSet{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, f); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		last = f
		return f.Status.Rollout != nil && f.Status.Rollout.Phase == phase, nil
	})
	if !ok {
		ro := "none"
		if last != nil && last.Status.Rollout != nil {
			ro = fmt.Sprintf("%+v", *last.Status.Rollout)
		}
		e.t.Fatalf("%s: rollout phase %s not reached within %s; rollout status %s", name, phase, timeout, ro)
	}
	return last
}

// podsByHash counts the active pods of name per template-hash label ("" for
// pods without it) over the members.
func (e *env) podsByHash(name string) map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, m := range allMembers {
		ps, err := e.pods(context.Background(), m, name)
		if err != nil {
			e.t.Fatal(err)
		}
		for i := range ps {
			if ps[i].DeletionTimestamp == nil {
				out[ps[i].Labels[v1alpha1.LabelTemplateHash]]++
			}
		}
	}
	return out
}

// TestRolloutCanaryPromote rolls a new template over three members: one
// canary pod in member-c, baked, waiting for the promote annotation (the
// raft leader is stopped with SIGTERM while it waits, and the new leader
// continues the stage), then every member, with member-a's API server
// stopped when that stage starts: the rollout cannot complete while
// member-a is away, and completes once it is back. Sampled every
// 100 ms, the fleet never runs more than replicas + maxSurge pods nor
// (while every member answers) fewer than replicas - maxUnavailable Ready
// ones.
func TestRolloutCanaryPromote(t *testing.T) {
	e := newEnv(t, "e2e-rollout")
	const name = "web"
	spec, rolling := rollingSpec(name, 0, v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, ProgressDeadlineSeconds: ptr.To[int32](120),
		Stages: []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{memberC}, Canary: ptr.To(intstr.FromInt32(1)),
			BakeTime: v1alpha1.DurationOf(3 * time.Second), Promotion: v1alpha1.PromotionManual}}})
	e.create(spec)
	e.editFRS(name, rolling)
	e.waitSplit(name, split{memberA: 2, memberB: 2, memberC: 2})
	first := e.waitPhase(name, v1alpha1.PhaseComplete, waitTimeout)
	logf(t, "first revision %s (revision %d)", first.Status.CurrentRevision, first.Status.Revision)

	s := e.startRolloutSampler(name, 7, 3, 6)
	e.editFRS(name, func(f *v1alpha1.FederatedReplicaSet) {
		if f.Spec.Template.Annotations == nil {
			f.Spec.Template.Annotations = map[string]string{}
		}
		f.Spec.Template.Annotations["e2e.replicafed.io/version"] = "2"
	})
	waiting := e.waitPhase(name, v1alpha1.PhaseAwaitingPromotion, waitTimeout)
	update := waiting.Status.UpdateRevision
	rec := waiting.Status.Rollout
	logf(t, "canary baked: update %s, stage %s started %s", update, rec.StageName, rec.StageStartTime)
	hash := update[len(name)+1:]
	if got := e.podsByHash(name)[hash]; got != 1 {
		t.Fatalf("canary: %d pods of %s, want 1", got, update)
	}

	// SIGTERM the leader while the stage waits for its promotion.
	ctx := context.Background()
	if err := e.f.WaitAllReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("fleet not ready before the handover: %v", err)
	}
	old, err := e.f.WaitLeader(ctx, time.Minute)
	if err != nil {
		t.Fatalf("no raft leader: %v", err)
	}
	t.Cleanup(func() { restartReplica(t, e.f, old) })
	graceful := old.Terminate(15 * time.Second)
	logf(t, "stopped leader %s with SIGTERM (graceful %v)", old.ID, graceful)
	if _, err := e.f.WaitLeader(ctx, time.Minute); err != nil {
		t.Fatalf("no new leader: %v", err)
	}
	restartReplica(t, e.f, old)
	// The stage's state lives in raft. A new leader without it would take
	// the template for a first revision: the end state below (every pod on
	// the update revision's hash, the adopted object gone) would not hold.
	after := e.getFRS(name)
	if after.Status.Rollout == nil || after.Status.Rollout.Phase != v1alpha1.PhaseAwaitingPromotion ||
		!after.Status.Rollout.StageStartTime.Equal(rec.StageStartTime) {
		t.Fatalf("after the handover: rollout %+v, want still AwaitingPromotion from %s", after.Status.Rollout, rec.StageStartTime)
	}

	a := e.f.Member(memberA)
	if err := a.StopAPIServer(); err != nil {
		t.Fatalf("stopping %s's API server: %v", memberA, err)
	}
	away := true
	t.Cleanup(func() {
		if away {
			e.dumpIfFailed()
			if err := a.StartAPIServer(context.Background()); err != nil {
				t.Errorf("cleanup: starting %s's API server: %v", memberA, err)
			}
		}
	})
	logf(t, "stopped %s's API server", memberA)
	e.editFRS(name, func(f *v1alpha1.FederatedReplicaSet) {
		if f.Annotations == nil {
			f.Annotations = map[string]string{}
		}
		f.Annotations[v1alpha1.AnnotationPromote] = "canary"
	})
	// With maxUnavailable 0, member-a's pods count as pods but not as
	// Available while it is away: the fleet may add a surge pod but delete
	// none, so the stage waits for member-a.
	e.poll("the last stage started with member-a unreachable", func(ctx context.Context) (bool, error) {
		f := &v1alpha1.FederatedReplicaSet{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, f); err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		unreachable := false
		for _, c := range f.Status.Clusters {
			unreachable = unreachable || (c.Name == memberA && c.Health == v1alpha1.ClusterUnreachable)
		}
		return unreachable && f.Status.Rollout != nil && f.Status.Rollout.StageName != "canary", nil
	})
	if ro := e.getFRS(name).Status.Rollout; ro == nil || ro.Phase == v1alpha1.PhaseComplete {
		t.Fatalf("rollout %+v while %s is away, want it not complete", ro, memberA)
	}
	if err := a.StartAPIServer(ctx); err != nil {
		t.Fatalf("starting %s's API server: %v", memberA, err)
	}
	away = false
	logf(t, "started %s's API server again", memberA)
	done := e.waitPhase(name, v1alpha1.PhaseComplete, 3*waitTimeout)
	if done.Status.CurrentRevision != update {
		t.Fatalf("complete with current revision %s, want %s", done.Status.CurrentRevision, update)
	}
	e.poll("every pod on the new revision and the old objects gone", func(ctx context.Context) (bool, error) {
		if got := e.podsByHash(name); got[hash] != 6 || len(got) != 1 {
			return false, nil
		}
		for _, m := range allMembers {
			err := e.memberClient(m).Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &v1alpha1.MemberReplicaSet{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	s.finish(t)
}

// TestRolloutBadTemplateRollsBack rolls out a template whose pods never
// turn Ready (they select no node). No member has room for a surge pod of
// it, so with maxUnavailable 1 the canary replaces an old pod in member-c
// and stays Pending; the stage makes no progress within
// progressDeadlineSeconds and, with onFailure Rollback, the fleet returns
// to the stable revision by itself, never below replicas - 1 Ready.
func TestRolloutBadTemplateRollsBack(t *testing.T) {
	e := newEnv(t, "e2e-rollback")
	const name = "bad"
	spec, rolling := rollingSpec(name, 1, v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, OnFailure: v1alpha1.FailureRollback,
		ProgressDeadlineSeconds: ptr.To[int32](20),
		Stages:                  []v1alpha1.RolloutStage{{Name: "canary", Clusters: []string{memberC}, Canary: ptr.To(intstr.FromInt32(1))}}})
	e.create(spec)
	e.editFRS(name, rolling)
	e.waitSplit(name, split{memberA: 2, memberB: 2, memberC: 2})
	stable := e.waitPhase(name, v1alpha1.PhaseComplete, waitTimeout).Status.CurrentRevision

	s := e.startRolloutSampler(name, 7, 3, 5)
	e.editFRS(name, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Template.Spec.NodeSelector = map[string]string{"e2e.replicafed.io/no-such-node": "true"}
	})
	e.poll("the canary pod, Pending in member-c", func(ctx context.Context) (bool, error) {
		f := &v1alpha1.FederatedReplicaSet{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, f); err != nil || f.Status.UpdateRevision == stable || f.Status.UpdateRevision == "" {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		ps, err := e.pods(ctx, memberC, name)
		if err != nil {
			return false, nil //nolint:nilerr // retried until the timeout
		}
		for i := range ps {
			if ps[i].Labels[v1alpha1.LabelTemplateHash] == f.Status.UpdateRevision[len(name)+1:] && ps[i].Status.Phase == corev1.PodPending {
				logf(t, "canary pod %s of %s Pending in %s", ps[i].Name, f.Status.UpdateRevision, memberC)
				return true, nil
			}
		}
		return false, nil
	})
	back := e.waitPhase(name, v1alpha1.PhaseRolledBack, 3*waitTimeout)
	if back.Status.CurrentRevision != stable || back.Status.Rollout.FailedRevision == "" {
		t.Fatalf("rolled back to %s (failed %q), want %s", back.Status.CurrentRevision, back.Status.Rollout.FailedRevision, stable)
	}
	e.poll("only the stable revision's pods", func(context.Context) (bool, error) {
		got := e.podsByHash(name)
		n := 0
		for _, v := range got {
			n += v
		}
		return n == 6 && len(got) == 1, nil
	})
	s.finish(t)
	var pending []string
	for _, m := range allMembers {
		ps, _ := e.pods(context.Background(), m, name)
		for i := range ps {
			if ps[i].Status.Phase == corev1.PodPending {
				pending = append(pending, m+"/"+ps[i].Name)
			}
		}
	}
	if len(pending) > 0 {
		t.Errorf("pods still Pending after the rollback: %v", pending)
	}
}
