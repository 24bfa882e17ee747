package kind

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
)

// TestChartNetworkPolicy shows the chart's NetworkPolicy is enforced on
// the hub (by the node image's agent, hack/kind/netpol): from a pod in
// another namespace, every replica's health port answers (the chart allows
// any source there) while its raft port drops the connection; so do one
// replica's admin and metrics ports, until a second policy admits the
// probe's namespace to the metrics port, and again once that policy is
// gone. The replicas sit one per node, so the probe reaches one of them
// across the node's bridge and the others across nodes.
func TestChartNetworkPolicy(t *testing.T) {
	e := newEnv(t, "kind-netpol")
	ctx := context.Background()
	replicas := e.replicaPods(ctx)
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "probe"}, Spec: workloadPod()}
	if err := e.k.HubClient.Create(ctx, probe); err != nil {
		t.Fatalf("creating the probe pod: %v", err)
	}
	t.Cleanup(func() { _ = e.k.HubClient.Delete(context.Background(), probe) })
	e.poll("the probe pod Ready", func(ctx context.Context) (bool, error) {
		err := e.k.HubClient.Get(ctx, client.ObjectKeyFromObject(probe), probe)
		return err == nil && podstate.IsReady(probe), nil
	})
	logf(t, "probe on %s", probe.Spec.NodeName)
	for _, p := range replicas {
		e.dial(p, "health", true)
		e.dial(p, "raft", false)
	}
	first := replicas[0]
	e.dial(first, "admin", false)
	e.dial(first, "metrics", false)

	allow := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: fleet.Namespace, Name: "e2e-metrics-from-" + e.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: first.Labels},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{corev1.LabelMetadataName: e.ns}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(e.port(first, "metrics")))}},
			}},
		},
	}
	if err := e.k.HubClient.Create(ctx, allow); err != nil {
		t.Fatalf("creating %s: %v", allow.Name, err)
	}
	t.Cleanup(func() { _ = e.k.HubClient.Delete(context.Background(), allow) })
	e.poll("the metrics port admitting the probe's namespace", func(ctx context.Context) (bool, error) {
		return e.tryDial(ctx, first, "metrics") == nil, nil
	})
	logf(t, "%s metrics: connected once %s admits %s", first.Name, allow.Name, e.ns)
	if err := e.k.HubClient.Delete(ctx, allow); err != nil {
		t.Fatalf("deleting %s: %v", allow.Name, err)
	}
	e.poll("the metrics port dropping the probe again", func(ctx context.Context) (bool, error) {
		err := e.tryDial(ctx, first, "metrics")
		return err != nil && strings.Contains(err.Error(), "i/o timeout"), nil
	})
	logf(t, "%s metrics: dropped again without %s", first.Name, allow.Name)
}

// replicaPods lists the chart's replicas, Ready, with their addresses.
func (e *env) replicaPods(ctx context.Context) []corev1.Pod {
	e.t.Helper()
	sts := &appsv1.StatefulSet{}
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: e.k.Release}, sts); err != nil {
		e.t.Fatalf("reading the chart's StatefulSet: %v", err)
	}
	pods := &corev1.PodList{}
	e.poll("every replica Ready with an address", func(ctx context.Context) (bool, error) {
		if err := e.k.HubClient.List(ctx, pods, client.InNamespace(fleet.Namespace), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
			return false, nil
		}
		for i := range pods.Items {
			if !podstate.IsReady(&pods.Items[i]) || pods.Items[i].Status.PodIP == "" {
				return false, nil
			}
		}
		return len(pods.Items) == int(*sts.Spec.Replicas), nil
	})
	return pods.Items
}

// port is the number of the replica container's named port.
func (e *env) port(p corev1.Pod, name string) int32 {
	e.t.Helper()
	for _, c := range p.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name == name {
				return cp.ContainerPort
			}
		}
	}
	e.t.Fatalf("%s has no port named %s", p.Name, name)
	return 0
}

// tryDial opens a TCP connection from the probe pod to the replica's port.
func (e *env) tryDial(ctx context.Context, p corev1.Pod, port string) error {
	addr := net.JoinHostPort(p.Status.PodIP, strconv.Itoa(int(e.port(p, port))))
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := e.k.Kubectl(ctx, "exec", "-n", e.ns, "probe", "--", "/workload", "dial", addr)
	if err != nil {
		return fmt.Errorf("%w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dial checks that the replica's port connects (want) or drops the
// connection: a timeout, not a refusal, which would mean nothing listens.
func (e *env) dial(p corev1.Pod, port string, want bool) {
	e.t.Helper()
	err := e.tryDial(context.Background(), p, port)
	switch {
	case want && err != nil:
		e.t.Errorf("%s (%s) %s port from %s: %v; want a connection", p.Name, p.Spec.NodeName, port, e.ns, err)
	case !want && err == nil:
		e.t.Errorf("%s (%s) %s port from %s: connected; want it dropped by the chart's NetworkPolicy", p.Name, p.Spec.NodeName, port, e.ns)
	case !want && !strings.Contains(err.Error(), "i/o timeout"):
		e.t.Errorf("%s (%s) %s port from %s: %v; want a timeout (dropped)", p.Name, p.Spec.NodeName, port, e.ns, err)
	default:
		logf(e.t, "%s (%s) %s port from %s: connected %v", p.Name, p.Spec.NodeName, port, e.ns, want)
	}
}
