package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/federation/planner"
)

// shardLease and shardMargin are the sharded fleet's owner lease and drift
// allowance: a member moves from a dead owner within lease + margin of its
// last renewal.
const (
	shardLease  = 3 * time.Second
	shardMargin = time.Second
)

// TestShardedOwnerDisruptionMidScale runs a fleet with sharding on: every
// member is owned by one replica, which writes its pods under its owner
// lease, leader or not. Twice it scales a FederatedReplicaSet up by 150
// over three members and disrupts the owner of one member that does not
// lead raft as soon as that member has a new pod: first SIGKILL, then
// SIGSTOP until the member has moved and SIGCONT (the resumed owner finds
// its lease lapsed and must not write). Pods are sampled every 100ms: no
// member may run more than its target plus maxSurge. Each time the member
// must move to another replica at a higher epoch, the fleet must finish
// at exactly a third per member, and no pod may be created twice.
func TestShardedOwnerDisruptionMidScale(t *testing.T) {
	if testing.Short() {
		t.Skip("e2e needs real control planes; skipped with -short")
	}
	e := newShardedEnv(t, "e2e-sharding")
	ctx := context.Background()
	const name = "sharded"
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	adds := e.evenAtZero(wctx, name)
	replicas := 0
	for _, d := range []ownerDisruption{
		{name: "SIGKILL", hit: func(r *fleet.Replica) error { r.Kill(); return nil }},
		{name: "SIGSTOP", hit: (*fleet.Replica).Pause, after: (*fleet.Replica).Resume},
	} {
		replicas += 150
		e.disruptOwnerMidScale(name, int32(replicas), d, adds)
	}
	stopWatch()
	e.freeFromUsage()
	adds.mu.Lock()
	defer adds.mu.Unlock()
	switch {
	case len(adds.uids) > replicas:
		t.Errorf("%d distinct pods were created for %d replicas: a create was made twice across a handover", len(adds.uids), replicas)
	case len(adds.uids) < replicas:
		t.Errorf("the pod watches saw %d distinct pods created for %d replicas running: they missed creations", len(adds.uids), replicas)
	}
}

// freeFromUsage checks the capacity of every member as the raft leader
// writes it in the MemberCluster status: free pods must be the nodes'
// allocatable pods less the member's bound pods. With
// sharding.ownedPodsOnly (the default) the leader caches the pods of its
// own members only, so for the others this figure comes from the usage
// their owners publish through raft.
func (e *env) freeFromUsage() {
	t := e.t
	ctx := context.Background()
	leader, err := e.f.WaitLeader(ctx, time.Minute)
	if err != nil {
		t.Fatalf("no raft leader: %v", err)
	}
	owners := waitOwned(t, e.f, everyMemberOwned)
	var got string
	matched := tryPoll(waitTimeout, func(ctx context.Context) (bool, error) {
		got = ""
		ok := true
		for _, m := range allMembers {
			pods := &corev1.PodList{}
			if err := e.f.MemberClients[m].List(ctx, pods); err != nil {
				return false, nil
			}
			bound := int64(0)
			for i := range pods.Items {
				if p := &pods.Items[i]; p.Spec.NodeName != "" && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					bound++
				}
			}
			mc := &v1alpha1.MemberCluster{}
			if err := e.f.HubClient.Get(ctx, client.ObjectKey{Name: m}, mc); err != nil {
				return false, nil
			}
			alloc, free := mc.Status.Allocatable[corev1.ResourcePods], mc.Status.Free[corev1.ResourcePods]
			got += fmt.Sprintf(" %s (owner %s): allocatable %s free %s bound %d;", m, owners[m].Owner, alloc.String(), free.String(), bound)
			ok = ok && mc.Status.Nodes > 0 && !alloc.IsZero() && alloc.Value()-bound == free.Value()
		}
		return ok, nil
	})
	if !matched {
		t.Fatalf("leader %s: the free pods of a MemberCluster do not match its bound pods:%s", leader.ID, got)
	}
	logf(t, "leader %s; MemberCluster capacity:%s", leader.ID, got)
}

// ownerDisruption is what happens to a member's owner mid scale-up: hit
// as soon as the member has a new pod, after (optional) once the member
// has moved.
type ownerDisruption struct {
	name  string
	hit   func(*fleet.Replica) error
	after func(*fleet.Replica) error
}

// disruptOwnerMidScale scales FederatedReplicaSet name to replicas (spread
// evenly over the three members), disrupts the owner of a member that
// does not lead raft when that member has a new pod, waits for the member
// to move and for the fleet to converge, and checks the sampled bounds.
func (e *env) disruptOwnerMidScale(name string, replicas int32, d ownerDisruption, adds *podAdds) {
	t := e.t
	ctx := context.Background()
	owners := waitOwned(t, e.f, atLeastTwoOwners)
	leader, err := e.f.WaitLeader(ctx, time.Minute)
	if err != nil {
		t.Fatalf("no raft leader: %v", err)
	}
	victim, victimID, member := ownerToKill(ctx, e.f, owners, leader)
	if victim == nil {
		t.Fatalf("no member is owned by a replica other than the leader %s: %v", leader.ID, owners)
	}
	t.Cleanup(func() { _ = victim.Resume(); restartReplica(t, e.f, victim) })
	before := e.podCount(ctx, member, name)
	surge, _ := planner.ResolveBudget(v1alpha1.MoveBudget{}, replicas)
	bound, want := split{}, split{}
	for _, m := range allMembers {
		want[m] = int(replicas) / len(allMembers)
		bound[m] = want[m] + int(surge)
	}
	s := e.startSampler(name, 100*time.Millisecond, bound, int(replicas)+int(surge))
	scaled := e.scaleTo(name, replicas)
	hit := e.onNewPod(member, name, before, func() error { return d.hit(victim) })
	logf(t, "%s to owner %s of %s %s after the scale to %d", d.name, victim.ID, member, hit.Sub(scaled).Round(time.Millisecond), replicas)
	moved := waitOwned(t, e.f, func(table map[string]fleet.Owner) bool {
		o := table[member]
		return o.Owner != "" && o.Owner != victimID && o.Epoch > owners[member].Epoch
	})
	logf(t, "figure: %s: %s moved to %s (epoch %d -> %d), seen %s after it", d.name, member, moved[member].Owner,
		owners[member].Epoch, moved[member].Epoch, time.Since(hit).Round(time.Millisecond))
	if d.after != nil {
		if err := d.after(victim); err != nil {
			t.Fatalf("after %s of %s: %v", d.name, victim.ID, err)
		}
	}
	e.waitSplit(name, want)
	converged := time.Now()
	s.finish(t)
	logf(t, "figure: %s: scale to %d converged %s after the scale, %s after the %s", d.name, replicas,
		converged.Sub(scaled).Round(10*time.Millisecond), converged.Sub(hit).Round(10*time.Millisecond), d.name)
	restartReplica(t, e.f, victim)
}

// newShardedEnv starts a fleet of its own with sharding on (three members,
// three replicas) and creates namespace ns in the hub and every member.
func newShardedEnv(t *testing.T, ns string) *env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	f, err := fleet.New(ctx, fleet.Options{
		Members: allMembers, Log: t.Logf,
		Config: map[string]any{"sharding": map[string]any{
			"enabled": true, "lease": shardLease.String(), "margin": shardMargin.String(),
		}},
	})
	if err != nil {
		t.Fatalf("starting the sharded fleet: %v", err)
	}
	t.Cleanup(f.Stop)
	logf(t, "sharded fleet started in %s", time.Since(start).Round(time.Millisecond))
	e := &env{t: t, f: f, ns: ns}
	for _, c := range append([]client.Client{f.HubClient}, e.members()...) {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	t.Cleanup(e.dumpIfFailed)
	return e
}

// waitOwned polls the replicas' admin status until the committed ownership
// table, as one replica reports it, names an owner for every member and
// satisfies ok, and returns that table.
func waitOwned(t *testing.T, f *fleet.Fleet, ok func(table map[string]fleet.Owner) bool) map[string]fleet.Owner {
	t.Helper()
	var got map[string]fleet.Owner
	var last string
	done := tryPoll(waitTimeout, func(ctx context.Context) (bool, error) {
		for _, r := range f.Replicas {
			if !r.Running() {
				continue
			}
			st, err := r.Status(ctx)
			if err != nil {
				last = err.Error()
				continue
			}
			last = fmt.Sprintf("%s reports %v", r.ID, st.Owners)
			if everyMemberOwned(st.Owners) && ok(st.Owners) {
				got = st.Owners
				return true, nil
			}
		}
		return false, nil
	})
	if !done {
		t.Fatalf("member ownership not as wanted within %s: %s", waitTimeout, last)
	}
	return got
}

// everyMemberOwned reports whether table names an owner for every member.
func everyMemberOwned(table map[string]fleet.Owner) bool {
	for _, m := range allMembers {
		if table[m].Owner == "" {
			return false
		}
	}
	return true
}

// atLeastTwoOwners holds once the members are spread over two replicas or
// more, as the assignment balances them over the live replicas.
func atLeastTwoOwners(table map[string]fleet.Owner) bool { return distinctOwners(table) >= 2 }

// distinctOwners counts the replicas that own at least one member.
func distinctOwners(owners map[string]fleet.Owner) int {
	var ids []string
	for _, o := range owners {
		if !slices.Contains(ids, o.Owner) {
			ids = append(ids, o.Owner)
		}
	}
	return len(ids)
}

// ownerToKill picks a member whose owner is not the raft leader, and that
// owner with its raft server ID (the table names owners by it), so the
// kill tests a member handover and not a leader election.
func ownerToKill(ctx context.Context, f *fleet.Fleet, owners map[string]fleet.Owner, leader *fleet.Replica) (*fleet.Replica, string, string) {
	ids := map[string]*fleet.Replica{}
	for _, r := range f.Replicas {
		if st, err := r.Status(ctx); err == nil && r != leader {
			ids[st.ID] = r
		}
	}
	for _, m := range allMembers {
		if r, ok := ids[owners[m].Owner]; ok {
			return r, owners[m].Owner, m
		}
	}
	return nil, "", ""
}

// scaleTo sets the scale subresource of FederatedReplicaSet name and
// returns when it did.
func (e *env) scaleTo(name string, replicas int32) time.Time {
	e.t.Helper()
	frs := e.getFRS(name)
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	at := time.Now()
	if err := e.f.HubClient.SubResource("scale").Update(context.Background(), frs, client.WithSubResourceBody(sc)); err != nil {
		e.t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
	return at
}

// podCount is how many pods of FederatedReplicaSet name member runs now.
func (e *env) podCount(ctx context.Context, member, name string) int {
	e.t.Helper()
	ps, err := e.pods(ctx, member, name)
	if err != nil {
		e.t.Fatalf("listing pods of %s in %s: %v", name, member, err)
	}
	return len(ps)
}

// onNewPod calls hit as soon as member runs more than before pods of
// FederatedReplicaSet name, and returns when it did.
func (e *env) onNewPod(member, name string, before int, hit func() error) time.Time {
	e.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		if ps, err := e.pods(context.Background(), member, name); err == nil && len(ps) > before {
			if err := hit(); err != nil {
				e.t.Fatalf("disrupting the owner of %s: %v", member, err)
			}
			return time.Now()
		}
		time.Sleep(10 * time.Millisecond)
	}
	e.t.Fatalf("no new pod of %s appeared in %s within a minute of the scale", name, member)
	return time.Time{}
}
