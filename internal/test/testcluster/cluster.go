package testcluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Fake-node conventions understood by the kwok controller this package runs.
const (
	// KwokNodeKey is the annotation, label and taint key of kwok's fake nodes.
	KwokNodeKey = "kwok.x-k8s.io/node"
	// KwokNodeValue is the value of KwokNodeKey on fake nodes.
	KwokNodeValue = "fake"
)

// KwokToleration lets a pod land on the fake nodes, which carry a NoSchedule
// taint so that only pods meant for them are scheduled there.
var KwokToleration = corev1.Toleration{
	Key:      KwokNodeKey,
	Operator: corev1.TolerationOpEqual,
	Value:    KwokNodeValue,
	Effect:   corev1.TaintEffectNoSchedule,
}

// Options describes one cluster.
type Options struct {
	// Name labels the cluster in logs and names its kubeconfig context.
	Name string
	// Scheduler starts kube-scheduler.
	Scheduler bool
	// ControllerManager starts kube-controller-manager with the garbage
	// collector, node lifecycle and namespace controllers.
	ControllerManager bool
	// Nodes is the number of kwok fake nodes; more than zero starts kwok and
	// implies ControllerManager, since only its node lifecycle controller
	// lifts the not-ready taint from new nodes.
	Nodes int
	// NodeCPU, NodeMemory and NodePods are each fake node's allocatable
	// resources; defaults 32, 256Gi and 110.
	NodeCPU, NodeMemory string
	NodePods            int
	// NodeLabels are added to every fake node.
	NodeLabels map[string]string
	// CRDs are installed and waited for before Start returns.
	CRDs []*apiextensionsv1.CustomResourceDefinition
	// BinDir holds the binaries; default FindBinDir().
	BinDir string
	// APIServerArgs are extra kube-apiserver flags, "--name=value".
	APIServerArgs []string
	// KeepDir leaves the cluster directory (logs, data) in place after Stop.
	KeepDir bool
	// Metrics runs metrics-server, registered as metrics.k8s.io, scraping
	// the fake nodes' kubelet resource metrics that kwok serves; a pod's
	// usage is set by the annotations UsageCPUAnnotation and
	// UsageMemoryAnnotation. It needs Nodes > 0.
	Metrics bool
	// CustomMetrics runs a custom metrics adapter, registered as
	// custom.metrics.k8s.io and external.metrics.k8s.io, whose object
	// metrics a test sets with SetCustomMetric. It needs Metrics (the
	// aggregation layer's set-up).
	CustomMetrics bool
}

// Cluster is a running control plane.
type Cluster struct {
	// Name from Options.
	Name string
	// Config is an admin client configuration.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string
	// Dir holds data, certificates and logs.
	Dir string

	opts      Options
	bin       string
	apiPort   int
	apiArgs   []string
	mu        sync.Mutex
	etcd      *Process
	apiserver *Process
	others    []*Process
	stopped   bool
	// metrics is set when Options.Metrics is on.
	metrics *metricsSetup
	// customMetrics is set when Options.CustomMetrics is on.
	customMetrics *customMetricsSetup
}

// New starts a cluster. The caller must call Stop, also on error paths after
// New returned successfully.
func New(ctx context.Context, opts Options) (*Cluster, error) {
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	if opts.Nodes > 0 {
		opts.ControllerManager = true
	}
	bin := opts.BinDir
	if bin == "" {
		var err error
		if bin, err = FindBinDir(); err != nil {
			return nil, err
		}
	}
	need := append([]string{}, requiredBinaries...)
	if opts.Scheduler {
		need = append(need, "kube-scheduler")
	}
	if opts.ControllerManager {
		need = append(need, "kube-controller-manager")
	}
	if opts.Nodes > 0 {
		need = append(need, "kwok", "kwok-stages.yaml")
	}
	if opts.Metrics {
		if opts.Nodes == 0 {
			return nil, fmt.Errorf("cluster %s: Metrics needs fake nodes (Nodes > 0)", opts.Name)
		}
		need = append(need, "metrics-server", "kwok-metrics.yaml")
	}
	if opts.CustomMetrics {
		if !opts.Metrics {
			return nil, fmt.Errorf("cluster %s: CustomMetrics needs Metrics", opts.Name)
		}
		need = append(need, "custom-metrics")
	}
	if err := checkBinaries(bin, need...); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "replicafed-"+opts.Name+"-")
	if err != nil {
		return nil, fmt.Errorf("creating cluster directory: %w", err)
	}
	c := &Cluster{Name: opts.Name, Dir: dir, opts: opts, bin: bin}
	if err := c.start(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("starting cluster %s: %w", opts.Name, err)
	}
	return c, nil
}

func (c *Cluster) start(ctx context.Context) error {
	token, err := randomToken()
	if err != nil {
		return err
	}
	if err := c.startEtcd(ctx); err != nil {
		return err
	}
	if err := c.prepareAPIServer(token); err != nil {
		return err
	}
	if err := c.StartAPIServer(ctx); err != nil {
		return err
	}
	if c.opts.Scheduler {
		if err := c.startComponent("kube-scheduler", c.kubeComponentArgs()...); err != nil {
			return err
		}
	}
	// The CRDs go in before kube-controller-manager starts: its garbage
	// collector rediscovers resources only every 30 s, so it would ignore
	// the foreground deletion of a custom object (and its dependents) for up
	// to 30 s after a later install.
	if len(c.opts.CRDs) > 0 {
		if err := InstallCRDs(ctx, c.Config, c.opts.CRDs); err != nil {
			return err
		}
	}
	if c.opts.ControllerManager {
		if err := c.startComponent("kube-controller-manager", append(c.kubeComponentArgs(),
			"--use-service-account-credentials=false",
			"--controllers=garbagecollector,nodelifecycle,namespace,podgc",
			// Fake nodes report promptly; a short monitor period lifts the
			// not-ready taint within a second or two.
			"--node-monitor-period=1s",
			"--concurrent-gc-syncs=10",
		)...); err != nil {
			return err
		}
	}
	if c.opts.Nodes > 0 {
		args := []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + filepath.Join(c.bin, "kwok-stages.yaml"),
			"--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + KwokNodeKey + "=" + KwokNodeValue,
			// Leases keep fake nodes alive for the node lifecycle controller.
			"--node-lease-duration-seconds=40",
		}
		if c.metrics != nil {
			args = append(args, c.kwokMetricsArgs()...)
		} else {
			args = append(args, "--server-address=")
		}
		if err := c.startComponent("kwok", args...); err != nil {
			return err
		}
		if err := c.createNodes(ctx); err != nil {
			return err
		}
	}
	if c.metrics != nil {
		if err := c.startMetricsServer(ctx); err != nil {
			return err
		}
	}
	if c.opts.CustomMetrics {
		return c.startCustomMetrics(ctx)
	}
	return nil
}

func (c *Cluster) startEtcd(ctx context.Context) error {
	client, err := FreePort()
	if err != nil {
		return err
	}
	peer, err := FreePort()
	if err != nil {
		return err
	}
	clientURL := "http://" + hostPort(client)
	peerURL := "http://" + hostPort(peer)
	p := &Process{
		Name: "etcd",
		Path: filepath.Join(c.bin, "etcd"),
		Args: []string{
			"--name=default",
			"--data-dir=" + filepath.Join(c.Dir, "etcd"),
			"--listen-client-urls=" + clientURL,
			"--advertise-client-urls=" + clientURL,
			"--listen-peer-urls=" + peerURL,
			"--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// Test data is disposable; skipping fsync keeps a 2-core
			// machine responsive with several clusters running.
			"--unsafe-no-fsync",
			"--log-level=warn",
		},
		LogPath: filepath.Join(c.Dir, "etcd.log"),
	}
	if err := p.Start(); err != nil {
		return err
	}
	c.etcd = p
	c.apiArgs = append(c.apiArgs, "--etcd-servers="+clientURL)
	return waitFor(ctx, p, "etcd", func(ctx context.Context) error {
		conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", hostPort(client))
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

func (c *Cluster) prepareAPIServer(token string) error {
	certDir := filepath.Join(c.Dir, "pki")
	if err := os.MkdirAll(certDir, 0o700); err != nil {
		return fmt.Errorf("creating certificate directory: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return fmt.Errorf("generating serving certificate: %w", err)
	}
	certFile, err := writeFile(certDir, "apiserver.crt", certPEM)
	if err != nil {
		return err
	}
	keyFile, err := writeFile(certDir, "apiserver.key", keyPEM)
	if err != nil {
		return err
	}
	saKey, err := keyutil.MakeEllipticPrivateKeyPEM()
	if err != nil {
		return fmt.Errorf("generating service account key: %w", err)
	}
	saFile, err := writeFile(certDir, "sa.key", saKey)
	if err != nil {
		return err
	}
	tokens, err := writeFile(certDir, "tokens.csv", []byte(token+",admin,admin,system:masters\n"))
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	c.apiPort = port
	host := "https://" + hostPort(port)
	c.apiArgs = append(c.apiArgs,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
		"--cert-dir="+certDir,
		"--tls-cert-file="+certFile,
		"--tls-private-key-file="+keyFile,
		"--token-auth-file="+tokens,
		"--authorization-mode=RBAC",
		"--service-account-issuer="+host,
		"--service-account-key-file="+saFile,
		"--service-account-signing-key-file="+saFile,
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		// Pods are created without service accounts: the test clusters do
		// not run the service account controllers.
		"--disable-admission-plugins=ServiceAccount",
	)
	if c.opts.Metrics {
		if err := c.prepareAggregator(certDir); err != nil {
			return err
		}
	}
	c.apiArgs = append(c.apiArgs, c.opts.APIServerArgs...)

	c.Config = &rest.Config{
		Host:            host,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: certPEM},
		QPS:             -1, // tests and tools set their own limits
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters[c.Name] = &clientcmdapi.Cluster{Server: host, CertificateAuthorityData: certPEM}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts[c.Name] = &clientcmdapi.Context{Cluster: c.Name, AuthInfo: "admin"}
	kc.CurrentContext = c.Name
	c.Kubeconfig = filepath.Join(c.Dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, c.Kubeconfig); err != nil {
		return fmt.Errorf("writing kubeconfig: %w", err)
	}
	return nil
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the same
// port with the same data and credentials, and waits until it is ready.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errStopped
	}
	if c.apiserver != nil {
		if dead, _ := c.apiserver.Exited(); !dead {
			c.mu.Unlock()
			return nil
		}
	}
	p := &Process{
		Name:    "kube-apiserver",
		Path:    filepath.Join(c.bin, "kube-apiserver"),
		Args:    c.apiArgs,
		LogPath: filepath.Join(c.Dir, "kube-apiserver.log"),
	}
	if err := p.Start(); err != nil {
		c.mu.Unlock()
		return err
	}
	c.apiserver = p
	c.mu.Unlock()
	return c.waitReady(ctx, p)
}

// StopAPIServer stops kube-apiserver, leaving etcd and the other components
// running, so the cluster looks unreachable to its clients.
func (c *Cluster) StopAPIServer() {
	c.mu.Lock()
	p := c.apiserver
	c.mu.Unlock()
	if p != nil {
		p.Stop(10 * time.Second)
	}
}

func (c *Cluster) waitReady(ctx context.Context, p *Process) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building readiness client: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	return waitFor(ctx, p, "kube-apiserver /readyz", func(ctx context.Context) error {
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err
	})
}

// kubeComponentArgs are the flags kube-scheduler and kube-controller-manager
// share: the admin kubeconfig for everything, one instance, no serving port.
func (c *Cluster) kubeComponentArgs() []string {
	return []string{
		"--kubeconfig=" + c.Kubeconfig,
		"--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig,
		"--leader-elect=false",
		"--secure-port=0",
	}
}

func (c *Cluster) startComponent(name string, args ...string) error {
	p := &Process{
		Name:    name,
		Path:    filepath.Join(c.bin, name),
		Args:    args,
		LogPath: filepath.Join(c.Dir, name+".log"),
	}
	if err := p.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.others = append(c.others, p)
	c.mu.Unlock()
	return nil
}

// Stop ends every process of the cluster and removes its directory (unless
// Options.KeepDir). It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	others := c.others
	api, etcd := c.apiserver, c.etcd
	c.mu.Unlock()

	var wg sync.WaitGroup
	for _, p := range others {
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop(5 * time.Second) }()
	}
	wg.Wait()
	if api != nil {
		api.Stop(10 * time.Second)
	}
	if etcd != nil {
		etcd.Stop(5 * time.Second)
	}
	if !c.opts.KeepDir {
		_ = os.RemoveAll(c.Dir)
	}
}

// Logs returns the tail of every component's log, for failure reports.
func (c *Cluster) Logs(bytesPerComponent int64) string {
	c.mu.Lock()
	procs := append([]*Process{c.etcd, c.apiserver}, c.others...)
	c.mu.Unlock()
	out := ""
	for _, p := range procs {
		if p == nil {
			continue
		}
		out += fmt.Sprintf("==== %s/%s ====\n%s\n", c.Name, p.Name, p.Tail(bytesPerComponent))
	}
	return out
}

func randomToken() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating admin token: %w", err)
	}
	return hex.EncodeToString(b), nil
}
