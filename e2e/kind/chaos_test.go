package kind

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
)

// sampler counts a FederatedReplicaSet's active pods over all members
// every half second while a disruption runs and records the worst sample:
// no sample may exceed the bound (the most replicas asked for plus
// maxSurge), or the fleet ran pods nobody asked for.
type sampler struct {
	e       *env
	name    string
	bound   int
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	max     int
	maxAt   string
	samples int
}

func (e *env) startSampler(name string, bound int) *sampler {
	s := &sampler{e: e, name: name, bound: bound, stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			total, desc := 0, []string{}
			complete := true
			for _, m := range e.members() {
				n, err := e.count(context.Background(), m, name)
				if err != nil {
					complete = false
					break
				}
				total += n.active
				desc = append(desc, fmt.Sprintf("%s=%d", m, n.active))
			}
			if !complete {
				continue
			}
			s.mu.Lock()
			s.samples++
			if total > s.max {
				s.max, s.maxAt = total, time.Now().Format("15:04:05.0")+" "+strings.Join(desc, " ")
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// finish stops sampling and fails the test if a sample exceeded the bound.
func (s *sampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	s.done.Wait()
	logf(t, "%s: %d samples, at most %d active pods (%s); bound %d", s.name, s.samples, s.max, s.maxAt, s.bound)
	if s.samples == 0 {
		t.Errorf("%s: no complete sample taken", s.name)
	}
	if s.max > s.bound {
		t.Errorf("%s: %d active pods at %s; more than the %d asked for plus maxSurge", s.name, s.max, s.maxAt, s.bound)
	}
}

// leaderPod is the chart pod whose raft ID holds the leader Lease.
func (e *env) leaderPod(ctx context.Context) (string, error) {
	l := &coordinationv1.Lease{}
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: e.k.Release + "-leader"}, l); err != nil {
		return "", err
	}
	h := ptr.Deref(l.Spec.HolderIdentity, "")
	for i := range 3 {
		p := fmt.Sprintf("%s-%d", e.k.Release, i)
		if h == p || strings.HasPrefix(h, p+"-") {
			return p, nil
		}
	}
	return "", fmt.Errorf("lease holder %q is no chart pod", h)
}

// chaosFRS is a FederatedReplicaSet over both members with maxSurge 1.
func (e *env) chaosFRS(name string, replicas int32) {
	e.t.Helper()
	surge := intstr.FromInt32(1)
	e.create(frsSpec{name: name, replicas: replicas, placement: both, budget: v1alpha1.MoveBudget{MaxSurge: &surge}})
}

// TestChaosLeaderPodDeleted deletes the raft leader's pod mid scale-up: a
// new leader takes over, the scale-up completes, and no sample runs more
// pods than asked for plus maxSurge.
func TestChaosLeaderPodDeleted(t *testing.T) {
	e := newEnv(t, "kind-chaos-leader")
	ctx := context.Background()
	const name = "leader"
	e.chaosFRS(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	s := e.startSampler(name, 10+1)
	e.scale(name, 10)
	var leader string
	e.poll("a leader in the Lease", func(ctx context.Context) (bool, error) {
		var err error
		leader, err = e.leaderPod(ctx)
		return err == nil, nil
	})
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = fleet.Namespace, leader
	if err := e.k.HubClient.Delete(ctx, pod); err != nil {
		t.Fatalf("deleting leader pod %s: %v", leader, err)
	}
	logf(t, "deleted leader pod %s", leader)
	e.waitSplit(name, split{memberA: 5, memberB: 5})
	e.poll("the leader Lease held again", func(ctx context.Context) (bool, error) {
		_, err := e.leaderPod(ctx)
		return err == nil, nil
	})
	e.waitChartReady()
	s.finish(t)
}

// TestChaosRolloutRestart runs `kubectl rollout restart` of the chart's
// StatefulSet mid scale-up: every replica is replaced one by one, the
// scale-up completes, and no sample runs more than asked for plus maxSurge.
func TestChaosRolloutRestart(t *testing.T) {
	e := newEnv(t, "kind-chaos-restart")
	ctx := context.Background()
	const name = "restart"
	e.chaosFRS(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	s := e.startSampler(name, 10+1)
	e.scale(name, 10)
	if out, err := e.k.Kubectl(ctx, "rollout", "restart", "-n", fleet.Namespace, "statefulset/"+e.k.Release); err != nil {
		t.Fatalf("rollout restart: %v\n%s", err, out)
	}
	if out, err := e.k.Kubectl(ctx, "rollout", "status", "-n", fleet.Namespace, "statefulset/"+e.k.Release, "--timeout", "8m"); err != nil {
		t.Fatalf("rollout status: %v\n%s", err, out)
	}
	e.waitSplit(name, split{memberA: 5, memberB: 5})
	e.scale(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	s.finish(t)
}

// TestChaosHubPartition cuts the raft leader's pod off from its peers'
// pods: iptables in its node container drops forwarded traffic between
// the leader's pod IP and the other replicas' pod IPs, so the cut replica
// still reaches the hub's API server (host network), cluster DNS and the
// members, but not its peers. Cutting pod addresses rather than the whole
// node's pod range works on any node, the control-plane node (which also
// runs CoreDNS) included. The fleet must keep converging under a new
// leader, and no sample may run more than asked for plus maxSurge; after
// healing, all three replicas are Ready again.
func TestChaosHubPartition(t *testing.T) {
	e := newEnv(t, "kind-chaos-partition")
	ctx := context.Background()
	const name = "partition"
	e.chaosFRS(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})

	pods := &corev1.PodList{}
	if err := e.k.HubClient.List(ctx, pods, client.InNamespace(fleet.Namespace),
		client.MatchingLabels{"app.kubernetes.io/instance": e.k.Release, "app.kubernetes.io/name": "replicafed"}); err != nil {
		t.Fatal(err)
	}
	victim, err := e.leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var node, victimIP string
	var peerIPs []string
	for _, p := range pods.Items {
		if p.Name == victim {
			node, victimIP = p.Spec.NodeName, p.Status.PodIP
		} else if p.Status.PodIP != "" {
			peerIPs = append(peerIPs, p.Status.PodIP)
		}
	}
	if node == "" || victimIP == "" || len(peerIPs) == 0 {
		t.Fatalf("leader %s: node %q, pod IP %q, peers %v", victim, node, victimIP, peerIPs)
	}
	var rules [][]string
	for _, ip := range peerIPs {
		rules = append(rules, []string{"FORWARD", "-s", victimIP, "-d", ip, "-j", "DROP"},
			[]string{"FORWARD", "-s", ip, "-d", victimIP, "-j", "DROP"})
	}
	iptables := func(op string, r []string) error {
		args := append([]string{"exec", node, "iptables", op}, r...)
		if out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	healed := false
	heal := func() {
		for _, r := range rules {
			if err := iptables("-D", r); err != nil {
				t.Errorf("healing the partition: %v", err)
			}
		}
		healed = true
	}
	s := e.startSampler(name, 10+1)
	for _, r := range rules {
		if err := iptables("-I", r); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if !healed {
			heal()
		}
	})
	logf(t, "cut the leader %s (%s on %s) off from its peers %v", victim, victimIP, node, peerIPs)

	e.scale(name, 10)
	e.waitSplit(name, split{memberA: 5, memberB: 5})
	e.poll("a leader other than the cut "+victim, func(ctx context.Context) (bool, error) {
		l, err := e.leaderPod(ctx)
		return err == nil && l != victim, nil
	})
	heal()
	logf(t, "healed the partition")
	e.scale(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	e.waitChartReady()
	s.finish(t)
}

// TestHelmUpgradeKeepsMemberPods runs `helm upgrade` with a change that
// replaces every replicafed pod while FederatedReplicaSets run: no pod in
// any member is replaced or restarted.
func TestHelmUpgradeKeepsMemberPods(t *testing.T) {
	e := newEnv(t, "kind-upgrade")
	ctx := context.Background()
	e.create(frsSpec{name: "web", replicas: 4, placement: both})
	e.create(frsSpec{name: "api", replicas: 2, placement: both})
	e.waitSplit("web", split{memberA: 2, memberB: 2})
	e.waitSplit("api", split{memberA: 1, memberB: 1})
	before := e.memberPods(ctx)

	start := time.Now()
	out, err := e.k.HelmInstall(ctx, e.k.Chart(), "podAnnotations.upgraded="+time.Now().UTC().Format("20060102T150405"))
	if err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	logf(t, "helm upgrade rolled the StatefulSet in %s", time.Since(start).Round(time.Second))
	e.waitChartReady()
	// Give a wrongly restarted hub every chance to show: the splits hold
	// and the hub reports them, as before.
	e.waitSplit("web", split{memberA: 2, memberB: 2})
	e.waitSplit("api", split{memberA: 1, memberB: 1})
	after := e.memberPods(ctx)
	checkPodsKept(t, "helm upgrade", before, after)
	if len(after) != len(before) {
		t.Errorf("%d member pods after helm upgrade, %d before", len(after), len(before))
	}
}

type podState struct {
	desc     string
	restarts int32
}

// checkPodsKept fails the test for every pod of before that is gone from
// after or restarted in between (during what).
func checkPodsKept(t *testing.T, what string, before, after map[string]podState) {
	t.Helper()
	for uid, was := range before {
		now, ok := after[uid]
		switch {
		case !ok:
			t.Errorf("pod %s is gone after %s", was.desc, what)
		case now.restarts != was.restarts:
			t.Errorf("pod %s restarted during %s (%d -> %d)", was.desc, what, was.restarts, now.restarts)
		}
	}
}

// memberPods are every active pod in the env's namespace in each member.
func (e *env) memberPods(ctx context.Context) map[string]podState {
	e.t.Helper()
	out := map[string]podState{}
	for _, m := range e.members() {
		l := &corev1.PodList{}
		if err := e.k.MemberClients[m].List(ctx, l, client.InNamespace(e.ns)); err != nil {
			e.t.Fatal(err)
		}
		for _, p := range l.Items {
			if !podstate.IsActive(&p) {
				continue
			}
			var r int32
			for _, c := range p.Status.ContainerStatuses {
				r += c.RestartCount
			}
			out[string(p.UID)] = podState{desc: m + "/" + p.Name, restarts: r}
		}
	}
	return out
}

// waitChartReady waits for the chart's StatefulSet to have every replica
// updated and Ready.
func (e *env) waitChartReady() {
	e.t.Helper()
	out, err := e.k.Kubectl(context.Background(), "rollout", "status", "-n", fleet.Namespace, "statefulset/"+e.k.Release, "--timeout", "8m")
	if err != nil {
		e.fatalf("chart StatefulSet not ready: %v\n%s", err, out)
	}
}

// TestChaosDrainReplicaNode cordons and drains (`kubectl drain`, which
// evicts through the chart's PodDisruptionBudget) the node of the raft
// leader's pod, and scales up the moment the eviction is accepted, so the
// scale-up meets the leader's shutdown and the election. The leader's
// volume is local to that node, so its pod comes back Pending while the
// node is cordoned; the other two replicas keep the quorum, a new leader
// completes the scale-up, and no sample runs more than asked for plus
// maxSurge. Uncordoned, the replica returns on its node and all three are
// Ready again.
func TestChaosDrainReplicaNode(t *testing.T) {
	e := newEnv(t, "kind-chaos-drain")
	ctx := context.Background()
	const name = "drain"
	e.chaosFRS(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	victim, err := e.leaderPod(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: victim}, pod); err != nil {
		t.Fatal(err)
	}
	node := pod.Spec.NodeName
	cordoned := true
	uncordon := func() {
		if out, err := e.k.Kubectl(context.Background(), "uncordon", node); err != nil {
			t.Errorf("uncordon %s: %v\n%s", node, err, out)
		}
		cordoned = false
	}
	t.Cleanup(func() {
		if cordoned {
			uncordon()
		}
	})
	s := e.startSampler(name, 10+1)
	type result struct {
		out []byte
		err error
	}
	drained := make(chan result, 1)
	go func() {
		out, err := e.k.Kubectl(ctx, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout", "5m")
		drained <- result{out, err}
	}()
	uid := pod.UID
	e.poll("the eviction of "+victim, func(ctx context.Context) (bool, error) {
		p := &corev1.Pod{}
		err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: victim}, p)
		return apierrors.IsNotFound(err) || (err == nil && (p.UID != uid || p.DeletionTimestamp != nil)), nil
	})
	e.scale(name, 10)
	logf(t, "evicting %s from %s; scaled to 10", victim, node)
	if r := <-drained; r.err != nil {
		t.Fatalf("drain %s: %v\n%s", node, r.err, r.out)
	}
	logf(t, "drained %s", node)
	e.waitSplit(name, split{memberA: 5, memberB: 5})
	e.poll("a leader other than the evicted "+victim, func(ctx context.Context) (bool, error) {
		l, err := e.leaderPod(ctx)
		return err == nil && l != victim, nil
	})
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: victim}, pod); err == nil {
		logf(t, "%s while %s is cordoned: %s on %q", victim, node, pod.Status.Phase, pod.Spec.NodeName)
		if pod.Spec.NodeName != "" && pod.Spec.NodeName != node {
			t.Errorf("%s moved to %s; its local volume pins it to %s", victim, pod.Spec.NodeName, node)
		}
	}
	uncordon()
	e.scale(name, 4)
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	e.waitChartReady()
	s.finish(t)
}
