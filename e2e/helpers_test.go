package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// waitTimeout bounds every wait for the fleet to converge.
const waitTimeout = 2 * time.Minute

// env is one test's view of the shared fleet: its namespace, created in the
// hub and every member, and failure diagnostics.
type env struct {
	t      *testing.T
	f      *fleet.Fleet
	ns     string
	dumped sync.Once
	// extra are members beyond the shared three (a member a test joined),
	// counted by splitReached and dumped like them.
	extra map[string]client.Client
}

// newEnv creates namespace ns in the hub and every member and registers
// diagnostics printed on failure.
func newEnv(t *testing.T, ns string) *env {
	t.Helper()
	return newEnvIn(t, ns, true)
}

// newEnvIn is newEnv; with inMembers false the namespace exists only in the
// hub, and replicafed must create it in the members.
func newEnvIn(t *testing.T, ns string, inMembers bool) *env {
	t.Helper()
	f := getFleet(t)
	e := &env{t: t, f: f, ns: ns}
	ctx := context.Background()
	clients := []client.Client{f.HubClient}
	if inMembers {
		clients = append(clients, e.members()...)
	}
	for _, c := range clients {
		err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating namespace %s: %v", ns, err)
		}
	}
	t.Cleanup(e.dumpIfFailed)
	return e
}

// dumpIfFailed prints diagnostics once, if the test has failed. Cleanups that
// change the fleet call it first, so the dump shows the state that failed.
func (e *env) dumpIfFailed() {
	if e.t.Failed() {
		e.dumped.Do(e.dump)
	}
}

// addMember makes a member the test started and joined count in the env's
// splits and dumps.
func (e *env) addMember(name string, c client.Client) {
	if e.extra == nil {
		e.extra = map[string]client.Client{}
	}
	e.extra[name] = c
}

// memberNames are the shared members, then the env's extra ones by name.
func (e *env) memberNames() []string {
	out := append([]string{}, allMembers...)
	var extra []string
	for m := range e.extra {
		extra = append(extra, m)
	}
	sort.Strings(extra)
	return append(out, extra...)
}

func (e *env) memberClient(m string) client.Client {
	if c, ok := e.extra[m]; ok {
		return c
	}
	return e.f.MemberClients[m]
}

func (e *env) members() []client.Client {
	out := make([]client.Client, 0, len(allMembers))
	for _, m := range allMembers {
		out = append(out, e.f.MemberClients[m])
	}
	return out
}

// frsSpec describes a FederatedReplicaSet for newFRS.
type frsSpec struct {
	name     string
	replicas int32
	clusters []v1alpha1.ClusterPreference
	failover v1alpha1.Failover
	budget   v1alpha1.MoveBudget
	// placement is the rest of spec.placement (selector, strategy, mode,
	// spread, tolerations); clusters above fills its Clusters.
	placement v1alpha1.Placement
	// cpu is each pod's cpu request; default 100m.
	cpu string
}

// pref is a placement entry with a weight and an optional deletion cost (<0: unset).
func pref(name string, weight, cost int32) v1alpha1.ClusterPreference {
	p := v1alpha1.ClusterPreference{Name: name, Weight: ptr.To(weight)}
	if cost >= 0 {
		p.DeletionCost = ptr.To(cost)
	}
	return p
}

// selector is the pod selector of the FederatedReplicaSet called name.
func selector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{"e2e-app": name})
}

// create creates a FederatedReplicaSet in the env's namespace and deletes it
// (waiting until it is gone) when the test ends.
func (e *env) create(s frsSpec) *v1alpha1.FederatedReplicaSet {
	e.t.Helper()
	placement := s.placement
	placement.Clusters = s.clusters
	cpu := s.cpu
	if cpu == "" {
		cpu = "100m"
	}
	frs := builder.FRS(e.ns, s.name).Replicas(s.replicas).Label("e2e-app", s.name).
		PodSpec(corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: builder.DefaultImage,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			Tolerations: []corev1.Toleration{testcluster.KwokToleration},
		}).
		Placement(placement).Failover(s.failover).
		Edit(func(f *v1alpha1.FederatedReplicaSet) { f.Spec.MoveBudget = s.budget }).Obj()
	ctx := context.Background()
	if err := e.f.HubClient.Create(ctx, frs); err != nil {
		e.t.Fatalf("creating FederatedReplicaSet %s/%s: %v", e.ns, s.name, err)
	}
	e.t.Cleanup(func() { e.dumpIfFailed(); e.deleteAndWait(frs.Name) })
	return frs
}

// deleteAndWait deletes a FederatedReplicaSet (if still there) and waits for it
// and its pods to be gone, so a test leaves no load behind.
func (e *env) deleteAndWait(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.f.HubClient.Delete(ctx, frs); err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("cleanup: deleting %s/%s: %v", e.ns, name, err)
		return
	}
	err := wait.PollUntilContextCancel(ctx, 500*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), frs)
		return apierrors.IsNotFound(err), nil
	})
	if err != nil {
		e.t.Errorf("cleanup: %s/%s still present after %s", e.ns, name, waitTimeout)
	}
}

// getFRS reads a FederatedReplicaSet from the hub.
func (e *env) getFRS(name string) *v1alpha1.FederatedReplicaSet {
	e.t.Helper()
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := e.f.HubClient.Get(context.Background(), client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
		e.t.Fatalf("reading FederatedReplicaSet %s/%s: %v", e.ns, name, err)
	}
	return frs
}

// pods lists the pods of FederatedReplicaSet name in one member, straight from
// its API server.
func (e *env) pods(ctx context.Context, member, name string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	err := e.memberClient(member).List(ctx, l, client.InNamespace(e.ns), client.MatchingLabelsSelector{Selector: selector(name)})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s in %s: %w", name, member, err)
	}
	return l.Items, nil
}

// counts are one member's pods of a FederatedReplicaSet.
type counts struct{ active, ready, terminating int }

func (e *env) count(ctx context.Context, member, name string) (counts, error) {
	c, err := e.countIn(ctx, e.memberClient(member), name)
	if err != nil {
		return counts{}, fmt.Errorf("%s: %w", member, err)
	}
	return c, nil
}

// countIn counts the pods of a FederatedReplicaSet in the member c reaches.
func (e *env) countIn(ctx context.Context, c client.Client, name string) (counts, error) {
	l := &corev1.PodList{}
	if err := c.List(ctx, l, client.InNamespace(e.ns), client.MatchingLabelsSelector{Selector: selector(name)}); err != nil {
		return counts{}, fmt.Errorf("listing pods of %s: %w", name, err)
	}
	var n counts
	for i := range l.Items {
		switch p := &l.Items[i]; {
		case p.DeletionTimestamp != nil:
			n.terminating++
		case podstate.IsActive(p):
			n.active++
			if podstate.IsReady(p) {
				n.ready++
			}
		}
	}
	return n, nil
}

// split is a number of pods per member; members not named have 0.
type split map[string]int

func (s split) total() int {
	n := 0
	for _, v := range s {
		n += v
	}
	return n
}

func (s split) String() string {
	var parts []string
	for _, m := range allMembers {
		parts = append(parts, fmt.Sprintf("%s=%d", m, s[m]))
	}
	var extra []string
	for m, n := range s {
		if !slices.Contains(allMembers, m) {
			extra = append(extra, fmt.Sprintf("%s=%d", m, n))
		}
	}
	sort.Strings(extra)
	return strings.Join(append(parts, extra...), " ")
}

// waitSplit waits until every member runs exactly want[member] ready pods of
// FederatedReplicaSet name and nothing else, and the hub status reports it for
// the current generation with matching per-member targets.
func (e *env) waitSplit(name string, want split) *v1alpha1.FederatedReplicaSet {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	start := time.Now()
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		ok, msg := e.splitReached(ctx, name, want)
		last = msg
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s/%s did not reach %s within %s: %s", e.ns, name, want, waitTimeout, last)
	}
	logf(e.t, "%s reached %s in %s", name, want, time.Since(start).Round(10*time.Millisecond))
	return e.getFRS(name)
}

// splitReached reports whether every member runs exactly want[member] ready
// pods of FederatedReplicaSet name and nothing else, and the hub status
// reports it for the current generation with matching per-member targets;
// the string describes what it saw.
func (e *env) splitReached(ctx context.Context, name string, want split) (bool, string) {
	_, all, msg := e.splitState(ctx, name, want)
	return all, msg
}

// splitState is splitReached in two parts: pods says the members run want
// (whatever the hub status says), all adds the hub status.
func (e *env) splitState(ctx context.Context, name string, want split) (pods, all bool, msg string) {
	var msgs []string
	pods = true
	for _, m := range e.memberNames() {
		c, err := e.count(ctx, m, name)
		if err != nil {
			return false, false, err.Error()
		}
		msgs = append(msgs, fmt.Sprintf("%s=%d(ready %d, terminating %d)", m, c.active, c.ready, c.terminating))
		if c.active != want[m] || c.ready != want[m] || c.terminating != 0 {
			pods = false
		}
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
		return pods, false, err.Error()
	}
	st := frs.Status
	last := fmt.Sprintf("pods %s; status gen %d/%d replicas %d ready %d available %d rows %s",
		strings.Join(msgs, " "), st.ObservedGeneration, frs.Generation, st.Replicas, st.ReadyReplicas, st.AvailableReplicas, rows(frs))
	if !pods || st.ObservedGeneration != frs.Generation || int(st.ReadyReplicas) != want.total() ||
		int(st.AvailableReplicas) != want.total() || int(st.Replicas) != want.total() {
		return pods, false, last
	}
	for _, r := range st.Clusters {
		if int(r.Target) != want[r.Name] || int(r.ReadyReplicas) != want[r.Name] {
			return pods, false, last
		}
	}
	return pods, true, last
}

// rows formats the per-member status rows.
func rows(frs *v1alpha1.FederatedReplicaSet) string {
	var parts []string
	for _, r := range frs.Status.Clusters {
		parts = append(parts, fmt.Sprintf("%s[target %d replicas %d ready %d %s]", r.Name, r.Target, r.Replicas, r.ReadyReplicas, r.Health))
	}
	return strings.Join(parts, " ")
}

// poll waits for cond, failing the test with what after waitTimeout.
func (e *env) poll(what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond); err != nil {
		e.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// tryPoll waits up to timeout for cond and reports whether it held.
func tryPoll(timeout time.Duration, cond func(ctx context.Context) (bool, error)) bool {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, cond) == nil
}

// poke changes an annotation of a FederatedReplicaSet, which makes the leader
// reconcile it.
func (e *env) poke(name string) {
	e.t.Helper()
	frs := e.getFRS(name)
	patch := client.MergeFrom(frs.DeepCopy())
	metav1.SetMetaDataAnnotation(&frs.ObjectMeta, "e2e.replicafed.io/poke", time.Now().Format(time.RFC3339Nano))
	if err := e.f.HubClient.Patch(context.Background(), frs, patch); err != nil {
		e.t.Fatalf("poking %s: %v", name, err)
	}
}

// dump prints replica log tails, the FederatedReplicaSets of the namespace and
// every member's pods there.
func (e *env) dump() {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, r := range e.f.Replicas {
		st, err := r.Status(ctx)
		e.t.Logf("--- replica %s running=%v status=%+v err=%v, log tail ---\n%s", r.ID, r.Running(), st, err, r.LogTail(5000))
	}
	l := &v1alpha1.FederatedReplicaSetList{}
	if err := e.f.HubClient.List(ctx, l, client.InNamespace(e.ns)); err == nil {
		for i := range l.Items {
			frs := &l.Items[i]
			e.t.Logf("--- frs %s gen %d deleting=%v finalizers=%v status=%+v", frs.Name, frs.Generation, frs.DeletionTimestamp != nil, frs.Finalizers, frs.Status)
		}
	}
	for _, m := range e.memberNames() {
		pl := &corev1.PodList{}
		if err := e.memberClient(m).List(ctx, pl, client.InNamespace(e.ns)); err != nil {
			e.t.Logf("--- %s pods: %v", m, err)
			continue
		}
		var lines []string
		for _, p := range pl.Items {
			owner := "-"
			if ref := metav1.GetControllerOf(&p); ref != nil {
				owner = ref.Kind + "/" + ref.Name
			}
			lines = append(lines, fmt.Sprintf("  %s phase=%s ready=%v deleting=%v owner=%s node=%s created=%s",
				p.Name, p.Status.Phase, podstate.IsReady(&p), p.DeletionTimestamp != nil, owner, p.Spec.NodeName, p.CreationTimestamp.Format(time.RFC3339)))
		}
		sort.Strings(lines)
		e.t.Logf("--- %s pods in %s (%d) ---\n%s", m, e.ns, len(lines), strings.Join(lines, "\n"))
		ml := &v1alpha1.MemberReplicaSetList{}
		if err := e.memberClient(m).List(ctx, ml, client.InNamespace(e.ns)); err == nil {
			for _, mrs := range ml.Items {
				e.t.Logf("--- %s mrs %s replicas=%d deleting=%v status=%+v", m, mrs.Name, mrs.Spec.Replicas, mrs.DeletionTimestamp != nil, mrs.Status)
			}
		}
	}
}

// sampler lists the pods of one FederatedReplicaSet in every member at a fixed
// interval and checks each sample against per-member and fleet bounds.
type sampler struct {
	e        *env
	name     string
	perLimit split // per-member bound (inclusive)
	total    int   // fleet bound (inclusive)

	stop chan struct{}
	done chan struct{}

	samples    int
	max        split
	maxTotal   int
	violations []string
}

// startSampler samples every interval until stopped. Members whose API
// server does not answer are left out of that sample.
func (e *env) startSampler(name string, interval time.Duration, perLimit split, total int) *sampler {
	s := &sampler{e: e, name: name, perLimit: perLimit, total: total, stop: make(chan struct{}), done: make(chan struct{}), max: split{}}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			s.sample()
			select {
			case <-s.stop:
				s.sample()
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func (s *sampler) sample() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now := time.Now().Format("15:04:05.000")
	cur := split{}
	for _, m := range allMembers {
		c, err := s.e.count(ctx, m, s.name)
		if err != nil {
			continue
		}
		cur[m] = c.active
		s.max[m] = max(s.max[m], c.active)
		if lim, ok := s.perLimit[m]; ok && c.active > lim {
			s.violations = append(s.violations, fmt.Sprintf("%s %s runs %d pods > bound %d", now, m, c.active, lim))
		}
	}
	s.samples++
	s.maxTotal = max(s.maxTotal, cur.total())
	if cur.total() > s.total {
		s.violations = append(s.violations, fmt.Sprintf("%s fleet runs %d pods > bound %d (%s)", now, cur.total(), s.total, cur))
	}
}

// finish stops sampling and fails the test for every bound exceeded.
func (s *sampler) finish(t *testing.T) {
	t.Helper()
	close(s.stop)
	<-s.done
	per := "none"
	if len(s.perLimit) > 0 {
		per = s.perLimit.String()
	}
	logf(t, "sampled %d times: max per member %s, max total %d (bounds per member %s, total %d)", s.samples, s.max, s.maxTotal, per, s.total)
	for i, v := range s.violations {
		if i == 20 {
			t.Errorf("... %d more violations", len(s.violations)-20)
			break
		}
		t.Errorf("bound exceeded: %s", v)
	}
}
