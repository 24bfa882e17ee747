package testcluster

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// Pod annotations kwok reads a pod's usage from when Options.Metrics is on
// (kwok's ClusterResourceUsage "usage-from-annotation"): quantities, for
// example "250m" and "64Mi"; without them a pod uses 1m and 1Mi.
const (
	UsageCPUAnnotation    = "kwok.x-k8s.io/usage-cpu"
	UsageMemoryAnnotation = "kwok.x-k8s.io/usage-memory"
)

// resourceMetricsPathAnnotation is metrics-server's per-node override of
// the kubelet's /metrics/resource path: kwok serves every fake node's
// resource metrics from one server, under the node's name.
const resourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"

// metricsSetup is what Options.Metrics adds to a cluster.
type metricsSetup struct {
	// kwokPort is the port of kwok's server, every fake node's kubelet port.
	kwokPort int
	// kwokCert and kwokKey are kwok's serving certificate files.
	kwokCert, kwokKey string
	// serverPort is metrics-server's secure port.
	serverPort int
}

// prepareAggregator sets up what an aggregated API server needs: the
// front-proxy client CA the API server vouches for users with, and its
// client certificate. It runs before the API server first starts.
func (c *Cluster) prepareAggregator(certDir string) error {
	caCert, caKey, caPEM, err := newCA("replicafed-test-front-proxy-ca")
	if err != nil {
		return err
	}
	certPEM, keyPEM, err := signClient(caCert, caKey, "front-proxy-client")
	if err != nil {
		return err
	}
	caFile, err := writeFile(certDir, "front-proxy-ca.crt", caPEM)
	if err != nil {
		return err
	}
	certFile, err := writeFile(certDir, "front-proxy-client.crt", certPEM)
	if err != nil {
		return err
	}
	keyFile, err := writeFile(certDir, "front-proxy-client.key", keyPEM)
	if err != nil {
		return err
	}
	kwokCertPEM, kwokKeyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return fmt.Errorf("generating kwok serving certificate: %w", err)
	}
	m := &metricsSetup{}
	if m.kwokCert, err = writeFile(certDir, "kwok.crt", kwokCertPEM); err != nil {
		return err
	}
	if m.kwokKey, err = writeFile(certDir, "kwok.key", kwokKeyPEM); err != nil {
		return err
	}
	if m.kwokPort, err = FreePort(); err != nil {
		return err
	}
	if m.serverPort, err = FreePort(); err != nil {
		return err
	}
	c.metrics = m
	c.apiArgs = append(c.apiArgs,
		"--requestheader-client-ca-file="+caFile,
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file="+certFile,
		"--proxy-client-key-file="+keyFile,
	)
	return nil
}

// kwokMetricsArgs are kwok's flags for serving the fake kubelets' resource
// metrics: its server on a local port that every fake node reports as its
// kubelet endpoint, and the Metric and usage rules of kwok-metrics.yaml.
func (c *Cluster) kwokMetricsArgs() []string {
	m := c.metrics
	return []string{
		"--config=" + filepath.Join(c.bin, "kwok-metrics.yaml"),
		"--server-address=" + hostPort(m.kwokPort),
		"--tls-cert-file=" + m.kwokCert,
		"--tls-private-key-file=" + m.kwokKey,
		"--node-ip=127.0.0.1",
		"--node-port=" + strconv.Itoa(m.kwokPort),
	}
}

// startMetricsServer runs metrics-server against kwok's fake kubelets and
// registers it as v1beta1.metrics.k8s.io, then waits until the API server
// reports the APIService available.
func (c *Cluster) startMetricsServer(ctx context.Context) error {
	m := c.metrics
	if err := c.startComponent("metrics-server",
		"--kubeconfig="+c.Kubeconfig,
		"--authentication-kubeconfig="+c.Kubeconfig,
		"--authorization-kubeconfig="+c.Kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(m.serverPort),
		"--cert-dir="+filepath.Join(c.Dir, "metrics-server"),
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-use-node-status-port",
		// kwok's serving certificate is self-signed.
		"--kubelet-insecure-tls",
		// The shortest metrics-server allows: a CPU rate needs two scrapes.
		"--metric-resolution=10s",
		"--kubelet-request-timeout=5s",
	); err != nil {
		return err
	}
	return c.registerAPIServices(ctx, "metrics-server", m.serverPort, schema.GroupVersion{Group: "metrics.k8s.io", Version: "v1beta1"})
}

// registerAPIServices registers the aggregated API server on the host's
// port as the given group versions, then waits until the API server
// reports each APIService available.
func (c *Cluster) registerAPIServices(ctx context.Context, name string, port int, gvs ...schema.GroupVersion) error {
	cs, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building client for %s registration: %w", name, err)
	}
	// An ExternalName Service lets the aggregator reach a process on the
	// host: there is no kube-proxy, so a ClusterIP would lead nowhere.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: metav1.NamespaceSystem},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "127.0.0.1",
			Ports: []corev1.ServicePort{{Name: "https", Port: int32(port)}}},
	}
	if _, err := cs.CoreV1().Services(svc.Namespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the %s Service: %w", name, err)
	}
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("building client for %s registration: %w", name, err)
	}
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	for _, gv := range gvs {
		apiService := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": gv.Version + "." + gv.Group},
			"spec": map[string]any{
				"group": gv.Group, "version": gv.Version,
				"service": map[string]any{"namespace": metav1.NamespaceSystem, "name": name, "port": int64(port)},
				// The server's certificate is self-signed (--cert-dir).
				"insecureSkipTLSVerify": true,
				"groupPriorityMinimum":  int64(100), "versionPriority": int64(100),
			},
		}}
		if _, err := apiServices.Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering %s as %s: %w", name, gv, err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for _, gv := range gvs {
		if err := waitFor(ctx, nil, gv.String()+" APIService Available", func(ctx context.Context) error {
			got, err := apiServices.Get(ctx, gv.Version+"."+gv.Group, metav1.GetOptions{})
			if err != nil {
				return err
			}
			conds, _, _ := unstructured.NestedSlice(got.Object, "status", "conditions")
			for _, raw := range conds {
				cond, _ := raw.(map[string]any)
				if cond["type"] == "Available" {
					if cond["status"] == "True" {
						return nil
					}
					return fmt.Errorf("APIService not available: %v: %v", cond["reason"], cond["message"])
				}
			}
			return fmt.Errorf("APIService has no Available condition yet")
		}); err != nil {
			return err
		}
	}
	return nil
}

func newCA(cn string) (*x509.Certificate, crypto.Signer, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating CA key: %w", err)
	}
	cert, err := certutil.NewSelfSignedCACert(certutil.Config{CommonName: cn}, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("generating CA %s: %w", cn, err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: cert.Raw}), nil
}

// signClient issues a client certificate for cn, valid for a day.
func signClient(ca *x509.Certificate, caKey crypto.Signer, cn string) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("generating client key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return nil, nil, fmt.Errorf("generating serial: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("signing client certificate %s: %w", cn, err)
	}
	keyPEM, err := keyutil.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding client key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: certutil.CertificateBlockType, Bytes: der}), keyPEM, nil
}
