// Command demo runs replicafed's main job on local control planes: a hub and
// three member clusters (etcd, kube-apiserver, kube-scheduler,
// kube-controller-manager and kwok fake nodes each), three replicafed replicas
// forming a raft cluster, and the example FederatedReplicaSet. It prints the
// FederatedReplicaSet and each member's pods as they become Ready, keeps
// running until interrupted, then removes every process and directory.
//
//	make demo
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
	flag.Parse()
	if err := run(*binDir, *example, *interval); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(binDir, example string, interval time.Duration) error {
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
	kubectl := filepath.Join(abs, "kubectl")
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		show(ctx, f, frs, kubectl)
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func show(ctx context.Context, f *fleet.Fleet, frs *v1alpha1.FederatedReplicaSet, kubectl string) {
	fmt.Printf("\n--- %s ---\n", time.Now().Format(time.TimeOnly))
	if _, err := os.Stat(kubectl); err == nil {
		cmd := exec.CommandContext(ctx, kubectl, "--kubeconfig", f.Hub.Kubeconfig(), "get", "frs", "-n", frs.Namespace)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
		_ = cmd.Run()
	} else {
		got := &v1alpha1.FederatedReplicaSet{}
		if err := f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), got); err == nil {
			fmt.Printf("NAME %s  DESIRED %d  CURRENT %d  READY %d  CLUSTERS %d\n", got.Name,
				*got.Spec.Replicas, got.Status.Replicas, got.Status.ReadyReplicas, got.Status.ClusterCount)
		}
	}
	for _, m := range f.Members {
		pods := &corev1.PodList{}
		c := f.MemberClients[m.Name()]
		if err := c.List(ctx, pods, client.InNamespace(frs.Namespace), client.MatchingLabels(frs.Spec.Selector.MatchLabels)); err != nil {
			fmt.Printf("%-9s unreachable: %v\n", m.Name(), err)
			continue
		}
		var lines []string
		ready := 0
		for _, p := range pods.Items {
			state := string(p.Status.Phase)
			for _, cond := range p.Status.Conditions {
				if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
					state = "Ready"
					ready++
				}
			}
			lines = append(lines, fmt.Sprintf("%s(%s on %s)", p.Name, state, p.Spec.NodeName))
		}
		sort.Strings(lines)
		fmt.Printf("%-9s %d pods, %d ready: %s\n", m.Name(), len(pods.Items), ready, strings.Join(lines, " "))
	}
}
