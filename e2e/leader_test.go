package e2e

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/federation/planner"
)

// podAdds records when each pod of a FederatedReplicaSet was first seen,
// from a watch per member (finer than creationTimestamp's one second).
type podAdds struct {
	mu    sync.Mutex
	first map[string]time.Time // member/name -> first seen
	uids  map[string]bool
}

// watch records the pods of name in member from now until ctx ends. The
// watch resumes from the last resource version it saw when the API server
// closes it (under load a slow watcher is dropped), so no creation is
// missed.
func (a *podAdds) watch(ctx context.Context, t *testing.T, e *env, member, name string) {
	cs, err := kubernetes.NewForConfig(e.f.Member(member).Config())
	if err != nil {
		t.Fatal(err)
	}
	sel := selector(name).String()
	pods := cs.CoreV1().Pods(e.ns)
	list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		t.Fatalf("listing pods in %s: %v", member, err)
	}
	for i := range list.Items {
		a.add(member, &list.Items[i])
	}
	lw := &cache.ListWatch{WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		o.LabelSelector = sel
		return pods.Watch(ctx, o)
	}}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, lw)
	if err != nil {
		t.Fatalf("watching pods in %s: %v", member, err)
	}
	go func() {
		defer w.Stop()
		for ev := range w.ResultChan() {
			if p, ok := ev.Object.(*corev1.Pod); ok && ev.Type == watch.Added {
				a.add(member, p)
			}
		}
	}()
}

// add records p of member as seen now.
func (a *podAdds) add(member string, p *corev1.Pod) {
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, seen := a.first[member+"/"+p.Name]; !seen {
		a.first[member+"/"+p.Name] = now
	}
	a.uids[string(p.UID)] = true
}

// evenAtZero creates FederatedReplicaSet name at zero replicas, spread
// evenly over the three members, waits until the hub reports it, and
// records its pod creations in every member until ctx ends.
func (e *env) evenAtZero(ctx context.Context, name string) *podAdds {
	e.t.Helper()
	e.create(frsSpec{name: name, replicas: 0, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1),
	}})
	e.waitSplit(name, split{})
	adds := &podAdds{first: map[string]time.Time{}, uids: map[string]bool{}}
	for _, m := range allMembers {
		adds.watch(ctx, e.t, e, m, name)
	}
	return adds
}

// TestLeaderKillMidScale scales a FederatedReplicaSet from 0 to 60 and kills
// the raft leader (SIGKILL) as soon as the first pods exist. Pods per member
// are sampled every 100ms throughout: no member may run more than its target
// plus maxSurge and the fleet no more than replicas plus maxSurge. The new
// leader must finish the scale to exactly 20/20/20 without duplicate creates.
func TestLeaderKillMidScale(t *testing.T) {
	e := newEnv(t, "e2e-leader")
	ctx := context.Background()
	const name = "burst"
	const replicas = 60
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	adds := e.evenAtZero(wctx, name)
	surge, _ := planner.ResolveBudget(v1alpha1.MoveBudget{}, replicas)
	target := replicas / len(allMembers)
	bound := split{}
	for _, m := range allMembers {
		bound[m] = target + int(surge)
	}
	s := e.startSampler(name, 100*time.Millisecond, bound, replicas+int(surge))

	// Under load an election may be under way, or a replica an earlier test
	// restarted may still be joining: killing the leader then would leave
	// no quorum. Wait for all three under one leader.
	if err := e.f.WaitAllReady(ctx, 2*time.Minute); err != nil {
		t.Fatalf("fleet not ready before the scale: %v", err)
	}
	old, err := e.f.WaitLeader(ctx, time.Minute)
	if err != nil {
		t.Fatalf("no raft leader before the scale: %v", err)
	}
	t.Cleanup(func() { restartReplica(t, e.f, old) })
	frs := e.getFRS(name)
	sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: replicas}}
	scaled := time.Now()
	if err := e.f.HubClient.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(sc)); err != nil {
		t.Fatalf("scaling to %d: %v", replicas, err)
	}

	// Kill the leader as soon as the first pod exists.
	var killed time.Time
	deadline := time.Now().Add(time.Minute)
	for killed.IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("no pod appeared within a minute of the scale")
		}
		total := 0
		for _, m := range allMembers {
			ps, err := e.pods(ctx, m, name)
			if err == nil {
				total += len(ps)
			}
		}
		if total > 0 {
			old.Kill()
			killed = time.Now()
			logf(t, "killed leader %s (SIGKILL) %s after the scale, with %d pods created", old.ID, killed.Sub(scaled).Round(time.Millisecond), total)
		} else {
			time.Sleep(10 * time.Millisecond)
		}
	}
	var elected time.Time
	var leader *fleet.Replica
	for time.Since(killed) < 30*time.Second {
		if leader = e.f.Leader(ctx); leader != nil {
			elected = time.Now()
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if leader == nil {
		t.Fatal("no new leader within 30s of the kill")
	}
	logf(t, "figure: new leader %s seen %s after the kill", leader.ID, elected.Sub(killed).Round(time.Millisecond))

	want := split{}
	for _, m := range allMembers {
		want[m] = target
	}
	e.waitSplit(name, want)
	converged := time.Now()
	s.finish(t)
	stopWatch()

	adds.mu.Lock()
	defer adds.mu.Unlock()
	var before, inflight, after []time.Time
	// Creates the killed process had already sent land within a few ms of the
	// kill; the new leader cannot act before an election (heartbeat timeout 1s).
	const inflightWindow = 300 * time.Millisecond
	for _, at := range adds.first {
		switch {
		case at.Before(killed):
			before = append(before, at)
		case at.Before(killed.Add(inflightWindow)):
			inflight = append(inflight, at)
		default:
			after = append(after, at)
		}
	}
	sort.Slice(after, func(i, j int) bool { return after[i].Before(after[j]) })
	logf(t, "pods seen: %d before the kill, %d within %s after it, %d later", len(before), len(inflight), inflightWindow, len(after))
	if len(after) > 0 {
		logf(t, "figure: kill -> first pod created by the new leader: %s (new leader seen at %s)",
			after[0].Sub(killed).Round(time.Millisecond), elected.Sub(killed).Round(time.Millisecond))
	}
	logf(t, "figure: scale 0 -> %d with a leader kill converged %s after the scale, %s after the kill",
		replicas, converged.Sub(scaled).Round(10*time.Millisecond), converged.Sub(killed).Round(10*time.Millisecond))
	switch {
	case len(adds.uids) > replicas:
		t.Errorf("%d distinct pods were created for %d replicas: the new leader duplicated creates", len(adds.uids), replicas)
	case len(adds.uids) < replicas:
		t.Errorf("the pod watches saw %d distinct pods created for %d replicas running: they missed creations", len(adds.uids), replicas)
	}
}

// restartReplica starts a killed replica again and waits until it answers.
func restartReplica(t *testing.T, f *fleet.Fleet, r *fleet.Replica) {
	if r.Running() {
		return
	}
	if err := r.Start(); err != nil {
		t.Errorf("restarting %s: %v", r.ID, err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if _, err := r.Status(ctx); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Errorf("replica %s does not answer after restart", r.ID)
}
