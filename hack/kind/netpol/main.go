// Command netpol enforces NetworkPolicy on the project's kind clusters, in
// place of the kube-network-policies that stock kind runs inside kindnetd
// (no image of either can be fetched here). It runs on every node as the
// DaemonSet in hack/kind/node/kind/manifests/default-cni.yaml.
//
// The policy engine is kube-network-policies' own (sigs.k8s.io/
// kube-network-policies/pkg/networkpolicy, pinned in go.mod): it reads the
// first packet of each connection from an nfqueue and accepts or drops it
// by the NetworkPolicies of its source and destination pods. What differs
// is how packets reach that queue. The library steers them with an nftables
// `queue` statement, and this machine's kernel is built without nft_queue
// (CONFIG_NFT_QUEUE), so its nftables batch is refused as a whole (it logs
// that at each policy change and retries; harmless). The kernel does have
// the xtables NFQUEUE target, so this command writes the same steering as
// iptables rules in the mangle table's POSTROUTING, where the library hooks
// too (before source NAT): established and related packets and the node's
// own root traffic (kubelet probes) pass, and a new connection to or from a
// pod of this node's podCIDR goes to the queue. A connection between pods of
// two nodes is judged on both, with the same answer. --queue-bypass and the
// library's fail-open keep traffic flowing while the agent is not running.
//
// Same-node pod traffic crosses the CNI bridge, and iptables sees bridged
// packets only with net.bridge.bridge-nf-call-iptables=1, which the node
// image sets (hack/kind/node/etc/sysctl.d/10-node.conf).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/kube-network-policies/pkg/networkpolicy"
)

// chain is the mangle chain holding the steering rules.
const chain = "REPLICAFED-NETPOL"

func main() {
	klog.InitFlags(nil)
	queue := flag.Int("nfqueue-id", 100, "nfqueue number the policy engine reads")
	node := flag.String("node-name", os.Getenv("NODE_NAME"), "this node's name (default $NODE_NAME)")
	iptables := flag.String("iptables", "iptables", "iptables command")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, *node, *iptables, *queue); err != nil {
		klog.ErrorS(err, "netpol stopped")
		os.Exit(1)
	}
}

func run(ctx context.Context, node, iptables string, queue int) error {
	if node == "" {
		return errors.New("no node name: set --node-name or $NODE_NAME")
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return fmt.Errorf("reading the in-cluster configuration: %w", err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the client: %w", err)
	}
	cidrs, err := podCIDRs(ctx, cs, node)
	if err != nil {
		return err
	}
	s := steering{iptables: iptables, cidrs: cidrs, queue: queue}
	if err := s.install(); err != nil {
		return err
	}
	klog.InfoS("Steering new pod connections to the policy engine", "node", node, "podCIDRs", cidrs, "queue", queue)
	// Keep the jump in place should anything rewrite the mangle table.
	go wait.UntilWithContext(ctx, func(context.Context) {
		if err := s.ensure(); err != nil {
			klog.ErrorS(err, "checking the steering rules")
		}
	}, 30*time.Second)

	factory := informers.NewSharedInformerFactory(cs, 0)
	c, err := networkpolicy.NewController(cs,
		factory.Networking().V1().NetworkPolicies(), factory.Core().V1().Namespaces(),
		factory.Core().V1().Pods(), nil, nil, nil, nil,
		networkpolicy.Config{FailOpen: true, QueueID: queue, NodeName: node, NFTableName: "replicafed-netpol"})
	if err != nil {
		return fmt.Errorf("creating the policy engine: %w", err)
	}
	factory.Start(ctx.Done())
	return c.Run(ctx)
}

// podCIDRs waits until kube-controller-manager has given the node its pod
// ranges.
func podCIDRs(ctx context.Context, cs kubernetes.Interface, node string) ([]string, error) {
	var cidrs []string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := cs.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			klog.InfoS("Reading the node", "node", node, "err", err)
			return false, nil
		}
		cidrs = n.Spec.PodCIDRs
		return len(cidrs) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waiting for node %s's podCIDRs: %w", node, err)
	}
	return cidrs, nil
}

// steering writes the iptables rules that queue new pod connections.
type steering struct {
	iptables string
	cidrs    []string
	queue    int
}

func (s steering) ipt(args ...string) error {
	out, err := exec.Command(s.iptables, append([]string{"-w", "5", "-t", "mangle"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", s.iptables, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// install (re)writes the chain and jumps to it from POSTROUTING.
func (s steering) install() error {
	if err := s.ipt("-N", chain); err != nil {
		if err := s.ipt("-F", chain); err != nil {
			return err
		}
	}
	q := []string{"-j", "NFQUEUE", "--queue-num", strconv.Itoa(s.queue), "--queue-bypass"}
	rules := [][]string{
		{"-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "RETURN"},
		{"-m", "owner", "--uid-owner", "0", "-j", "RETURN"},
	}
	for _, c := range s.cidrs {
		if strings.Contains(c, ":") {
			continue // iptables is IPv4; the kind clusters are single-stack IPv4
		}
		rules = append(rules, append([]string{"-d", c}, q...), append([]string{"-s", c}, q...))
	}
	for _, r := range rules {
		if err := s.ipt(append([]string{"-A", chain}, r...)...); err != nil {
			return err
		}
	}
	return s.ensure()
}

// ensure puts the jump first in POSTROUTING when it is missing.
func (s steering) ensure() error {
	if s.ipt("-C", "POSTROUTING", "-j", chain) == nil {
		return nil
	}
	return s.ipt("-I", "POSTROUTING", "-j", chain)
}
