package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KindProvider creates kind clusters (needs Docker and the kind CLI on PATH).
// Pods then run real containers, so the suite's pod template image must be
// pullable. Only cluster bootstrap differs from the local provider.
//
// With $REPLICAFED_E2E_IMAGE_ARCHIVE set (`make e2e-kind` sets it to the
// OCI archive `make image` writes), every cluster gets the replicafed image
// through `kind load image-archive`, so nothing pulls it from a registry;
// $REPLICAFED_E2E_IMAGE names the image to check for on each node.
type KindProvider struct{}

// Environment variables read by KindProvider.
const (
	ImageArchiveEnv = "REPLICAFED_E2E_IMAGE_ARCHIVE"
	ImageEnv        = "REPLICAFED_E2E_IMAGE"
)

// Start implements Provider.
func (KindProvider) Start(ctx context.Context, spec ClusterSpec) (Cluster, error) {
	dir, err := os.MkdirTemp("", "replicafed-kind-"+spec.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating kind directory: %w", err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	name := "replicafed-" + spec.Name
	cmd := exec.CommandContext(ctx, "kind", "create", "cluster", "--name", name, "--kubeconfig", kc, "--wait", "2m")
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kind create cluster %s: %w\n%s", name, err, out)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return nil, fmt.Errorf("loading kind kubeconfig: %w", err)
	}
	if err := loadImage(ctx, name, os.Getenv(ImageArchiveEnv), os.Getenv(ImageEnv)); err != nil {
		return nil, err
	}
	return &kindCluster{name: spec.Name, kind: name, cfg: cfg, kubeconfig: kc, dir: dir}, nil
}

// loadImage imports the image archive into every node of the kind cluster
// and, when image is named, checks the control-plane node's containerd now
// has it under that name.
func loadImage(ctx context.Context, cluster, archive, image string) error {
	if archive == "" {
		return nil
	}
	cmd := exec.CommandContext(ctx, "kind", "load", "image-archive", archive, "--name", cluster)
	if out, err := cmd.CombinedOutput(); err != nil {
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
}

func (k *kindCluster) Name() string         { return k.name }
func (k *kindCluster) Config() *rest.Config { return rest.CopyConfig(k.cfg) }
func (k *kindCluster) Kubeconfig() string   { return k.kubeconfig }

// StopAPIServer pauses the control-plane container.
func (k *kindCluster) StopAPIServer() error {
	return exec.Command("docker", "pause", k.kind+"-control-plane").Run()
}

// StartAPIServer resumes it and waits for /readyz.
func (k *kindCluster) StartAPIServer(ctx context.Context) error {
	if err := exec.CommandContext(ctx, "docker", "unpause", k.kind+"-control-plane").Run(); err != nil {
		return fmt.Errorf("docker unpause: %w", err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if exec.CommandContext(ctx, "kubectl", "--kubeconfig", k.kubeconfig, "get", "--raw", "/readyz").Run() == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return fmt.Errorf("kind cluster %s not ready after unpause", k.kind)
}

func (k *kindCluster) Stop() {
	_ = exec.Command("kind", "delete", "cluster", "--name", k.kind).Run()
	_ = os.RemoveAll(k.dir)
}
