package kind

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/hubpolicy"
)

// TestHubPodNetwork shows the hub's pod network crosses nodes: a pod on
// each node, and from the one on a worker (not the control plane, where
// CoreDNS runs) an HTTP request to each other pod's address and a cluster
// DNS lookup answer.
func TestHubPodNetwork(t *testing.T) {
	e := newEnv(t, "kind-net")
	ctx := context.Background()
	nodes, err := e.k.Hub.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) < 3 {
		t.Fatalf("hub nodes %v: want a control plane and two workers (hack/kind/hub.yaml)", nodes)
	}
	for i, n := range nodes {
		spec := workloadPod()
		spec.NodeName = n
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("net-%d", i)}, Spec: spec}
		if err := e.k.HubClient.Create(ctx, p); err != nil {
			t.Fatalf("creating pod on %s: %v", n, err)
		}
		t.Cleanup(func() { _ = e.k.HubClient.Delete(context.Background(), p) })
	}
	ips := map[string]string{}
	e.poll("a Ready pod on every hub node", func(ctx context.Context) (bool, error) {
		for i := range nodes {
			p := &corev1.Pod{}
			if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: fmt.Sprintf("net-%d", i)}, p); err != nil || !podstate.IsReady(p) {
				return false, nil
			}
			ips[p.Name] = p.Status.PodIP
		}
		return true, nil
	})
	// net-1 runs on the first worker.
	from := "net-1"
	for _, to := range []string{"net-0", "net-2"} {
		out, err := e.k.Kubectl(ctx, "exec", "-n", e.ns, from, "--", "/workload", "get", "http://"+ips[to]+":8080/")
		if err != nil || !strings.Contains(string(out), "served by "+to) {
			t.Errorf("from %s (%s) to %s at %s: %v\n%s", from, nodes[1], to, ips[to], err, out)
			continue
		}
		logf(t, "%s -> %s (%s): %s", from, to, ips[to], strings.TrimSpace(string(out)))
	}
	for _, name := range []string{"kubernetes.default.svc.cluster.local", "net-2.kind-net.pod.cluster.local"} {
		// A pod's A record is its address with dashes.
		name = strings.Replace(name, "net-2", strings.ReplaceAll(ips["net-2"], ".", "-"), 1)
		out, err := e.k.Kubectl(ctx, "exec", "-n", e.ns, from, "--", "/workload", "lookup", name)
		if err != nil || strings.TrimSpace(string(out)) == "" {
			t.Errorf("DNS lookup of %s from %s: %v\n%s", name, from, err, out)
			continue
		}
		logf(t, "%s resolves %s: %s", from, name, strings.TrimSpace(string(out)))
	}
}

// TestChartOnHub checks the chart's StatefulSet as it runs: every replica
// Ready on its own node, each on a claim bound to a local volume of that
// node (written by uid 65532: the replica keeps its raft identity there).
func TestChartOnHub(t *testing.T) {
	k := install(t)
	ctx := context.Background()
	sts := &appsv1.StatefulSet{}
	if err := k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: k.Release}, sts); err != nil {
		t.Fatalf("reading the chart's StatefulSet: %v", err)
	}
	if sts.Status.ReadyReplicas != *sts.Spec.Replicas || *sts.Spec.Replicas != 3 {
		t.Fatalf("StatefulSet %s: %d/%d ready; want 3/3", sts.Name, sts.Status.ReadyReplicas, *sts.Spec.Replicas)
	}
	pods := &corev1.PodList{}
	if err := k.HubClient.List(ctx, pods, client.InNamespace(fleet.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]string{}
	for _, p := range pods.Items {
		if prev, ok := nodes[p.Spec.NodeName]; ok {
			t.Errorf("%s and %s share node %s; the chart's anti-affinity should spread them", prev, p.Name, p.Spec.NodeName)
		}
		nodes[p.Spec.NodeName] = p.Name
		for _, v := range p.Spec.Volumes {
			if v.PersistentVolumeClaim == nil {
				continue
			}
			pvc := &corev1.PersistentVolumeClaim{}
			if err := k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: v.PersistentVolumeClaim.ClaimName}, pvc); err != nil {
				t.Fatal(err)
			}
			pv := &corev1.PersistentVolume{}
			if err := k.HubClient.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
				t.Fatalf("%s's claim %s (%s): %v", p.Name, pvc.Name, pvc.Status.Phase, err)
			}
			if pv.Spec.Local == nil || !strings.HasPrefix(pv.Name, "local-"+p.Spec.NodeName+"-") {
				t.Errorf("%s on %s uses volume %s; want a local volume of its node", p.Name, p.Spec.NodeName, pv.Name)
			}
			logf(t, "%s on %s: claim %s bound to %s (%s)", p.Name, p.Spec.NodeName, pvc.Name, pv.Name, pv.Spec.Local.Path)
		}
	}
	if len(nodes) != 3 {
		t.Errorf("chart pods on nodes %v; want three nodes", nodes)
	}
	checkFinalizerPolicy(ctx, t, k.HubClient)
}

// checkFinalizerPolicy shows the chart installed the finalizer policy on
// the kind hub (Kubernetes 1.36 serves MutatingAdmissionPolicy, so the
// chart's capability check must have rendered it) and that it applies: a
// FederatedReplicaSet's create comes back with the cascade finalizer.
func checkFinalizerPolicy(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	key := client.ObjectKey{Name: policy.FinalizerPolicyName}
	if err := c.Get(ctx, key, &admissionregistrationv1.MutatingAdmissionPolicy{}); err != nil {
		t.Fatalf("reading the chart's finalizer policy %s: %v", key.Name, err)
	}
	if err := c.Get(ctx, key, &admissionregistrationv1.MutatingAdmissionPolicyBinding{}); err != nil {
		t.Fatalf("reading the chart's finalizer policy binding %s: %v", key.Name, err)
	}
	finalizers, err := hubpolicy.Probe(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(finalizers, v1alpha1.FinalizerCascade) {
		t.Errorf("a FederatedReplicaSet created on the kind hub has finalizers %v; want %s from the chart's policy", finalizers, v1alpha1.FinalizerCascade)
	}
}
