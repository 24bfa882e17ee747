package kind

import (
	"context"
	"fmt"
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
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// waitTimeout bounds every wait for the installation to converge: real
// containers start on kind nodes of a loaded 2-core machine (load 100+ seen).
const waitTimeout = 6 * time.Minute

// env is one test's view of the shared installation: its namespace in the
// hub (replicafed creates it in the members) and failure diagnostics.
type env struct {
	t      *testing.T
	k      *fleet.KindInstallation
	ns     string
	dumped sync.Once
}

func newEnv(t *testing.T, ns string) *env {
	t.Helper()
	e := newEnvOn(t, install(t), ns)
	e.waitMembersSchedulable()
	return e
}

// newEnvOn is newEnv on an installation of the test's own.
func newEnvOn(t *testing.T, k *fleet.KindInstallation, ns string) *env {
	t.Helper()
	e := &env{t: t, k: k, ns: ns}
	err := k.HubClient.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("creating namespace %s: %v", ns, err)
	}
	t.Cleanup(e.dumpIfFailed)
	return e
}

// waitMembersSchedulable waits until every member's nodes are Ready and
// free of the node lifecycle's taints, and the hub's MemberCluster status
// says so too. Tests share the members: one that paused a member (its node
// controller then marks the node unreachable for a while after it resumes)
// must not leave the next test's placement a member with no room, where its
// replicas would land elsewhere and, under moveBack Never, stay there.
func (e *env) waitMembersSchedulable() {
	e.t.Helper()
	start := time.Now()
	defer func() {
		// Worth a line only when a member was not ready at once.
		if d := time.Since(start); d > 2*time.Second {
			logf(e.t, "members schedulable after %s", d.Round(100*time.Millisecond))
		}
	}()
	for _, m := range e.members() {
		e.poll(m+" schedulable in the member and as the hub sees it", func(ctx context.Context) (bool, error) {
			ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			nodes := &corev1.NodeList{}
			if err := e.k.MemberClients[m].List(ctx, nodes); err != nil || len(nodes.Items) == 0 {
				return false, nil
			}
			for i := range nodes.Items {
				if !nodeSchedulable(&nodes.Items[i]) {
					return false, nil
				}
			}
			mc := &v1alpha1.MemberCluster{}
			if err := e.k.HubClient.Get(ctx, client.ObjectKey{Name: m}, mc); err != nil {
				return false, nil
			}
			st := mc.Status
			return st.Health == v1alpha1.ClusterHealthy && st.Nodes == int32(len(nodes.Items)) && st.ReadyNodes == st.Nodes, nil
		})
	}
}

// nodeSchedulable: Ready, not cordoned, no taint of the node lifecycle
// (node.kubernetes.io/unreachable, not-ready, ...).
func nodeSchedulable(n *corev1.Node) bool {
	if n.Spec.Unschedulable {
		return false
	}
	for _, t := range n.Spec.Taints {
		if strings.HasPrefix(t.Key, "node.kubernetes.io/") {
			return false
		}
	}
	return testcluster.NodeReady(n)
}

func (e *env) dumpIfFailed() {
	if e.t.Failed() {
		e.dump()
	}
}

func (e *env) dump() {
	e.dumped.Do(func() { e.t.Logf("hub state:\n%s", e.k.Describe(context.Background())) })
}

// fatalf prints the hub's state and then the failure, so the reason is the
// last thing a truncated CI log shows (CI keeps only its tail).
func (e *env) fatalf(format string, args ...any) {
	e.t.Helper()
	e.dump()
	e.t.Fatalf(format, args...)
}

// frsSpec describes a FederatedReplicaSet for create.
type frsSpec struct {
	name      string
	replicas  int32
	placement v1alpha1.Placement
	failover  v1alpha1.Failover
	budget    v1alpha1.MoveBudget
}

func selector(name string) labels.Selector {
	return labels.SelectorFromSet(labels.Set{"e2e-app": name})
}

// workloadPod is a pod spec running the project's workload image with its
// probes, small enough for many on one kind node, and fit for the
// restricted Pod Security level.
func workloadPod() corev1.PodSpec {
	// Generous probe timeouts: at load 100+ on two cores a 1 s timeout
	// failed liveness and restarted healthy containers, and a restarted
	// pod is not Ready for a while.
	probe := func(path string, period int32) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
			PeriodSeconds: period, TimeoutSeconds: 10, FailureThreshold: 6}
	}
	return corev1.PodSpec{
		TerminationGracePeriodSeconds: ptr.To[int64](5),
		SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
		Containers: []corev1.Container{{
			Name: "app", Image: fleet.WorkloadImage, ImagePullPolicy: corev1.PullNever,
			Ports:          []corev1.ContainerPort{{ContainerPort: 8080}},
			ReadinessProbe: probe("/readyz", 2), LivenessProbe: probe("/healthz", 10),
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("5m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
			}},
			SecurityContext: &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
				Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		}},
	}
}

// create creates a FederatedReplicaSet in the env's namespace and deletes
// it (waiting until it is gone) when the test ends.
func (e *env) create(s frsSpec) *v1alpha1.FederatedReplicaSet {
	e.t.Helper()
	frs := builder.FRS(e.ns, s.name).Replicas(s.replicas).Label("e2e-app", s.name).PodSpec(workloadPod()).
		Placement(s.placement).Failover(s.failover).
		Edit(func(f *v1alpha1.FederatedReplicaSet) { f.Spec.MoveBudget = s.budget }).Obj()
	if err := e.k.HubClient.Create(context.Background(), frs); err != nil {
		e.t.Fatalf("creating FederatedReplicaSet %s/%s: %v", e.ns, s.name, err)
	}
	e.t.Cleanup(func() { e.dumpIfFailed(); e.deleteAndWait(frs.Name) })
	return frs
}

// deleteAndWait deletes a FederatedReplicaSet (if still there) and waits
// for it to be gone, which replicafed's finalizer allows only once every
// member's pods are.
func (e *env) deleteAndWait(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	if err := e.k.HubClient.Delete(ctx, frs); err != nil && !apierrors.IsNotFound(err) {
		e.t.Errorf("cleanup: deleting %s/%s: %v", e.ns, name, err)
		return
	}
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(e.k.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), frs)), nil
	})
	if err != nil {
		e.t.Errorf("cleanup: %s/%s still present after %s", e.ns, name, waitTimeout)
	}
}

// scale sets a FederatedReplicaSet's replicas.
func (e *env) scale(name string, replicas int32) {
	e.t.Helper()
	frs := &v1alpha1.FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}}
	patch := client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas))
	if err := e.k.HubClient.Patch(context.Background(), frs, patch); err != nil {
		e.t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}

// pods lists a FederatedReplicaSet's pods in one member.
func (e *env) pods(ctx context.Context, member, name string) ([]corev1.Pod, error) {
	l := &corev1.PodList{}
	err := e.k.MemberClients[member].List(ctx, l, client.InNamespace(e.ns), client.MatchingLabelsSelector{Selector: selector(name)})
	if err != nil {
		return nil, fmt.Errorf("listing pods of %s in %s: %w", name, member, err)
	}
	return l.Items, nil
}

// counts are one member's pods of a FederatedReplicaSet.
type counts struct{ active, ready int }

func (e *env) count(ctx context.Context, member, name string) (counts, error) {
	// A paused member accepts connections and never answers: bound each
	// read so a poll goes on.
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	pods, err := e.pods(ctx, member, name)
	if err != nil {
		return counts{}, err
	}
	var n counts
	for i := range pods {
		if podstate.IsActive(&pods[i]) {
			n.active++
			if podstate.IsReady(&pods[i]) {
				n.ready++
			}
		}
	}
	return n, nil
}

// split is a number of pods per member; members not named have 0.
type split map[string]int

func (s split) String() string {
	var parts []string
	for m, n := range s {
		parts = append(parts, fmt.Sprintf("%s=%d", m, n))
	}
	sort.Strings(parts)
	return "{" + strings.Join(parts, " ") + "}"
}

func (s split) total() int {
	n := 0
	for _, v := range s {
		n += v
	}
	return n
}

// waitSplit waits until each member runs exactly want[member] active pods
// of name, all Ready, and the hub's status counts them all Ready.
func (e *env) waitSplit(name string, want split) {
	e.t.Helper()
	start := time.Now()
	var last string
	err := e.pollFor(waitTimeout, func(ctx context.Context) (bool, error) {
		ok, msg := e.splitReached(ctx, name, want, e.members())
		last = msg
		return ok, nil
	})
	if err != nil {
		e.fatalf("%s/%s did not reach %s within %s: %s", e.ns, name, want, waitTimeout, last)
	}
	logf(e.t, "%s reached %s in %s", name, want, time.Since(start).Round(100*time.Millisecond))
}

// splitReached checks want in the given members.
func (e *env) splitReached(ctx context.Context, name string, want split, members []string) (bool, string) {
	got := split{}
	ok := true
	for _, m := range members {
		c, err := e.count(ctx, m, name)
		if err != nil {
			return false, err.Error()
		}
		got[m] = c.active
		if c.active != want[m] || c.ready != want[m] {
			ok = false
		}
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
		return false, err.Error()
	}
	if int(frs.Status.ReadyReplicas) != want.total() || frs.Status.ObservedGeneration != frs.Generation {
		ok = false
	}
	return ok, fmt.Sprintf("members run %s; hub status ready %d (generation %d observed %d)",
		got, frs.Status.ReadyReplicas, frs.Generation, frs.Status.ObservedGeneration)
}

func (e *env) members() []string {
	var out []string
	for _, m := range e.k.Members {
		out = append(out, m.Name())
	}
	return out
}

// poll waits for cond within waitTimeout or fails the test.
func (e *env) poll(what string, cond func(ctx context.Context) (bool, error)) {
	e.t.Helper()
	if err := e.pollFor(waitTimeout, cond); err != nil {
		e.fatalf("waiting for %s: %v", what, err)
	}
}

func (e *env) pollFor(d time.Duration, cond func(ctx context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, time.Second, true, cond)
}
