// Command demo runs replicafed's main job on local control planes: a hub and
// three member clusters (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kwok fake nodes each), three replicafed replicas
// forming a raft cluster, and the example FederatedReplicaSet. It prints the
// FederatedReplicaSet and each member's pods as they become Ready, keeps
// running until interrupted, then removes every process and directory.
// With --autoscaler (as `make demo` runs it) the members also run
// metrics-server, the replicas autoscale, and once the example is spread the
// demo applies the example autoscaler, raises the load on one member's pods
// and drops it again, printing the autoscaler as it reacts.
//
//	make demo                    # with the autoscaler
//	make demo DEMO_AUTOSCALER=   # without
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
)

func main() {
	binDir := flag.String("bin-dir", "bin", "directory with the control-plane binaries and kubectl")
	example := flag.String("example", "examples/frontend.yaml", "FederatedReplicaSet to apply")
	interval := flag.Duration("interval", 3*time.Second, "how often to print the state")
	autoscaler := flag.String("autoscaler", "", "FederatedHorizontalPodAutoscaler to apply with the example, then raise and drop its load; empty: none")
	flag.Parse()
	if err := run(*binDir, *example, *autoscaler, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(binDir, example, autoscaler string, interval time.Duration) error {
	abs, err := filepath.Abs(binDir)
	if err != nil {
		return err
	}
	if err := os.Setenv("REPLICAFED_BIN_DIR", abs); err != nil {
		return err
	}
	raw, err := os.ReadFile(example)
	if err != nil {
		return fmt.Errorf("reading example: %w", err)
	}
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := yaml.UnmarshalStrict(raw, frs); err != nil {
		return fmt.Errorf("decoding %s: %w", example, err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	say := func(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }
	say("starting a hub, three members and three replicafed replicas (Ctrl-C stops and cleans up)")
	binary := filepath.Join(abs, "replicafed")
	if _, err := os.Stat(binary); err != nil {
		binary = "" // let the fleet build it
	}
	f, err := fleet.New(ctx, fleet.Options{
		Members: []string{"member-a", "member-b", "member-c"},
		MemberLabels: map[string]map[string]string{
			"member-a": {"region": "eu", "billing": "reserved"},
			"member-b": {"region": "us", "billing": "reserved"},
			"member-c": {"region": "us", "billing": "on-demand"},
		},
		Nodes: 3, NodeCPU: "4", NodeMem: "16Gi", NodePods: 20,
		Binary: binary,
		Log:    say,
		// Real metrics.k8s.io in the members for the autoscaler.
		Metrics: autoscaler != "", Config: autoscaleConfig(autoscaler != ""),
	})
	if err != nil {
		return err
	}
	defer func() {
		say("stopping replicas and clusters")
		f.Stop()
		say("cleaned up")
	}()
	leader := f.Leader(ctx)
	if leader != nil {
		say("raft leader: %s", leader.ID)
	}
	say("hub kubeconfig: %s", f.Hub.Kubeconfig())
	for _, m := range f.Members {
		say("%s kubeconfig: %s", m.Name(), m.Kubeconfig())
	}
	say("replica logs: %s/<replica>/replicafed.log", f.Dir)
	say("applying %s", example)
	if err := f.HubClient.Create(ctx, frs); err != nil {
		return fmt.Errorf("creating the example FederatedReplicaSet: %w", err)
	}
	if autoscaler != "" {
		if err := startAutoscaler(ctx, f, autoscaler, frs, say); err != nil {
			return err
		}
	}
	kubectl := filepath.Join(abs, "kubectl")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	var last string
	for {
		show(ctx, f, frs, kubectl, autoscaler != "", &last)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// show prints the FederatedReplicaSet and each member's pods by state, but
// only when that picture changed since the last call (last holds it), so a
// fleet scaled to hundreds of pods stays readable.
func show(ctx context.Context, f *fleet.Fleet, frs *v1alpha1.FederatedReplicaSet, kubectl string, autoscaled bool, last *string) {
	var b strings.Builder
	if _, err := os.Stat(kubectl); err == nil {
		out, _ := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Hub.Kubeconfig(), "get", "frs", "-n", frs.Namespace).CombinedOutput()
		b.Write(out)
		if autoscaled {
			out, _ = exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Hub.Kubeconfig(), "get", "fhpa", "-o", "wide", "-n", frs.Namespace).CombinedOutput()
			b.Write(out)
		}
	} else {
		got := &v1alpha1.FederatedReplicaSet{}
		if err := f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), got); err == nil {
			fmt.Fprintf(&b, "NAME %s  DESIRED %d  CURRENT %d  READY %d  CLUSTERS %d\n", got.Name,
				*got.Spec.Replicas, got.Status.Replicas, got.Status.ReadyReplicas, got.Status.ClusterCount)
		}
	}
	for _, m := range f.Members {
		pods := &corev1.PodList{}
		c := f.MemberClients[m.Name()]
		if err := c.List(ctx, pods, client.InNamespace(frs.Namespace), client.MatchingLabels(frs.Spec.Selector.MatchLabels)); err != nil {
			fmt.Fprintf(&b, "%-9s unreachable: %v\n", m.Name(), err)
			continue
		}
		fmt.Fprintf(&b, "%-9s %s\n", m.Name(), summarize(pods.Items, 3))
	}
	if b.String() == *last {
		return
	}
	*last = b.String()
	fmt.Printf("\n--- %s ---\n%s", time.Now().Format(time.TimeOnly), b.String())
}

// summarize counts pods by state (Ready, Running but not ready, Pending,
// Terminating) and names at most maxNames of them, sorted.
func summarize(pods []corev1.Pod, maxNames int) string {
	var ready, running, pending, terminating int
	names := make([]string, 0, len(pods))
	for i := range pods {
		p := &pods[i]
		names = append(names, p.Name)
		switch {
		case p.DeletionTimestamp != nil:
			terminating++
		case p.Status.Phase == corev1.PodPending || p.Spec.NodeName == "":
			pending++
		case podReady(p):
			ready++
		default:
			running++
		}
	}
	sort.Strings(names)
	more := ""
	if len(names) > maxNames {
		more = fmt.Sprintf(" +%d more", len(names)-maxNames)
		names = names[:maxNames]
	}
	return fmt.Sprintf("%d pods: %d ready, %d running not ready, %d pending, %d terminating [%s%s]",
		len(pods), ready, running, pending, terminating, strings.Join(names, " "), more)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
