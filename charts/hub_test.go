package charts

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	utilptr "k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// waitTimeout bounds every wait on a real control plane; generous, for a
// loaded two-core machine.
const waitTimeout = 90 * time.Second

// poll calls cond until it returns true or waitTimeout passes; the last
// error explains a timeout.
func poll(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var last error
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s (last error: %v)", what, last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// hub is a real control plane the chart is installed into with bin/helm.
type hub struct {
	c    *testcluster.Cluster
	kube kubernetes.Interface
	ext  apiextensionsclient.Interface
	cl   client.Client
}

func startHub(t *testing.T, name string, opts testcluster.Options) *hub {
	t.Helper()
	helmBin(t) // fail early without helm
	opts.Name = name
	c := testcluster.Start(t, opts)
	kube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	ext, err := apiextensionsclient.NewForConfig(c.Config)
	if err != nil {
		t.Fatal(err)
	}
	return &hub{c: c, kube: kube, ext: ext, cl: clientFor(t, c)}
}

// helm runs bin/helm against this hub.
func (h *hub) helm(t *testing.T, args ...string) string {
	t.Helper()
	out, err := h.tryHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (h *hub) tryHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	return runHelm(t, append(args, "--kubeconfig", h.c.Kubeconfig)...)
}

// kubectl runs bin/kubectl against this hub.
func (h *hub) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", h.c.Kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECACHEDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loopbackNet returns a random 127.a.b. prefix: each replica gets its own
// loopback address, as each pod has its own IP, so all of them listen on the
// chart's ports; the random prefix keeps parallel runs apart.
func loopbackNet(t *testing.T) string {
	t.Helper()
	b := make([]byte, 2)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.%d.%d.", 1+int(b[0])%254, int(b[1]))
}

// pod is one replicafed process run as a StatefulSet pod would run it.
type pod struct {
	name, ip string
	dir      string
	logPath  string
	cmd      *exec.Cmd
	done     chan struct{}
	health   string // host:port of the readiness probe
	admin    string
}

func (p *pod) log() string {
	b, _ := os.ReadFile(p.logPath)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}

// lastLine is the pod's last log line containing msg.
func (p *pod) lastLine(msg string) string {
	b, _ := os.ReadFile(p.logPath)
	var last string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, msg) {
			last = line
		}
	}
	return last
}

// stop sends SIGTERM, as the kubelet does, and waits for the exit.
func (p *pod) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
	p.cmd = nil
}

// podRunner starts replicafed processes from the objects the chart created
// in the hub, as the kubelet would start the StatefulSet's pods. What cannot
// be the same on one machine without a kubelet or cluster DNS is replaced,
// and only that:
//   - the pod network: each pod's listeners bind its own loopback address
//     instead of 0.0.0.0, and the peers' DNS names
//     (<pod>.<headless Service>.<namespace>.svc, checked against the real
//     headless Service) resolve to those addresses, both through
//     REPLICAFED_* variables derived from the rendered config (ports kept);
//   - mounts: the ConfigMap's key is written to a file and --config points
//     there; Secret volumes (raft TLS) are written to a directory and the
//     config's paths into them follow (REPLICAFED_RAFT_TLS_*); the PVC is a
//     directory (REPLICAFED_RAFT_DATA_DIR keeps the path inside the mount);
//   - the service account token mount: a TokenRequest token for the pod's
//     ServiceAccount goes in a kubeconfig (REPLICAFED_HUB_KUBECONFIG) instead
//     of /var/run/secrets/kubernetes.io/serviceaccount.
//
// The environment is otherwise exactly the pod's: nothing is inherited
// from the test process.
type podRunner struct {
	h      *hub
	binary string
	dir    string
	net    string
	pods   map[string]*pod
}

func newPodRunner(t *testing.T, h *hub, binary string) *podRunner {
	r := &podRunner{h: h, binary: binary, dir: t.TempDir(), net: loopbackNet(t), pods: map[string]*pod{}}
	t.Cleanup(func() {
		for _, p := range r.pods {
			if t.Failed() {
				t.Logf("--- %s log ---\n%s", p.name, p.log())
			}
			p.stop()
		}
	})
	return r
}

// renderedConfig is the subset of the chart's config file the runner maps.
type renderedConfig struct {
	Raft struct {
		BindAddress  string `json:"bindAddress"`
		AdminAddress string `json:"adminAddress"`
		DataDir      string `json:"dataDir"`
		TLS          struct {
			CertFile string `json:"certFile"`
			KeyFile  string `json:"keyFile"`
			CAFile   string `json:"caFile"`
		} `json:"tls"`
		Peers []struct {
			ID      string `json:"id"`
			Address string `json:"address"`
		} `json:"peers"`
	} `json:"raft"`
	Metrics struct {
		BindAddress string `json:"bindAddress"`
	} `json:"metrics"`
	Health struct {
		ProbeAddress string `json:"probeAddress"`
	} `json:"health"`
	Clusters struct {
		SecretNamespace string `json:"secretNamespace"`
		SecretSelector  string `json:"secretSelector"`
		SecretKey       string `json:"secretKey"`
	} `json:"clusters"`
}

// startAll starts every replica of the StatefulSet ns/name.
func (r *podRunner) startAll(t *testing.T, ns, name string) {
	t.Helper()
	ctx := context.Background()
	sts, err := r.h.kube.AppsV1().StatefulSets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the chart's StatefulSet: %v", err)
	}
	for i := 0; i < int(utilptr.Deref(sts.Spec.Replicas, 1)); i++ {
		r.start(t, sts, i)
	}
}

// ipOf is the loopback address standing for pod i's IP.
func (r *podRunner) ipOf(i int) string { return r.net + strconv.Itoa(i+1) }

func (r *podRunner) start(t *testing.T, sts *appsv1.StatefulSet, ordinal int) {
	t.Helper()
	ctx := context.Background()
	ns := sts.Namespace
	podName := fmt.Sprintf("%s-%d", sts.Name, ordinal)
	spec := sts.Spec.Template.Spec
	if len(spec.Containers) != 1 || len(spec.InitContainers) > 0 {
		t.Fatalf("want one container and no init containers, got %d and %d", len(spec.Containers), len(spec.InitContainers))
	}
	c := spec.Containers[0]
	if len(c.Command) > 0 || len(c.EnvFrom) > 0 {
		t.Fatalf("container sets command %q or envFrom: the runner expects the image entrypoint and plain env", c.Command)
	}
	p := &pod{name: podName, ip: r.ipOf(ordinal), dir: filepath.Join(r.dir, podName)}
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		t.Fatal(err)
	}

	// Volumes: the ConfigMap file behind --config, and the PVC.
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	var args []string
	var cfgRaw string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			local, raw := r.materializeConfig(t, c, volumes, ns, v, p.dir)
			a, cfgRaw = "--config="+local, raw
		}
		args = append(args, a)
	}
	if cfgRaw == "" {
		t.Fatalf("container args %q name no --config file", c.Args)
	}
	var cfg renderedConfig
	if err := yaml.Unmarshal([]byte(cfgRaw), &cfg); err != nil {
		t.Fatalf("parsing the rendered config: %v", err)
	}

	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = r.resolveEnv(t, ctx, ns, podName, p.ip, e)
	}

	// Pod network: same ports, this pod's address.
	for key, addr := range map[string]string{
		"RAFT_BIND_ADDRESS": cfg.Raft.BindAddress, "RAFT_ADMIN_ADDRESS": cfg.Raft.AdminAddress,
		"METRICS_BIND_ADDRESS": cfg.Metrics.BindAddress, "HEALTH_PROBE_ADDRESS": cfg.Health.ProbeAddress,
	} {
		env["REPLICAFED_"+key] = onPodIP(t, addr, p.ip)
	}
	p.health, p.admin = env["REPLICAFED_HEALTH_PROBE_ADDRESS"], env["REPLICAFED_RAFT_ADMIN_ADDRESS"]
	var peers []string
	dnsName := regexp.MustCompile(`^` + regexp.QuoteMeta(sts.Name) + `-(\d+)\.` + regexp.QuoteMeta(sts.Spec.ServiceName) + `\.` + regexp.QuoteMeta(ns) + `\.svc$`)
	for _, peer := range cfg.Raft.Peers {
		host, port, err := net.SplitHostPort(peer.Address)
		if err != nil {
			t.Fatalf("raft peer %s: %v", peer.ID, err)
		}
		m := dnsName.FindStringSubmatch(host)
		if m == nil || peer.ID != sts.Name+"-"+m[1] {
			t.Fatalf("raft peer %s at %s is not <pod>.%s.%s.svc of its own pod", peer.ID, host, sts.Spec.ServiceName, ns)
		}
		n, _ := strconv.Atoi(m[1])
		peers = append(peers, peer.ID+"="+net.JoinHostPort(r.ipOf(n), port))
	}
	env["REPLICAFED_RAFT_PEERS"] = strings.Join(peers, ",")

	// The PVC: the data dir keeps its path inside the claim's mount.
	var dataMount string
	for _, vm := range c.VolumeMounts {
		if len(sts.Spec.VolumeClaimTemplates) == 1 && vm.Name == sts.Spec.VolumeClaimTemplates[0].Name {
			dataMount = vm.MountPath
		}
	}
	rel, err := filepath.Rel(dataMount, cfg.Raft.DataDir)
	if dataMount == "" || err != nil || strings.HasPrefix(rel, "..") {
		t.Fatalf("raft.dataDir %q is not on the PVC (mounted at %q)", cfg.Raft.DataDir, dataMount)
	}
	env["REPLICAFED_RAFT_DATA_DIR"] = filepath.Join(p.dir, "pvc", rel)

	// Secret volumes (raft TLS): the real Secret's items, written where the
	// mount would put them; the config's paths into them follow.
	mounts := r.materializeSecrets(t, ctx, c, volumes, ns, p.dir)
	for key, file := range map[string]string{
		"RAFT_TLS_CERT_FILE": cfg.Raft.TLS.CertFile, "RAFT_TLS_KEY_FILE": cfg.Raft.TLS.KeyFile, "RAFT_TLS_CA_FILE": cfg.Raft.TLS.CAFile,
	} {
		if file == "" {
			continue
		}
		local, ok := mapMounted(mounts, file)
		if !ok {
			t.Fatalf("%s %s is not in any Secret volume the pod mounts", key, file)
		}
		env["REPLICAFED_"+key] = local
	}

	// The service account token mount.
	if !utilptr.Deref(spec.AutomountServiceAccountToken, true) {
		t.Fatal("the pods do not mount a service account token, but replicafed talks to the hub")
	}
	env["REPLICAFED_HUB_KUBECONFIG"] = r.tokenKubeconfig(t, ctx, ns, spec.ServiceAccountName, p.dir)

	// Probes: the kubelet's view of readiness.
	if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet == nil {
		t.Fatal("no HTTP readiness probe")
	}
	if port := containerPort(t, c, c.ReadinessProbe.HTTPGet.Port.String()); !strings.HasSuffix(p.health, ":"+port) {
		t.Fatalf("readiness probe port %s is not the health listener %s", port, p.health)
	}

	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	p.logPath = filepath.Join(p.dir, "replicafed.log")
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(r.binary, args...)
	cmd.Env = envList
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", podName, err)
	}
	p.cmd, p.done = cmd, make(chan struct{})
	go func(done chan struct{}) { _ = cmd.Wait(); _ = logf.Close(); close(done) }(p.done)
	r.pods[podName] = p
}

// materializeSecrets writes every Secret volume the container mounts (the
// projected items, or every key) under dir, and returns mount path -> local
// directory.
func (r *podRunner) materializeSecrets(t *testing.T, ctx context.Context, c corev1.Container, volumes map[string]corev1.Volume, ns, dir string) map[string]string {
	t.Helper()
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		v := volumes[vm.Name]
		if v.Secret == nil {
			continue
		}
		if vm.SubPath != "" {
			t.Fatalf("Secret volume %s mounted with subPath: not supported by the runner", vm.Name)
		}
		s, err := r.h.kube.CoreV1().Secrets(ns).Get(ctx, v.Secret.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("Secret volume %s: %v", vm.Name, err)
		}
		local := filepath.Join(dir, "mounts", vm.Name)
		if err := os.MkdirAll(local, 0o700); err != nil {
			t.Fatal(err)
		}
		items := v.Secret.Items
		if len(items) == 0 {
			for k := range s.Data {
				items = append(items, corev1.KeyToPath{Key: k, Path: k})
			}
		}
		for _, it := range items {
			data, ok := s.Data[it.Key]
			if !ok {
				t.Fatalf("Secret %s has no key %s (volume %s)", s.Name, it.Key, vm.Name)
			}
			if err := os.WriteFile(filepath.Join(local, it.Path), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		mounts[vm.MountPath] = local
	}
	return mounts
}

// mapMounted maps a path inside the pod to the local file behind its mount.
func mapMounted(mounts map[string]string, file string) (string, bool) {
	for mp, local := range mounts {
		if rel, err := filepath.Rel(mp, file); err == nil && !strings.HasPrefix(rel, "..") {
			return filepath.Join(local, rel), true
		}
	}
	return "", false
}

// raftTLSSecret creates the Secret raft.tls.secretName names: a CA and one
// certificate for every peer, valid for the peer DNS names the chart's
// comment asks for and, because the runner dials peers by their loopback
// addresses (the transport checks the dialled host), for those addresses.
func raftTLSSecret(t *testing.T, h *hub, ns, name string, ips []string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "raft-test-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: fullname},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    []string{"*." + headless + "." + ns + ".svc"},
	}
	for i, ip := range ips {
		leaf.IPAddresses = append(leaf.IPAddresses, net.ParseIP(ip))
		// Each pod's own name: the raft identity, since the runner's peer
		// addresses are IPs, which identify nobody.
		leaf.DNSNames = append(leaf.DNSNames, fmt.Sprintf("%s-%d", fullname, i), fmt.Sprintf("%s-%d.%s.%s.svc", fullname, i, headless, ns))
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			"tls.crt": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
			"tls.key": pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
			"ca.crt":  pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		},
	}
	if _, err := h.kube.CoreV1().Secrets(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating the raft TLS Secret: %v", err)
	}
}

// materializeConfig finds the ConfigMap volume mounted at path and writes
// the file to dir.
func (r *podRunner) materializeConfig(t *testing.T, c corev1.Container, volumes map[string]corev1.Volume, ns, file, dir string) (string, string) {
	t.Helper()
	for _, vm := range c.VolumeMounts {
		var key string
		switch {
		case vm.SubPath != "" && vm.MountPath == file:
			key = vm.SubPath
		case vm.SubPath == "" && path.Dir(file) == vm.MountPath:
			key = path.Base(file)
		default:
			continue
		}
		v := volumes[vm.Name]
		if v.ConfigMap == nil {
			t.Fatalf("--config %s is on volume %s, which is not a ConfigMap", file, vm.Name)
		}
		cm, err := r.h.kube.CoreV1().ConfigMaps(ns).Get(context.Background(), v.ConfigMap.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading ConfigMap %s: %v", v.ConfigMap.Name, err)
		}
		data, ok := cm.Data[key]
		if !ok {
			t.Fatalf("ConfigMap %s has no key %s", cm.Name, key)
		}
		local := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(local, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		return local, data
	}
	t.Fatalf("--config %s is not on any volume mount", file)
	return "", ""
}

func (r *podRunner) resolveEnv(t *testing.T, ctx context.Context, ns, podName, ip string, e corev1.EnvVar) string {
	t.Helper()
	switch {
	case e.ValueFrom == nil:
		return e.Value
	case e.ValueFrom.FieldRef != nil:
		switch e.ValueFrom.FieldRef.FieldPath {
		case "metadata.name":
			return podName
		case "metadata.namespace":
			return ns
		case "status.podIP":
			return ip
		}
	case e.ValueFrom.SecretKeyRef != nil:
		ref := e.ValueFrom.SecretKeyRef
		s, err := r.h.kube.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("env %s: %v", e.Name, err)
		}
		return string(s.Data[ref.Key])
	}
	t.Fatalf("env %s: cannot resolve %+v", e.Name, e.ValueFrom)
	return ""
}

// tokenKubeconfig asks the TokenRequest API for a token of the pod's
// ServiceAccount, as the kubelet does for the projected token volume.
func (r *podRunner) tokenKubeconfig(t *testing.T, ctx context.Context, ns, sa, dir string) string {
	t.Helper()
	if sa == "" {
		t.Fatal("the pods run as the default ServiceAccount")
	}
	tr, err := r.h.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: utilptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for ServiceAccount %s/%s: %v", ns, sa, err)
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["hub"] = &clientcmdapi.Cluster{Server: r.h.c.Config.Host, CertificateAuthorityData: r.h.c.Config.CAData}
	kc.AuthInfos[sa] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	kc.Contexts["hub"] = &clientcmdapi.Context{Cluster: "hub", AuthInfo: sa, Namespace: ns}
	kc.CurrentContext = "hub"
	file := filepath.Join(dir, "serviceaccount.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, file); err != nil {
		t.Fatal(err)
	}
	return file
}

func containerPort(t *testing.T, c corev1.Container, nameOrNumber string) string {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == nameOrNumber {
			return strconv.Itoa(int(p.ContainerPort))
		}
	}
	return nameOrNumber
}

// onPodIP moves a listen address onto the pod's IP, keeping its port.
func onPodIP(t *testing.T, addr, ip string) string {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "" || port == "0" {
		t.Fatalf("listen address %q has no fixed port", addr)
	}
	if host != "" && host != "0.0.0.0" && host != "::" {
		t.Fatalf("listen address %q is not on every interface: the pod's Services could not reach it", addr)
	}
	return net.JoinHostPort(ip, port)
}

// waitReady waits until every pod passes its readiness probe, as the kubelet
// would report the StatefulSet ready.
func (r *podRunner) waitReady(t *testing.T) {
	t.Helper()
	for _, p := range r.pods {
		poll(t, p.name+" ready", func(ctx context.Context) (bool, error) {
			select {
			case <-p.done:
				t.Fatalf("%s exited:\n%s", p.name, p.log())
			default:
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.health+"/readyz", nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return false, err
			}
			_ = resp.Body.Close()
			return resp.StatusCode == http.StatusOK, fmt.Errorf("readyz: %s", resp.Status)
		})
	}
}

func (r *podRunner) stopAll() {
	for _, p := range r.pods {
		p.stop()
	}
}

// logSizes marks where each pod's log ends now, for forbidden.
func (r *podRunner) logSizes() map[string]int {
	out := map[string]int{}
	for _, p := range r.pods {
		b, _ := os.ReadFile(p.logPath)
		out[p.name] = len(b)
	}
	return out
}

// forbidden reports log lines where the hub refused replicafed: the chart's
// RBAC is short of something. Only lines after since (logSizes; nil: from
// the start) count: an uninstall removes the RBAC while the processes that
// stand for its pods still run, and their refusals then say nothing about
// the chart.
func (r *podRunner) forbidden(since map[string]int) []string {
	var out []string
	for _, p := range r.pods {
		b, _ := os.ReadFile(p.logPath)
		b = b[min(since[p.name], len(b)):]
		for _, line := range bytes.Split(b, []byte("\n")) {
			if bytes.Contains(bytes.ToLower(line), []byte("forbidden")) {
				out = append(out, p.name+": "+string(line))
			}
		}
	}
	return out
}

// buildReplicafed compiles this checkout's binary once per test.
func buildReplicafed(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "replicafed")
	// The flags of `make image`, so the image and this binary share their
	// compiled dependencies.
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "../cmd/replicafed")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building replicafed: %v\n%s", err, b)
	}
	return out
}

// registerMember registers the member the way NOTES.txt tells users to:
// `replicafed join`, which grants the least-privilege member ClusterRole to a
// ServiceAccount in the member and writes the labelled kubeconfig Secret into
// the hub, with the namespace, label and key the rendered config reads.
func registerMember(t *testing.T, h *hub, binary string, cfg renderedConfig, name string, member *testcluster.Cluster) {
	t.Helper()
	set, err := labels.ConvertSelectorToLabelsMap(cfg.Clusters.SecretSelector)
	if err != nil || len(set) != 1 {
		t.Fatalf("secretSelector %q is not one key=value (%v)", cfg.Clusters.SecretSelector, err)
	}
	var label string
	for k, v := range set {
		if v != "true" {
			t.Fatalf("secretSelector %q: join labels Secrets %s=true", cfg.Clusters.SecretSelector, k)
		}
		label = k
	}
	cmd := exec.Command(binary, "join", name, "--member-kubeconfig", member.Kubeconfig, "--hub-kubeconfig", h.c.Kubeconfig,
		"--namespace", cfg.Clusters.SecretNamespace, "--secret-label", label, "--secret-key", cfg.Clusters.SecretKey)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("replicafed join: %v\n%s", err, out)
	}
}

// configOf reads the rendered config from the real ConfigMap.
func configOf(t *testing.T, h *hub) renderedConfig {
	t.Helper()
	cm, err := h.kube.CoreV1().ConfigMaps(namespace).Get(context.Background(), fullname+"-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var cfg renderedConfig
	if err := yaml.Unmarshal([]byte(cm.Data[configKey]), &cfg); err != nil {
		t.Fatal(err)
	}
	return cfg
}
