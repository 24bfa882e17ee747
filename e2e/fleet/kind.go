package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// KindProvider creates kind clusters from the project's offline node image
// (hack/kind, `make kind-image`): every binary and image on the node is
// built here, so nothing is pulled. kind runs with hack/kind/bin first on
// its PATH, whose docker shim starts nodes without --privileged, and with
// hack/kind/cluster.yaml (which says what differs from stock kind). Each
// member cluster is one node and the hub three (hack/kind/hub.yaml: one per
// chart replica); the node image holds the project's test workload image
// (WorkloadImage).
//
// With $REPLICAFED_E2E_IMAGE_ARCHIVE set (`make e2e-kind` sets it to the
// OCI archive `make image` writes), the hub gets the replicafed image
// through `kind load image-archive`; $REPLICAFED_E2E_IMAGE names the image
// to check for on its nodes.
type KindProvider struct {
	// NodeImage is the kind node image; empty means $REPLICAFED_KIND_NODE_IMAGE.
	NodeImage string
	// Root is the repository root holding hack/kind; empty finds it from
	// the working directory.
	Root string
	// BinDir holds the kind binary; empty means testcluster.FindBinDir.
	BinDir string
	// Keep names clusters kind-<spec name> (no random suffix), reuses such
	// a cluster when it already runs, and never deletes it: for iterating
	// on the kind suite without recreating clusters
	// ($REPLICAFED_KIND_KEEP=1 sets it).
	Keep bool
	// Log receives a line for each failed `kind create cluster` attempt and
	// each orphaned cluster deleted; nil discards them.
	Log func(format string, args ...any)
}

// Environment variables read by KindProvider.
const (
	ImageArchiveEnv = "REPLICAFED_E2E_IMAGE_ARCHIVE"
	ImageEnv        = "REPLICAFED_E2E_IMAGE"
	NodeImageEnv    = "REPLICAFED_KIND_NODE_IMAGE"
	KindKeepEnv     = "REPLICAFED_KIND_KEEP"
)

// WorkloadImage is the test workload image every node built by
// hack/kind/node-image.sh holds (hack/kind/workload: serves HTTP on :8080,
// /healthz and /readyz).
const WorkloadImage = "replicafed.local/workload:v1"

// kindWait bounds `kind create cluster`'s wait for a Ready node; a loaded
// 2-core machine takes a few minutes.
const kindWait = "5m"

// Start implements Provider. A hub (spec.Member false) gets
// hack/kind/hub.yaml's three nodes (hack/kind/cluster.yaml's one with
// spec.Nodes 1) and the replicafed image; a member gets
// hack/kind/cluster.yaml's one node.
func (p KindProvider) Start(ctx context.Context, spec ClusterSpec) (Cluster, error) {
	k, err := p.resolve()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "replicafed-kind-"+spec.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating kind directory: %w", err)
	}
	name := "rf-" + spec.Name
	keep := p.Keep || os.Getenv(KindKeepEnv) == "1"
	k.ephemeral = !keep
	if !keep {
		suffix := make([]byte, 3)
		if _, err := rand.Read(suffix); err != nil {
			return nil, fmt.Errorf("naming the kind cluster: %w", err)
		}
		// Unique, so fleets of concurrent test binaries never share a name.
		name += "-" + hex.EncodeToString(suffix)
	}
	config := k.config
	if !spec.Member && spec.Nodes != 1 {
		config = k.hubConfig
	}
	c := &KindCluster{name: spec.Name, kind: name, kubeconfig: filepath.Join(dir, "kubeconfig"), dir: dir, tools: k, keep: keep}
	if keep && k.exists(ctx, name) {
		if out, err := k.kind(ctx, "export", "kubeconfig", "--name", name, "--kubeconfig", c.kubeconfig); err != nil {
			return nil, fmt.Errorf("kind export kubeconfig %s: %w\n%s", name, err, out)
		}
	} else if err := p.create(ctx, c, config); err != nil {
		c.Stop()
		return nil, err
	}
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		c.Stop()
		return nil, fmt.Errorf("loading kind kubeconfig: %w", err)
	}
	if !spec.Member {
		if err := k.loadImage(ctx, name, os.Getenv(ImageArchiveEnv), os.Getenv(ImageEnv)); err != nil {
			c.Stop()
			return nil, err
		}
	}
	return c, nil
}

// kindTools is what running kind needs, resolved once per cluster.
type kindTools struct {
	bin, shimDir, config, hubConfig, image string
	ephemeral                              bool
}

func (p KindProvider) resolve() (kindTools, error) {
	image := p.NodeImage
	if image == "" {
		image = os.Getenv(NodeImageEnv)
	}
	if image == "" {
		return kindTools{}, fmt.Errorf("no kind node image: set %s (hack/kind/node-image.sh prints it; `make kind-image` builds it)", NodeImageEnv)
	}
	root := p.Root
	if root == "" {
		// hack/kind of the module the test runs in, not of the checkout
		// REPLICAFED_BIN_DIR happens to sit in (a worktree may borrow
		// another checkout's tools).
		var err error
		if root, err = moduleRoot(context.Background()); err != nil {
			return kindTools{}, err
		}
	}
	binDir := p.BinDir
	if binDir == "" {
		var err error
		if binDir, err = testcluster.FindBinDir(); err != nil {
			return kindTools{}, err
		}
	}
	k := kindTools{
		bin:       filepath.Join(binDir, "kind"),
		shimDir:   filepath.Join(root, "hack", "kind", "bin"),
		config:    filepath.Join(root, "hack", "kind", "cluster.yaml"),
		hubConfig: filepath.Join(root, "hack", "kind", "hub.yaml"),
		image:     image,
	}
	for _, f := range []string{k.bin, k.shimDir, k.config, k.hubConfig} {
		if _, err := os.Stat(f); err != nil {
			return kindTools{}, fmt.Errorf("kind provider: %w (run `make kind-image`)", err)
		}
	}
	return k, nil
}

// KindNetwork is the Docker network every kind node of the project's
// clusters joins (kind's KIND_EXPERIMENTAL_DOCKER_NETWORK), named for the
// project so that removing it touches nothing else.
const KindNetwork = "replicafed-kind"

// kind runs the pinned kind with the docker shim first on its PATH, on the
// project's Docker network.
func (k kindTools) kind(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+k.shimDir+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KIND_EXPERIMENTAL_DOCKER_NETWORK="+KindNetwork)
	if k.ephemeral {
		// The shim starts the nodes with --restart=no: a cluster whose
		// test died must not come back with the next dockerd.
		cmd.Env = append(cmd.Env, "REPLICAFED_KIND_EPHEMERAL=1")
	}
	return cmd.CombinedOutput()
}

// exists reports whether kind runs a cluster called name.
func (k kindTools) exists(ctx context.Context, name string) bool {
	out, err := k.kind(ctx, "get", "clusters")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) == name {
			return true
		}
	}
	return false
}

// loadImage imports the image archive into every node of the kind cluster
// and, when image is named, checks the control-plane node's containerd now
// has it under that name.
func (k kindTools) loadImage(ctx context.Context, cluster, archive, image string) error {
	if archive == "" {
		return nil
	}
	if out, err := k.kind(ctx, "load", "image-archive", archive, "--name", cluster); err != nil {
		return fmt.Errorf("kind load image-archive %s into %s: %w\n%s", archive, cluster, err, out)
	}
	if image == "" {
		return nil
	}
	check := exec.CommandContext(ctx, "docker", "exec", cluster+"-control-plane", "crictl", "inspecti", image)
	if out, err := check.CombinedOutput(); err != nil {
		return fmt.Errorf("image %s not in kind cluster %s after loading %s: %w\n%s", image, cluster, archive, err, out)
	}
	return nil
}

// KindCluster is a kind cluster KindProvider started.
type KindCluster struct {
	name, kind, kubeconfig, dir string
	cfg                         *rest.Config
	tools                       kindTools
	keep                        bool
	owner                       *ownerLock
}

// LoadImage imports an OCI image archive into every node of the cluster and
// checks that the control-plane node has image (repository:tag) after it.
func (k *KindCluster) LoadImage(ctx context.Context, archive, image string) error {
	return k.tools.loadImage(ctx, k.kind, archive, image)
}

// Name is the cluster's name in the fleet (the member name).
func (k *KindCluster) Name() string { return k.name }

// Config is an admin client configuration (through the host's port).
func (k *KindCluster) Config() *rest.Config { return rest.CopyConfig(k.cfg) }

// Kubeconfig is the admin kubeconfig's path (through the host's port).
func (k *KindCluster) Kubeconfig() string { return k.kubeconfig }

// KindName is the kind cluster's own name (docker containers
// <KindName>-control-plane, ...).
func (k *KindCluster) KindName() string { return k.kind }

// StopAPIServer pauses the control-plane container: the API server stops
// answering while its state is kept.
func (k *KindCluster) StopAPIServer() error {
	if out, err := exec.Command("docker", "pause", k.kind+"-control-plane").CombinedOutput(); err != nil {
		return fmt.Errorf("docker pause: %w\n%s", err, out)
	}
	return nil
}

// StartAPIServer resumes it and waits for /readyz.
func (k *KindCluster) StartAPIServer(ctx context.Context) error {
	if out, err := exec.CommandContext(ctx, "docker", "unpause", k.kind+"-control-plane").CombinedOutput(); err != nil {
		return fmt.Errorf("docker unpause: %w\n%s", err, out)
	}
	cs, err := kubernetes.NewForConfig(k.Config())
	if err != nil {
		return fmt.Errorf("client for %s: %w", k.kind, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("kind cluster %s not ready after unpause: %w", k.kind, ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// Stop deletes the kind cluster (its node containers and their volumes),
// unless it was started with Keep.
func (k *KindCluster) Stop() {
	if !k.keep {
		_, _ = k.tools.kind(context.Background(), "delete", "cluster", "--name", k.kind)
	}
	k.owner.release()
	_ = os.RemoveAll(k.dir)
}

// Nodes are the names of the cluster's node containers, control plane first.
func (k *KindCluster) Nodes(ctx context.Context) ([]string, error) {
	out, err := k.tools.kind(ctx, "get", "nodes", "--name", k.kind)
	if err != nil {
		return nil, fmt.Errorf("kind get nodes %s: %w\n%s", k.kind, err, out)
	}
	var nodes []string
	for _, l := range strings.Fields(string(out)) {
		if strings.HasSuffix(l, "-control-plane") {
			nodes = append([]string{l}, nodes...)
		} else if strings.HasPrefix(l, k.kind+"-") {
			nodes = append(nodes, l)
		}
	}
	return nodes, nil
}

// InternalServer is the API server's URL on the kind Docker network: the
// address the hub's pods reach a member at.
func (k *KindCluster) InternalServer(ctx context.Context) (string, error) {
	ip, err := ContainerIP(ctx, k.kind+"-control-plane")
	if err != nil {
		return "", err
	}
	return "https://" + ip + ":6443", nil
}

// ContainerIP is a container's address on its (one) Docker network.
func ContainerIP(ctx context.Context, container string) (string, error) {
	out, err := exec.CommandContext(ctx, "docker", "inspect", "-f",
		"{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", container).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("docker inspect %s: %w\n%s", container, err, out)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "", fmt.Errorf("container %s has no address", container)
	}
	return f[0], nil
}
