package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/hub"
	"github.com/replicafed/replicafed/federation/planner"
)

// TestMemberOutage stops member-c's API server past the failover grace period
// (10s; the fleet probes every 1s with failureThreshold 2) and starts it again.
//
//   - "never" (moveBack Never): 2/2/2 becomes 3/3/0 while c is away, and c's
//     stale pods are deleted when it returns (its target stays 0).
//   - "recover" (moveBack OnRecovery): 3/3/0 while away, back to the ideal
//     2/2/2 after recovery, never above replicas + maxSurge in total.
//   - "held": deleted while c is away; it keeps its finalizer with a Deleting
//     condition naming member-c, and finishes once c is back.
func TestMemberOutage(t *testing.T) {
	e := newEnv(t, "e2e-outage")
	ctx := context.Background()
	grace := v1alpha1.DurationOf(10 * time.Second)
	all := []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)}
	e.create(frsSpec{name: "never", replicas: 6, clusters: all,
		failover: v1alpha1.Failover{UnreachableGracePeriod: grace, MoveBack: v1alpha1.MoveBackNever}})
	e.create(frsSpec{name: "recover", replicas: 6, clusters: all,
		failover: v1alpha1.Failover{UnreachableGracePeriod: grace, MoveBack: v1alpha1.MoveBackOnRecovery}})
	held := e.create(frsSpec{name: "held", replicas: 3, clusters: all})
	e.waitSplit("never", split{memberA: 2, memberB: 2, memberC: 2})
	e.waitSplit("recover", split{memberA: 2, memberB: 2, memberC: 2})
	e.waitSplit("held", split{memberA: 1, memberB: 1, memberC: 1})

	stalePods := map[string]bool{}
	pods, err := e.pods(ctx, memberC, "recover")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		stalePods[string(p.UID)] = true
	}

	c := e.f.Member(memberC)
	stopped := time.Now()
	if err := c.StopAPIServer(); err != nil {
		t.Fatalf("stopping %s's API server: %v", memberC, err)
	}
	t.Cleanup(func() {
		e.dumpIfFailed()
		if err := c.StartAPIServer(context.Background()); err != nil {
			t.Errorf("cleanup: starting %s's API server: %v", memberC, err)
		}
	})
	logf(t, "stopped %s's API server", memberC)

	// While c is away, the reachable members take its share.
	moved := func(name string) func(ctx context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			frs := &v1alpha1.FederatedReplicaSet{}
			if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
				return false, nil
			}
			cond := meta.FindStatusCondition(frs.Status.Conditions, v1alpha1.ConditionClusterUnavailable)
			if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, memberC) {
				return false, nil
			}
			for _, m := range []string{memberA, memberB} {
				n, err := e.count(ctx, m, name)
				if err != nil || n.ready != 3 || n.active != 3 {
					return false, nil
				}
			}
			for _, r := range frs.Status.Clusters {
				if r.Name == memberC && (r.Target != 0 || r.Health != v1alpha1.ClusterUnreachable) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	// Probes every 1s, 2 failures, then 10s of grace: well within 40s of the
	// API server going down (stopping it takes up to 10s of its own).
	deadline := time.Now().Add(40 * time.Second)
	for _, name := range []string{"never", "recover"} {
		if !tryPoll(time.Until(deadline), moved(name)) {
			t.Errorf("%s: share of %s not moved %s after its API server stopped (grace %s): nothing re-plans when the grace period ends; poking the object to go on",
				name, memberC, time.Since(stopped).Round(time.Second), *grace)
			e.poke(name)
			e.poll(name+": share moved to reachable members after a poke", moved(name))
		}
		logf(t, "figure: %s: reachable members run all 6 replicas Ready %s after the API server stopped",
			name, time.Since(stopped).Round(10*time.Millisecond))
	}

	// Deleting while c is away: a and b are cleaned, c holds the finalizer.
	if err := e.f.HubClient.Delete(ctx, held); err != nil {
		t.Fatal(err)
	}
	e.poll("held: deletion waits for member-c", func(ctx context.Context) (bool, error) {
		frs := &v1alpha1.FederatedReplicaSet{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(held), frs); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(frs.Status.Conditions, hub.ConditionDeleting)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, "unreachable members: "+memberC) {
			return false, nil
		}
		for _, m := range []string{memberA, memberB} {
			ps, err := e.pods(ctx, m, "held")
			if err != nil || len(ps) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(3 * time.Second)
	if frs := e.getFRS("held"); !contains(frs.Finalizers, v1alpha1.FinalizerCascade) {
		t.Errorf("held: finalizer released while %s is unreachable: %v", memberC, frs.Finalizers)
	}

	// Recovery, sampled: "recover" moves back within replicas + maxSurge.
	surge, _ := planner.ResolveBudget(v1alpha1.MoveBudget{}, 6)
	s := e.startSampler("recover", 100*time.Millisecond, split{}, 6+int(surge))
	restarted := time.Now()
	if err := c.StartAPIServer(ctx); err != nil {
		t.Fatalf("starting %s's API server: %v", memberC, err)
	}
	logf(t, "started %s's API server after %s away", memberC, restarted.Sub(stopped).Round(10*time.Millisecond))

	e.waitSplit("never", split{memberA: 3, memberB: 3})
	took := time.Since(restarted)
	logf(t, "figure: never: stale pods in %s reconciled to 0 %s after its API server returned", memberC, took.Round(10*time.Millisecond))
	// Probes run every second; a returning member should be reconciled within
	// seconds, not after its informers' reconnect backoff.
	if took > 30*time.Second {
		t.Errorf("never: %s was reconciled %s after its API server returned, want under 30s", memberC, took.Round(time.Second))
	}
	e.waitSplit("recover", split{memberA: 2, memberB: 2, memberC: 2})
	logf(t, "figure: recover: back to 2/2/2 %s after the API server returned", time.Since(restarted).Round(10*time.Millisecond))
	s.finish(t)
	pods, err = e.pods(ctx, memberC, "recover")
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, p := range pods {
		if stalePods[string(p.UID)] {
			kept++
		}
	}
	logf(t, "recover: %d of %d pods from before the outage still run in %s", kept, len(stalePods), memberC)

	for _, name := range []string{"never", "recover"} {
		frs := e.getFRS(name)
		if cond := meta.FindStatusCondition(frs.Status.Conditions, v1alpha1.ConditionClusterUnavailable); cond != nil && cond.Status == metav1.ConditionTrue {
			t.Errorf("%s: ClusterUnavailable still True after recovery: %+v", name, cond)
		}
	}
	e.poll("held: deletion finished in member-c", func(ctx context.Context) (bool, error) {
		err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(held), &v1alpha1.FederatedReplicaSet{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		ps, err := e.pods(ctx, memberC, "held")
		return err == nil && len(ps) == 0, nil
	})
}
