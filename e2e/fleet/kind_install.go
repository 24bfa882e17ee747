package fleet

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/hubpolicy"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// KindInstallOptions describe a KindInstallation.
type KindInstallOptions struct {
	// Members are the member names; default member-a, member-b.
	Members []string
	// MemberLabels are the labels each member joins with, by name.
	MemberLabels map[string]map[string]string
	// Provider starts the kind clusters.
	Provider KindProvider
	// Binary is the replicafed binary that runs join and unjoin; empty
	// builds it from this checkout.
	Binary string
	// HelmSet are extra `helm --set` values for the chart.
	HelmSet []string
	// Chart is the chart installed first (a directory or a packaged .tgz);
	// empty is this checkout's charts/replicafed.
	Chart string
	// Image and ImageArchive are the image that chart runs (repository:tag)
	// and its OCI archive, loaded into the hub; empty means
	// $REPLICAFED_E2E_IMAGE and $REPLICAFED_E2E_IMAGE_ARCHIVE. The
	// environment's image is loaded in every case, so the release can be
	// upgraded to it.
	Image, ImageArchive string
	// HubNodes is the hub's node count: 3 (the default, one per chart
	// replica) or 1.
	HubNodes int
	// RegisterWithSecrets registers each member as chart 0.1.0 did, before
	// `replicafed join` existed: a kubeconfig Secret with the member's admin
	// credentials, labelled for clusters.secretSelector.
	RegisterWithSecrets bool
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
}

// KindInstallation is replicafed installed as a user installs it, on kind
// clusters: the chart `helm install`ed into a three-node hub with the image
// `make image` built (loaded by KindProvider), and members joined with
// `replicafed join` at their API servers' addresses on the kind Docker
// network, which the hub's pods reach.
type KindInstallation struct {
	Hub     *KindCluster
	Members []*KindCluster
	// HubClient and MemberClients talk to the clusters from the host.
	HubClient     client.Client
	MemberClients map[string]client.Client
	// Release is the chart's Helm release name, in Namespace.
	Release string
	// Image is the replicafed image the chart runs (repository:tag).
	Image string

	opts        KindInstallOptions
	binary, dir string
	helm        string
	kubectl     string
	chart       string
}

// ChartRelease is the Helm release name the installation uses.
const ChartRelease = "replicafed"

// NewKindInstallation creates the clusters (two at a time: more kind
// control planes starting at once outrun kubeadm's timeouts on a loaded
// 2-core machine), installs the chart and joins the members. It needs
// $REPLICAFED_E2E_IMAGE_ARCHIVE and $REPLICAFED_E2E_IMAGE (`make e2e-kind`
// sets both). Call Stop in every case after a successful return.
func NewKindInstallation(ctx context.Context, o KindInstallOptions) (*KindInstallation, error) {
	if len(o.Members) == 0 {
		o.Members = []string{"member-a", "member-b"}
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Provider.Log == nil {
		o.Provider.Log = o.Log
	}
	if env := os.Getenv(ImageEnv); os.Getenv(ImageArchiveEnv) == "" || !strings.Contains(env, ":") {
		return nil, fmt.Errorf("%s and %s (repository:tag) must name the image `make image` built; `make e2e-kind` sets them", ImageArchiveEnv, ImageEnv)
	}
	image := o.Image
	if image == "" {
		image = os.Getenv(ImageEnv)
	}
	if !strings.Contains(image, ":") {
		return nil, fmt.Errorf("image %q is not repository:tag", image)
	}
	bin, err := testcluster.FindBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "replicafed-kind-install-")
	if err != nil {
		return nil, fmt.Errorf("creating installation directory: %w", err)
	}
	k := &KindInstallation{
		MemberClients: map[string]client.Client{}, Release: ChartRelease, Image: image, opts: o, dir: dir,
		helm: filepath.Join(bin, "helm"), kubectl: filepath.Join(bin, "kubectl"), binary: o.Binary,
	}
	if err := k.start(ctx); err != nil {
		k.Stop()
		return nil, err
	}
	return k, nil
}

// start builds the binary, starts the clusters, installs the first chart
// and registers the members.
func (k *KindInstallation) start(ctx context.Context) error {
	o := k.opts
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	k.chart = filepath.Join(root, "charts", "replicafed")
	first := o.Chart
	if first == "" {
		first = k.chart
	}
	if k.binary == "" {
		o.Log("building replicafed")
		if k.binary, err = buildBinary(ctx, k.dir); err != nil {
			return err
		}
	}
	if err := k.startClusters(ctx); err != nil {
		return err
	}
	if err := k.connect(); err != nil {
		return err
	}
	start := time.Now()
	if out, err := k.HelmInstall(ctx, first); err != nil {
		return fmt.Errorf("helm install: %w\n%s\n%s", err, out, k.Describe(ctx))
	}
	if err := hubpolicy.WaitFinalizer(ctx, k.HubClient, 2*time.Minute); err != nil {
		return err
	}
	o.Log("chart %s installed in %s", filepath.Base(first), time.Since(start).Round(time.Second))
	register := k.Join
	if o.RegisterWithSecrets {
		register = k.registerWithSecret
	}
	for _, m := range k.Members {
		if err := register(ctx, m.Name()); err != nil {
			return err
		}
	}
	return nil
}

// startClusters starts the hub and the members, two at a time, and loads
// the first chart's image into the hub when it is not the environment's.
func (k *KindInstallation) startClusters(ctx context.Context) error {
	o := k.opts
	specs := []ClusterSpec{{Name: "hub", Nodes: o.HubNodes}}
	for _, m := range o.Members {
		specs = append(specs, ClusterSpec{Name: m, Member: true})
	}
	clusters := make([]*KindCluster, len(specs))
	errs := make([]error, len(specs))
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			start := time.Now()
			c, err := o.Provider.Start(ctx, s)
			if err != nil {
				errs[i] = err
				return
			}
			clusters[i] = c.(*KindCluster)
			o.Log("kind cluster %s (%s) up in %s", s.Name, clusters[i].KindName(), time.Since(start).Round(time.Second))
		}()
	}
	wg.Wait()
	k.Hub = clusters[0]
	for _, c := range clusters[1:] {
		if c != nil {
			k.Members = append(k.Members, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if o.ImageArchive != "" {
		return k.Hub.LoadImage(ctx, o.ImageArchive, k.Image)
	}
	return nil
}

// connect makes the host's clients of the hub and the members.
func (k *KindInstallation) connect() error {
	scheme, err := kubescheme.New()
	if err != nil {
		return err
	}
	if k.HubClient, err = client.New(k.Hub.Config(), client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	for _, m := range k.Members {
		c, err := client.New(m.Config(), client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("member %s client: %w", m.Name(), err)
		}
		k.MemberClients[m.Name()] = c
	}
	return nil
}

// HelmInstall installs or upgrades the release from chart (a directory or
// archive) with the installation's image, waiting for every pod Ready.
func (k *KindInstallation) HelmInstall(ctx context.Context, chart string, set ...string) ([]byte, error) {
	return k.HelmUpgrade(ctx, chart, k.Image, []string{"--wait", "--timeout", "10m"}, set...)
}

// HelmUpgrade runs `helm upgrade --install` with an image (repository:tag)
// and the helm flags given, such as --take-ownership or --wait.
func (k *KindInstallation) HelmUpgrade(ctx context.Context, chart, image string, flags []string, set ...string) ([]byte, error) {
	repo, tag := image[:strings.LastIndex(image, ":")], image[strings.LastIndex(image, ":")+1:]
	args := []string{"upgrade", "--install", k.Release, chart, "--kubeconfig", k.Hub.Kubeconfig(),
		"--namespace", Namespace, "--create-namespace",
		"--set", "image.repository=" + repo, "--set", "image.tag=" + tag}
	args = append(args, flags...)
	for _, s := range append(append([]string{}, k.opts.HelmSet...), set...) {
		args = append(args, "--set", s)
	}
	return exec.CommandContext(ctx, k.helm, args...).CombinedOutput()
}

// Join runs `replicafed join` for a member at its internal API server
// address, with the labels of KindInstallOptions.MemberLabels. A member
// already joined is left as it is.
func (k *KindInstallation) Join(ctx context.Context, name string) error {
	err := k.HubClient.Get(ctx, client.ObjectKey{Namespace: Namespace, Name: name}, &corev1.Secret{})
	if err == nil {
		return nil
	}
	if !apierrors.IsNotFound(err) {
		return fmt.Errorf("reading %s's hub Secret: %w", name, err)
	}
	return k.Rejoin(ctx, name)
}

// Rejoin runs `replicafed join` for a member whether or not it is
// registered: join replaces the credentials of a registered member with its
// own least-privilege ones. extra are more join flags, such as
// --propagate-dependencies.
func (k *KindInstallation) Rejoin(ctx context.Context, name string, extra ...string) error {
	m, server, err := k.memberServer(ctx, name)
	if err != nil {
		return err
	}
	args := []string{"join", name, "--member-kubeconfig", m.Kubeconfig(), "--hub-kubeconfig", k.Hub.Kubeconfig(),
		"--namespace", Namespace, "--member-server", server}
	if l := k.opts.MemberLabels[name]; len(l) > 0 {
		var kv []string
		for key, v := range l {
			kv = append(kv, key+"="+v)
		}
		sort.Strings(kv)
		args = append(args, "--labels", strings.Join(kv, ","))
	}
	args = append(args, extra...)
	if out, err := k.Replicafed(ctx, args...); err != nil {
		return fmt.Errorf("replicafed join %s: %w\n%s", name, err, out)
	}
	k.opts.Log("joined %s at %s", name, server)
	return nil
}

// memberServer is a member and its API server's address on the kind network.
func (k *KindInstallation) memberServer(ctx context.Context, name string) (*KindCluster, string, error) {
	m := k.Member(name)
	if m == nil {
		return nil, "", fmt.Errorf("no member %s", name)
	}
	server, err := m.InternalServer(ctx)
	return m, server, err
}

// registerWithSecret registers a member as chart 0.1.0's README did: a
// kubeconfig Secret in the release namespace, labelled for the default
// clusters.secretSelector, holding the member's admin credentials at its
// address on the kind network. A member already registered is left alone.
func (k *KindInstallation) registerWithSecret(ctx context.Context, name string) error {
	m, server, err := k.memberServer(ctx, name)
	if err != nil {
		return err
	}
	cfg := m.Config()
	raw, err := kubeconfig(name, server, cfg.CAData, &clientcmdapi.AuthInfo{
		ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken,
	})
	if err != nil {
		return err
	}
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: map[string]string{secretLabel: "true"}},
		Data:       map[string][]byte{"kubeconfig": raw},
	}
	for key, v := range k.opts.MemberLabels[name] {
		sec.Labels[key] = v
	}
	if err := k.HubClient.Create(ctx, sec); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the kubeconfig Secret of %s: %w", name, err)
	}
	k.opts.Log("registered %s at %s with a kubeconfig Secret", name, server)
	return nil
}

// Replicafed runs the replicafed binary (join, unjoin, ...) and returns its
// combined output.
func (k *KindInstallation) Replicafed(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, k.binary, args...).CombinedOutput()
}

// Kubectl runs kubectl against the hub and returns its combined output.
func (k *KindInstallation) Kubectl(ctx context.Context, args ...string) ([]byte, error) {
	return exec.CommandContext(ctx, k.kubectl, append([]string{"--kubeconfig", k.Hub.Kubeconfig()}, args...)...).CombinedOutput()
}

// Chart is the chart directory the installation installed.
func (k *KindInstallation) Chart() string { return k.chart }

// Member is the member cluster called name, or nil.
func (k *KindInstallation) Member(name string) *KindCluster {
	for _, m := range k.Members {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// Describe is the state of the chart's pods, recent events and the
// FederatedReplicaSets in the hub, and the replicas' logs, for failure
// messages.
func (k *KindInstallation) Describe(ctx context.Context) string {
	// Its own minute even when the caller's context has run out: that is
	// when the state is most wanted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "nodes,pods,pvc,pv", "-A", "-o", "wide"},
		{"get", "events", "-n", Namespace, "--sort-by", ".lastTimestamp"},
		{"get", "federatedreplicasets", "-A", "-o", "wide"},
		{"logs", "-n", Namespace, "-l", "app.kubernetes.io/name=replicafed", "--tail", "60", "--prefix", "--all-containers"},
	} {
		out, _ := k.Kubectl(ctx, args...)
		fmt.Fprintf(&b, "$ kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	return b.String()
}

// Stop deletes every cluster (unless kept), then the project's Docker
// network if no container is left on it, and the installation's files.
func (k *KindInstallation) Stop() {
	var wg sync.WaitGroup
	kept := false
	for _, c := range append([]*KindCluster{k.Hub}, k.Members...) {
		if c == nil {
			continue
		}
		kept = kept || c.keep
		wg.Add(1)
		go func() { defer wg.Done(); c.Stop() }()
	}
	wg.Wait()
	if !kept {
		// Refused while another cluster still uses it, which is right.
		_ = exec.Command("docker", "network", "rm", KindNetwork).Run()
	}
	_ = os.RemoveAll(k.dir)
}

// moduleRoot is the root of the module the test runs in.
func moduleRoot(ctx context.Context) (string, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(gomod))), nil
}
