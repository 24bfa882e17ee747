package kind

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
)

// TestFailover freezes member-b's node container (docker pause: its API
// server, kubelet and pods stop answering, its address and state are kept,
// as for a member cut off by a network fault) past the failover grace
// period: member-a takes every replica, and once member-b answers again the
// replicas move back (moveBack OnRecovery).
func TestFailover(t *testing.T) {
	e := newEnv(t, "kind-failover")
	const name = "failover"
	e.create(frsSpec{name: name, replicas: 4, placement: both, failover: v1alpha1.Failover{
		UnreachableGracePeriod: v1alpha1.DurationOf(20 * time.Second), MoveBack: v1alpha1.MoveBackOnRecovery,
	}})
	e.waitSplit(name, split{memberA: 2, memberB: 2})

	b := e.k.Member(memberB)
	if err := b.StopAPIServer(); err != nil {
		t.Fatalf("pausing %s: %v", memberB, err)
	}
	stopped := time.Now()
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			if err := b.StartAPIServer(context.Background()); err != nil {
				t.Errorf("cleanup: resuming %s: %v", memberB, err)
			}
		}
	})
	logf(t, "paused %s's node container", memberB)
	e.poll(memberA+" running all 4 replicas and the hub reporting "+memberB+" unavailable", func(ctx context.Context) (bool, error) {
		frs := &v1alpha1.FederatedReplicaSet{}
		if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(frs.Status.Conditions, v1alpha1.ConditionClusterUnavailable)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, memberB) {
			return false, nil
		}
		n, err := e.count(ctx, memberA, name)
		return err == nil && n.active == 4 && n.ready == 4, nil
	})
	logf(t, "%s ran all 4 replicas %s after %s was paused", memberA, time.Since(stopped).Round(100*time.Millisecond), memberB)

	if err := b.StartAPIServer(context.Background()); err != nil {
		t.Fatalf("resuming %s: %v", memberB, err)
	}
	restarted = true
	resumed := time.Now()
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	logf(t, "back to 2/2 %s after %s resumed", time.Since(resumed).Round(100*time.Millisecond), memberB)
}

// TestJoinUnjoin: `replicafed unjoin` refuses a member that runs replicas,
// accepts it once placement moved them away (removing its hub Secret), and
// a second `replicafed join` at its internal address brings it back to
// take its share.
func TestJoinUnjoin(t *testing.T) {
	e := newEnv(t, "kind-join")
	ctx := context.Background()
	const name = "joined"
	e.create(frsSpec{name: name, replicas: 2, placement: both})
	e.waitSplit(name, split{memberA: 1, memberB: 1})

	b := e.k.Member(memberB)
	unjoin := []string{"unjoin", memberB, "--member-kubeconfig", b.Kubeconfig(), "--hub-kubeconfig", e.k.Hub.Kubeconfig(), "--namespace", fleet.Namespace}
	t.Cleanup(func() {
		if err := e.k.Join(context.Background(), memberB); err != nil {
			t.Errorf("cleanup: joining %s again: %v", memberB, err)
		}
	})
	out, err := e.k.Replicafed(ctx, unjoin...)
	if err == nil || !strings.Contains(string(out), "still has replicas") {
		t.Fatalf("unjoin while %s runs replicas: %v\n%s\nwant a refusal", memberB, err, out)
	}
	logf(t, "unjoin refused while in use: %s", strings.TrimSpace(string(out)))

	e.setPlacement(name, v1alpha1.Placement{Clusters: both.Clusters[:1]})
	e.waitSplit(name, split{memberA: 2})
	if out, err := e.k.Replicafed(ctx, unjoin...); err != nil {
		t.Fatalf("unjoin: %v\n%s", err, out)
	}
	e.poll(memberB+"'s hub Secret and MemberCluster gone", func(ctx context.Context) (bool, error) {
		sec := apierrors.IsNotFound(e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: memberB}, &corev1.Secret{}))
		mc := apierrors.IsNotFound(e.k.HubClient.Get(ctx, client.ObjectKey{Name: memberB}, &v1alpha1.MemberCluster{}))
		return sec && mc, nil
	})

	if err := e.k.Join(ctx, memberB); err != nil {
		t.Fatal(err)
	}
	e.setPlacement(name, both)
	e.scale(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
}

// setPlacement replaces a FederatedReplicaSet's spec.placement.
func (e *env) setPlacement(name string, p v1alpha1.Placement) {
	e.t.Helper()
	raw, err := json.Marshal(map[string]any{"spec": map[string]any{"placement": p}})
	if err != nil {
		e.t.Fatal(err)
	}
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.k.HubClient.Patch(context.Background(), frs, client.RawPatch("application/merge-patch+json", raw)); err != nil {
		e.t.Fatalf("setting %s's placement: %v", name, err)
	}
}
