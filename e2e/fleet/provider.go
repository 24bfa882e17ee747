package fleet

import (
	"context"
	"fmt"
	"k8s.io/apimachinery/pkg/api/resource"
	"os"

	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// Cluster is one hub or member cluster of a fleet.
type Cluster interface {
	// Name of the cluster (member name in replicafed).
	Name() string
	// Config is an admin client configuration.
	Config() *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig() string
	// StopAPIServer makes the cluster unreachable; StartAPIServer brings it back.
	StopAPIServer() error
	StartAPIServer(ctx context.Context) error
	// Stop removes the cluster.
	Stop()
}

// ClusterSpec describes a cluster to start.
type ClusterSpec struct {
	Name string
	// Member clusters run a scheduler and fake nodes; the hub runs only the
	// garbage collector.
	Member   bool
	Nodes    int
	NodeCPU  string
	NodeMem  string
	NodePods int
	// Metrics runs metrics-server in a member (local provider only; see
	// testcluster.Options.Metrics).
	Metrics bool
	// CustomMetrics runs a custom metrics adapter in a member as well
	// (local provider only, with Metrics; see
	// testcluster.Options.CustomMetrics).
	CustomMetrics bool
}

// Provider starts clusters.
type Provider interface {
	Start(ctx context.Context, spec ClusterSpec) (Cluster, error)
}

// ProviderFromEnv returns the provider named by REPLICAFED_E2E_PROVIDER:
// "local" (default) or "kind".
func ProviderFromEnv() (Provider, error) {
	switch p := os.Getenv("REPLICAFED_E2E_PROVIDER"); p {
	case "", "local":
		return LocalProvider{}, nil
	case "kind":
		return KindProvider{}, nil
	default:
		return nil, fmt.Errorf("REPLICAFED_E2E_PROVIDER=%q: want local or kind", p)
	}
}

// LocalProvider runs real control-plane binaries with kwok fake nodes.
type LocalProvider struct{}

// Start implements Provider.
func (LocalProvider) Start(ctx context.Context, spec ClusterSpec) (Cluster, error) {
	opts := testcluster.Options{Name: spec.Name, ControllerManager: true}
	if spec.Member {
		opts.Scheduler = true
		opts.Nodes = spec.Nodes
		opts.NodeCPU, opts.NodeMemory, opts.NodePods = spec.NodeCPU, spec.NodeMem, spec.NodePods
		opts.Metrics = spec.Metrics
		opts.CustomMetrics = spec.CustomMetrics
	}
	if os.Getenv("REPLICAFED_KEEP_CLUSTERS") == "1" {
		opts.KeepDir = true
	}
	c, err := testcluster.New(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &localCluster{c: c}, nil
}

type localCluster struct{ c *testcluster.Cluster }

func (l *localCluster) Name() string                             { return l.c.Name }
func (l *localCluster) Config() *rest.Config                     { return rest.CopyConfig(l.c.Config) }
func (l *localCluster) Kubeconfig() string                       { return l.c.Kubeconfig }
func (l *localCluster) StopAPIServer() error                     { l.c.StopAPIServer(); return nil }
func (l *localCluster) StartAPIServer(ctx context.Context) error { return l.c.StartAPIServer(ctx) }
func (l *localCluster) Stop()                                    { l.c.Stop() }

// SetCustomMetric sets an object's custom metric in the cluster's adapter.
func (l *localCluster) SetCustomMetric(ctx context.Context, namespace, resourceName, name, metric string, value resource.Quantity) error {
	return l.c.SetCustomMetric(ctx, namespace, resourceName, name, metric, value)
}

// Logs returns the tail of the cluster's component logs.
func (l *localCluster) Logs() string { return l.c.Logs(3000) }
