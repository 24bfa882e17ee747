package charts

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// previousChart is the last released chart, as users have it installed.
const previousChart = "testdata/replicafed-0.1.0.tgz"

// longestDescription walks a CRD schema.
func longestDescription(s *apiextensionsv1.JSONSchemaProps) int {
	if s == nil {
		return 0
	}
	n := len(s.Description)
	walk := func(c *apiextensionsv1.JSONSchemaProps) {
		if m := longestDescription(c); m > n {
			n = m
		}
	}
	for _, p := range s.Properties {
		walk(&p)
	}
	if s.Items != nil {
		walk(s.Items.Schema)
	}
	if s.AdditionalProperties != nil {
		walk(s.AdditionalProperties.Schema)
	}
	return n
}

// TestUpgradeFromPrevious upgrades a release of the previous chart, whose CRD
// came from crds/ (installed once, never upgraded by helm), to this chart,
// which carries the CRD as a template: `helm upgrade --take-ownership`
// adopts and updates it.
func TestUpgradeFromPrevious(t *testing.T) {
	h := startHub(t, "hub", testcluster.Options{})
	ctx := context.Background()
	h.helm(t, "install", release, previousChart, "--namespace", namespace, "--create-namespace")
	before, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the previous chart installed no CRD: %v", err)
	}
	if longestDescription(before.Spec.Versions[0].Schema.OpenAPIV3Schema) <= 1000 {
		t.Fatal("the previous chart's CRD already has short descriptions: the test proves nothing")
	}

	// Without --take-ownership helm refuses to adopt the CRD it did not
	// create as a template; docs/install.md (Upgrade) says to pass it once.
	if _, err := h.tryHelm(t, "upgrade", release, chartDir, "--namespace", namespace); err == nil {
		t.Error("helm upgrade adopted the CRD without --take-ownership: docs/install.md's upgrade step is stale")
	} else if !strings.Contains(err.Error(), crdName) {
		t.Fatalf("helm upgrade failed, not on the CRD: %v", err)
	}
	h.helm(t, "upgrade", release, chartDir, "--namespace", namespace, "--take-ownership")

	after, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := crds.Load(crds.FederatedReplicaSetFile)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Spec.Versions[0].Schema, after.Spec.Versions[0].Schema); diff != "" {
		t.Errorf("helm upgrade did not bring the CRD schema to this chart's (-chart +after upgrade):\n%s", diff)
	}
	if after.Annotations["helm.sh/resource-policy"] != "keep" || after.Annotations["meta.helm.sh/release-name"] != release {
		t.Errorf("CRD annotations after upgrade %v: want kept and owned by release %s", after.Annotations, release)
	}
	out := h.helm(t, "history", release, "--namespace", namespace)
	if !strings.Contains(out, "replicafed-0.2.0") || !strings.Contains(out, "deployed") {
		t.Errorf("helm history after upgrade:\n%s", out)
	}

	// The raft certificates the upgrade generated.
	raftTLS := func() *corev1.Secret {
		t.Helper()
		s, err := h.kube.CoreV1().Secrets(namespace).Get(ctx, fullname+"-raft-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the chart's raft certificate Secret: %v", err)
		}
		return s
	}
	first := raftTLS()

	// Later upgrades change the CRD without any flag.
	h.helm(t, "upgrade", release, chartDir, "--namespace", namespace, "--set", "crds.install=true")
	if _, err := h.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, guardName, metav1.GetOptions{}); err == nil {
		t.Error("the uninstall guard was created by an upgrade; it is a pre-delete hook only")
	}
	// ... and keep the generated CA and certificate (lookup).
	// cmp.Equal, not Diff: the values hold private keys, kept out of the log.
	if again := raftTLS(); !cmp.Equal(again.Data, first.Data) {
		t.Error("an upgrade generated new raft certificates")
	}
	// More replicas need a certificate for more names: new certificate,
	// same CA, so running replicas keep trusting it.
	h.helm(t, "upgrade", release, chartDir, "--namespace", namespace, "--set", "replicas=5")
	scaled := raftTLS()
	if !bytes.Equal(scaled.Data["ca.crt"], first.Data["ca.crt"]) || !bytes.Equal(scaled.Data["ca.key"], first.Data["ca.key"]) {
		t.Error("scaling up replaced the raft CA")
	}
	if bytes.Equal(scaled.Data["tls.crt"], first.Data["tls.crt"]) {
		t.Error("scaling up kept a certificate that does not name the new pods")
	}
}

// TestCRDClientSideApply applies the generated CRDs with client-side
// `kubectl apply -f` (its last-applied annotation must fit the 256 KiB
// annotation limit) and shows the untrimmed CRD of the previous chart does
// not.
func TestCRDClientSideApply(t *testing.T) {
	h := startHub(t, "hub", testcluster.Options{})
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", h.c.Kubeconfig}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+t.TempDir())
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	old := filepath.Join(t.TempDir(), "old-crd.yaml")
	if err := os.WriteFile(old, fileFromChart(t, previousChart, "replicafed/crds/"+crds.FederatedReplicaSetFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("apply", "-f", old); err == nil || !strings.Contains(out, "Too long") {
		t.Errorf("the untrimmed CRD applied client-side (%v): the size check proves nothing\n%s", err, out)
	}
	out, err := kubectl("apply", "-f", "../api/crds/")
	if err != nil {
		t.Fatalf("kubectl apply -f api/crds: %v\n%s", err, out)
	}
	crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(context.Background(), crdName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if crd.Annotations["kubectl.kubernetes.io/last-applied-configuration"] == "" {
		t.Error("no last-applied annotation: the apply was not client-side")
	}
	// A second apply diffs against the annotation.
	if out, err := kubectl("apply", "-f", "../api/crds/"); err != nil {
		t.Fatalf("re-applying: %v\n%s", err, out)
	}
}

// fileFromChart reads one file from a packaged chart.
func fileFromChart(t *testing.T, tgz, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(tgz)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("%s has no %s", tgz, name)
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
