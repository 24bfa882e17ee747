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
// cluster is one node; the node image holds the project's test workload
// image (WorkloadImage).
//
// With $REPLICAFED_E2E_IMAGE_ARCHIVE set (`make e2e-kind` sets it to the
// OCI archive `make image` writes), every cluster gets the replicafed image
// through `kind load image-archive`; $REPLICAFED_E2E_IMAGE names the image
// to check for on the node.
type KindProvider struct {
	// NodeImage is the kind node image; empty means $REPLICAFED_KIND_NODE_IMAGE.
	NodeImage string
	// Root is the repository root holding hack/kind; empty finds it from
	// the working directory.
	Root string
	// BinDir holds the kind binary; empty means testcluster.FindBinDir.
	BinDir string
}

// Environment variables read by KindProvider.
const (
	ImageArchiveEnv = "REPLICAFED_E2E_IMAGE_ARCHIVE"
	ImageEnv        = "REPLICAFED_E2E_IMAGE"
	NodeImageEnv    = "REPLICAFED_KIND_NODE_IMAGE"
)

// WorkloadImage is the test workload image every node built by
// hack/kind/node-image.sh holds (hack/kind/workload: serves HTTP on :8080,
// /healthz and /readyz).
const WorkloadImage = "replicafed.local/workload:v1"

// kindWait bounds `kind create cluster`'s wait for a Ready node; a loaded
// 2-core machine takes a few minutes.
const kindWait = "5m"

// Start implements Provider.
func (p KindProvider) Start(ctx context.Context, spec ClusterSpec) (Cluster, error) {
	k, err := p.resolve()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "replicafed-kind-"+spec.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating kind directory: %w", err)
	}
	suffix := make([]byte, 3)
	if _, err := rand.Read(suffix); err != nil {
		return nil, fmt.Errorf("naming the kind cluster: %w", err)
	}
	// Unique, so fleets of concurrent test binaries never share a name.
	c := &kindCluster{name: spec.Name, kind: "rf-" + spec.Name + "-" + hex.EncodeToString(suffix), kubeconfig: filepath.Join(dir, "kubeconfig"), dir: dir, tools: k}
	out, err := k.kind(ctx, "create", "cluster", "--name", c.kind, "--image", k.image, "--config", k.config,
		"--kubeconfig", c.kubeconfig, "--wait", kindWait)
	if err != nil {
		c.Stop()
		return nil, fmt.Errorf("kind create cluster %s: %w\n%s", c.kind, err, out)
	}
	if c.cfg, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		c.Stop()
		return nil, fmt.Errorf("loading kind kubeconfig: %w", err)
	}
	if err := k.loadImage(ctx, c.kind, os.Getenv(ImageArchiveEnv), os.Getenv(ImageEnv)); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// kindTools is what running kind needs, resolved once per cluster.
type kindTools struct {
	bin, shimDir, config, image string
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
		bin, err := testcluster.FindBinDir()
		if err != nil {
			return kindTools{}, err
		}
		// FindBinDir's default is <root>/bin; with REPLICAFED_BIN_DIR set
		// the root is the module the test runs in.
		root = filepath.Dir(bin)
		if _, err := os.Stat(filepath.Join(root, "hack", "kind")); err != nil {
			gomod, err := exec.Command("go", "env", "GOMOD").Output()
			if err != nil {
				return kindTools{}, fmt.Errorf("finding the module root: %w", err)
			}
			root = filepath.Dir(strings.TrimSpace(string(gomod)))
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
		bin:     filepath.Join(binDir, "kind"),
		shimDir: filepath.Join(root, "hack", "kind", "bin"),
		config:  filepath.Join(root, "hack", "kind", "cluster.yaml"),
		image:   image,
	}
	for _, f := range []string{k.bin, k.shimDir, k.config} {
		if _, err := os.Stat(f); err != nil {
			return kindTools{}, fmt.Errorf("kind provider: %w (run `make kind-image`)", err)
		}
	}
	return k, nil
}

// kind runs the pinned kind with the docker shim first on its PATH.
func (k kindTools) kind(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, k.bin, args...)
	cmd.Env = append(os.Environ(), "PATH="+k.shimDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	return cmd.CombinedOutput()
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

type kindCluster struct {
	name, kind, kubeconfig, dir string
	cfg                         *rest.Config
	tools                       kindTools
}

func (k *kindCluster) Name() string         { return k.name }
func (k *kindCluster) Config() *rest.Config { return rest.CopyConfig(k.cfg) }
func (k *kindCluster) Kubeconfig() string   { return k.kubeconfig }

// KindName is the kind cluster's own name (docker containers
// <KindName>-control-plane, ...).
func (k *kindCluster) KindName() string { return k.kind }

// StopAPIServer pauses the control-plane container: the API server stops
// answering while its state is kept.
func (k *kindCluster) StopAPIServer() error {
	if out, err := exec.Command("docker", "pause", k.kind+"-control-plane").CombinedOutput(); err != nil {
		return fmt.Errorf("docker pause: %w\n%s", err, out)
	}
	return nil
}

// StartAPIServer resumes it and waits for /readyz.
func (k *kindCluster) StartAPIServer(ctx context.Context) error {
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

// Stop deletes the kind cluster (its node containers and their volumes).
func (k *kindCluster) Stop() {
	_, _ = k.tools.kind(context.Background(), "delete", "cluster", "--name", k.kind)
	_ = os.RemoveAll(k.dir)
}
