package charts

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

const (
	chartDir    = "replicafed"
	release     = "rf"
	namespace   = "rf-system"
	fullname    = "rf-replicafed"
	headless    = "rf-replicafed-peers"
	configPath  = "/etc/replicafed/config.yaml"
	raftTLSDir  = "/etc/replicafed/raft-tls"
	configKey   = "config.yaml"
	containerNm = "replicafed"
)

// helmBin returns bin/helm, skipping in -short mode when it is not built.
func helmBin(t *testing.T) string {
	t.Helper()
	dir, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatalf("finding bin dir: %v", err)
	}
	bin := filepath.Join(dir, "helm")
	if _, err := os.Stat(bin); err != nil {
		if testing.Short() {
			t.Skipf("helm not built (%v); run `make tools`", err)
		}
		t.Fatalf("helm not built (run `make tools`): %v", err)
	}
	return bin
}

// trackChart reads every chart file once in the test process: helm reads
// them in a subprocess, which go test's result cache does not see, so a
// changed chart would otherwise reuse a cached pass.
var trackChart = sync.OnceValue(func() error {
	for _, dir := range []string{chartDir, "testdata"} {
		err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			_, err = os.ReadFile(path)
			return err
		})
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
})

// runHelm runs bin/helm with its state directories inside a temp dir, so
// the test neither reads nor writes the user's helm settings.
func runHelm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	if err := trackChart(); err != nil {
		t.Fatalf("reading the chart: %v", err)
	}
	bin := helmBin(t)
	home := t.TempDir()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// manifests holds the typed objects of one render.
type manifests struct {
	statefulSet         *appsv1.StatefulSet
	services            map[string]*corev1.Service
	configMap           *corev1.ConfigMap
	serviceAccount      *corev1.ServiceAccount
	pdb                 *policyv1.PodDisruptionBudget
	clusterRoles        []*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
	roles               []*rbacv1.Role
	roleBindings        []*rbacv1.RoleBinding
	policies            []*admissionv1.ValidatingAdmissionPolicy
	policyBindings      []*admissionv1.ValidatingAdmissionPolicyBinding
	mutatingPolicies    []*admissionv1.MutatingAdmissionPolicy
	mutatingBindings    []*admissionv1.MutatingAdmissionPolicyBinding
	networkPolicies     []*networkingv1.NetworkPolicy
	crds                []*apiextensionsv1.CustomResourceDefinition
	secrets             []*corev1.Secret
	// metricsReader and authDelegator are the metrics.secure RBAC: a role for
	// scrapers and replicafed's binding to system:auth-delegator.
	metricsReader *rbacv1.ClusterRole
	authDelegator *rbacv1.ClusterRoleBinding
	// certManager holds cert-manager objects (Issuer, Certificate) as
	// rendered; their types are not in this module.
	certManager []map[string]any
	// monitoring holds Prometheus Operator objects (ServiceMonitor,
	// PrometheusRule) as rendered, and dashboards the Grafana dashboard
	// ConfigMaps.
	monitoring []map[string]any
	dashboards []*corev1.ConfigMap
	// hooks are objects helm creates only at a hook (helm.sh/hook), such as
	// the pre-delete uninstall guard; `helm template` prints them too.
	hooks []map[string]any
	kinds []string
}

// template renders the chart with extra helm flags and decodes every object
// strictly, so a misspelt field fails the test.
func template(t *testing.T, flags ...string) *manifests {
	t.Helper()
	args := append([]string{"template", release, chartDir, "--namespace", namespace}, flags...)
	out, err := runHelm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, out)
}

// yamlDocs decodes the documents of helm's output, leaving out empty ones.
func yamlDocs(t *testing.T, out string) []map[string]any {
	t.Helper()
	var docs []map[string]any
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var u map[string]any
		if err := dec.Decode(&u); err != nil {
			if errors.Is(err, io.EOF) {
				return docs
			}
			t.Fatalf("decoding rendered YAML: %v", err)
		}
		if u != nil {
			docs = append(docs, u)
		}
	}
}

func decode(t *testing.T, out string) *manifests {
	t.Helper()
	m := &manifests{services: map[string]*corev1.Service{}}
	for _, u := range yamlDocs(t, out) {
		kind, _ := u["kind"].(string)
		if md, _ := u["metadata"].(map[string]any); md != nil {
			if ann, _ := md["annotations"].(map[string]any); ann["helm.sh/hook"] != nil {
				m.hooks = append(m.hooks, u)
				continue
			}
		}
		m.kinds = append(m.kinds, kind)
		var obj any
		switch kind {
		case "StatefulSet":
			m.statefulSet = &appsv1.StatefulSet{}
			obj = m.statefulSet
		case "Service":
			obj = &corev1.Service{}
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if name, _ := u["metadata"].(map[string]any)["name"].(string); strings.HasSuffix(name, "-dashboard") {
				m.dashboards = append(m.dashboards, cm)
			} else {
				m.configMap = cm
			}
			obj = cm
		case "ServiceAccount":
			m.serviceAccount = &corev1.ServiceAccount{}
			obj = m.serviceAccount
		case "PodDisruptionBudget":
			m.pdb = &policyv1.PodDisruptionBudget{}
			obj = m.pdb
		case "ClusterRole":
			r := &rbacv1.ClusterRole{}
			if name, _ := u["metadata"].(map[string]any)["name"].(string); strings.HasSuffix(name, "-metrics-reader") {
				m.metricsReader = r
			} else {
				m.clusterRoles = append(m.clusterRoles, r)
			}
			obj = r
		case "ClusterRoleBinding":
			r := &rbacv1.ClusterRoleBinding{}
			if name, _ := u["metadata"].(map[string]any)["name"].(string); strings.HasSuffix(name, "-auth-delegator") {
				m.authDelegator = r
			} else {
				m.clusterRoleBindings = append(m.clusterRoleBindings, r)
			}
			obj = r
		case "Role":
			r := &rbacv1.Role{}
			m.roles = append(m.roles, r)
			obj = r
		case "RoleBinding":
			r := &rbacv1.RoleBinding{}
			m.roleBindings = append(m.roleBindings, r)
			obj = r
		case "ValidatingAdmissionPolicy":
			p := &admissionv1.ValidatingAdmissionPolicy{}
			m.policies = append(m.policies, p)
			obj = p
		case "ValidatingAdmissionPolicyBinding":
			p := &admissionv1.ValidatingAdmissionPolicyBinding{}
			m.policyBindings = append(m.policyBindings, p)
			obj = p
		case "MutatingAdmissionPolicy":
			p := &admissionv1.MutatingAdmissionPolicy{}
			m.mutatingPolicies = append(m.mutatingPolicies, p)
			obj = p
		case "MutatingAdmissionPolicyBinding":
			p := &admissionv1.MutatingAdmissionPolicyBinding{}
			m.mutatingBindings = append(m.mutatingBindings, p)
			obj = p
		case "CustomResourceDefinition":
			c := &apiextensionsv1.CustomResourceDefinition{}
			m.crds = append(m.crds, c)
			obj = c
		case "NetworkPolicy":
			p := &networkingv1.NetworkPolicy{}
			m.networkPolicies = append(m.networkPolicies, p)
			obj = p
		case "Secret":
			sec := &corev1.Secret{}
			m.secrets = append(m.secrets, sec)
			obj = sec
		case "ServiceMonitor", "PrometheusRule":
			if u["apiVersion"] != "monitoring.coreos.com/v1" {
				t.Fatalf("%s of apiVersion %v", kind, u["apiVersion"])
			}
			m.monitoring = append(m.monitoring, u)
			continue
		case "Issuer", "Certificate":
			if u["apiVersion"] != "cert-manager.io/v1" {
				t.Fatalf("%s of apiVersion %v", kind, u["apiVersion"])
			}
			m.certManager = append(m.certManager, u)
			continue
		default:
			t.Fatalf("unexpected kind %q rendered", kind)
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u, obj, true); err != nil {
			t.Fatalf("decoding %s strictly: %v", kind, err)
		}
		if s, ok := obj.(*corev1.Service); ok {
			m.services[s.Name] = s
		}
	}
	return m
}

func (m *manifests) container(t *testing.T) corev1.Container {
	t.Helper()
	if m.statefulSet == nil {
		t.Fatal("no StatefulSet rendered")
	}
	for _, c := range m.statefulSet.Spec.Template.Spec.Containers {
		if c.Name == containerNm {
			return c
		}
	}
	t.Fatalf("no container %q in the StatefulSet", containerNm)
	return corev1.Container{}
}

// loadConfig loads the rendered config as pod `pod` would: with the
// container's args (the --config path pointed at a temp copy) and its env
// (downward API fields resolved for that pod).
func (m *manifests) loadConfig(t *testing.T, pod string) (*config.Config, error) {
	t.Helper()
	if m.configMap == nil {
		t.Fatal("no ConfigMap rendered")
	}
	data, ok := m.configMap.Data[configKey]
	if !ok {
		t.Fatalf("ConfigMap has no %s key", configKey)
	}
	// The raft certificate files exist only in the pod: stand-ins in a temp
	// dir (config checks that they exist, not what they hold).
	tlsDir := t.TempDir()
	for _, f := range []string{"tls.crt", "tls.key", "ca.crt"} {
		if err := os.WriteFile(filepath.Join(tlsDir, f), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	data = strings.ReplaceAll(data, raftTLSDir+"/", tlsDir+"/")
	path := filepath.Join(t.TempDir(), configKey)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	c := m.container(t)
	var args []string
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			if v != configPath {
				t.Errorf("--config = %q, want %q", v, configPath)
			}
			a = "--config=" + path
		}
		args = append(args, a)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			env[e.Name] = pod
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
			env[e.Name] = namespace
		case e.ValueFrom.SecretKeyRef != nil:
			env[e.Name] = "secret:" + e.ValueFrom.SecretKeyRef.Name + "/" + e.ValueFrom.SecretKeyRef.Key
		default:
			t.Fatalf("env %s: cannot resolve %+v", e.Name, e.ValueFrom)
		}
	}
	fs := pflag.NewFlagSet("replicafed", pflag.ContinueOnError)
	config.BindFlags(fs)
	return config.Load(fs, args, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

// defaultConfig is what the binary uses with no file at all.
func defaultConfig(t *testing.T) *config.Config {
	t.Helper()
	fs := pflag.NewFlagSet("replicafed", pflag.ContinueOnError)
	config.BindFlags(fs)
	cfg, err := config.Load(fs, nil, func(k string) (string, bool) {
		switch k {
		case "POD_NAME":
			return "solo", true
		case "REPLICAFED_RAFT_TLS_INSECURE": // no certificates here
			return "true", true
		}
		return "", false
	})
	if err != nil {
		t.Fatalf("loading defaults: %v", err)
	}
	return cfg
}

func TestLint(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"defaults", nil},
		{"strict", []string{"--strict"}},
		{"strict five replicas with tls and static members", []string{"--strict",
			"--set", "replicas=5", "--set", "raft.tls.secretName=raft-tls",
			"--set-json", `clusters.static=[{"name":"m1","secretName":"m1-kubeconfig","labels":{"region":"eu"}}]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"lint", chartDir, "--namespace", namespace}, tc.flags...)
			if _, err := runHelm(t, args...); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestRender(t *testing.T) {
	for _, replicas := range []int{1, 3, 5} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			var flags []string
			if replicas != 3 {
				flags = []string{"--set", fmt.Sprintf("replicas=%d", replicas)}
			}
			m := template(t, flags...)
			checkStatefulSet(t, m, replicas)
			checkServices(t, m)
			checkPDB(t, m)
			checkPolicy(t, m)
			checkConfig(t, m, replicas)
		})
	}
}

func checkStatefulSet(t *testing.T, m *manifests, replicas int) {
	t.Helper()
	sts := m.statefulSet
	if sts.Name != fullname || sts.Namespace != namespace {
		t.Errorf("StatefulSet %s/%s, want %s/%s", sts.Namespace, sts.Name, namespace, fullname)
	}
	if sts.Spec.Replicas == nil || int(*sts.Spec.Replicas) != replicas {
		t.Errorf("replicas = %v, want %d", sts.Spec.Replicas, replicas)
	}
	if sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy = %q, want Parallel", sts.Spec.PodManagementPolicy)
	}
	if sts.Spec.ServiceName != headless {
		t.Errorf("serviceName = %q, want %q", sts.Spec.ServiceName, headless)
	}
	if len(sts.Spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("volumeClaimTemplates = %d, want 1", len(sts.Spec.VolumeClaimTemplates))
	}
	pvc := sts.Spec.VolumeClaimTemplates[0]
	if got := pvc.Spec.Resources.Requests.Storage().String(); got != "1Gi" {
		t.Errorf("PVC size = %s, want 1Gi", got)
	}
	if pvc.Spec.StorageClassName != nil {
		t.Errorf("storageClassName = %q, want unset (cluster default)", *pvc.Spec.StorageClassName)
	}

	pod := sts.Spec.Template.Spec
	if pod.TerminationGracePeriodSeconds == nil || *pod.TerminationGracePeriodSeconds < 30 {
		t.Errorf("terminationGracePeriodSeconds = %v, want >= 30 for the leadership transfer", pod.TerminationGracePeriodSeconds)
	}
	if pod.SecurityContext == nil || pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot {
		t.Error("pod securityContext.runAsNonRoot is not true")
	}
	if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
		t.Errorf("want one soft podAntiAffinity term, got %+v", pod.Affinity)
	}

	c := m.container(t)
	if diff := cmp.Diff([]string{"--config=" + configPath}, c.Args); diff != "" {
		t.Errorf("args (-want +got):\n%s", diff)
	}
	wantPorts := map[string]int32{"raft": 7000, "admin": 7001, "metrics": 8080, "health": 8081}
	gotPorts := map[string]int32{}
	for _, p := range c.Ports {
		gotPorts[p.Name] = p.ContainerPort
	}
	if diff := cmp.Diff(wantPorts, gotPorts); diff != "" {
		t.Errorf("ports (-want +got):\n%s", diff)
	}
	for name, probe := range map[string]*corev1.Probe{"/healthz": c.LivenessProbe, "/readyz": c.ReadinessProbe} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != name || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("probe %s: got %+v", name, probe)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil || c.Lifecycle.PreStop.Sleep == nil {
		t.Errorf("want a preStop sleep, got %+v", c.Lifecycle)
	} else if s := c.Lifecycle.PreStop.Sleep.Seconds; int64(s)+10 > *pod.TerminationGracePeriodSeconds {
		t.Errorf("preStop sleep %ds leaves under 10s of the %ds grace period for the leadership transfer", s, *pod.TerminationGracePeriodSeconds)
	}
	sc := c.SecurityContext
	switch {
	case sc == nil:
		t.Fatal("container has no securityContext")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("readOnlyRootFilesystem is not true")
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot:
		t.Error("container runAsNonRoot is not true")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("allowPrivilegeEscalation is not false")
	case sc.Capabilities == nil || !cmp.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) > 0:
		t.Errorf("capabilities = %+v, want drop ALL", sc.Capabilities)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
		t.Errorf("seccompProfile = %+v, want RuntimeDefault", sc.SeccompProfile)
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	if mounts["config"] != configPath {
		t.Errorf("config mounted at %q, want %q", mounts["config"], configPath)
	}
	if mounts[pvc.Name] == "" {
		t.Errorf("PVC %q is not mounted", pvc.Name)
	}
	if m.configMap != nil {
		var cmVol bool
		for _, v := range pod.Volumes {
			if v.Name == "config" && v.ConfigMap != nil && v.ConfigMap.Name == m.configMap.Name {
				cmVol = true
			}
		}
		if !cmVol {
			t.Errorf("volume config does not point at ConfigMap %s", m.configMap.Name)
		}
	}
}

func checkServices(t *testing.T, m *manifests) {
	t.Helper()
	h, ok := m.services[headless]
	if !ok {
		t.Fatalf("no headless Service %s; got %v", headless, m.kinds)
	}
	if h.Spec.ClusterIP != corev1.ClusterIPNone || !h.Spec.PublishNotReadyAddresses {
		t.Errorf("headless Service: clusterIP=%q publishNotReadyAddresses=%v", h.Spec.ClusterIP, h.Spec.PublishNotReadyAddresses)
	}
	if !hasPort(h, "raft", 7000) {
		t.Errorf("headless Service lacks raft port 7000: %+v", h.Spec.Ports)
	}
	if ms, ok := m.services[fullname+"-metrics"]; !ok || !hasPort(ms, "metrics", 8080) {
		t.Errorf("metrics Service missing or without port 8080: %+v", ms)
	}
	labels := m.statefulSet.Spec.Template.Labels
	for name, s := range m.services {
		for k, v := range s.Spec.Selector {
			if labels[k] != v {
				t.Errorf("Service %s selector %s=%s does not match the pod labels %v", name, k, v, labels)
			}
		}
	}
}

func hasPort(s *corev1.Service, name string, port int32) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == name && p.Port == port && p.TargetPort.String() == name {
			return true
		}
	}
	return false
}

func checkPDB(t *testing.T, m *manifests) {
	t.Helper()
	if m.pdb == nil {
		t.Fatal("no PodDisruptionBudget rendered")
	}
	if mu := m.pdb.Spec.MaxUnavailable; mu == nil || mu.IntValue() != 1 {
		t.Errorf("PDB maxUnavailable = %v, want 1", mu)
	}
	for k, v := range m.pdb.Spec.Selector.MatchLabels {
		if m.statefulSet.Spec.Template.Labels[k] != v {
			t.Errorf("PDB selector %s=%s does not match the pods", k, v)
		}
	}
}

// checkPolicy checks the generated admission policy is bound and denies.
func checkPolicy(t *testing.T, m *manifests) {
	t.Helper()
	// The selector policy; the Pod Security ones are checked in security_test.go.
	pol, bind := m.policy("federatedreplicasets.replicafed.io")
	if pol == nil || bind == nil {
		t.Fatalf("want the selector ValidatingAdmissionPolicy and its binding, got %d policies and %d bindings", len(m.policies), len(m.policyBindings))
	}
	if !slices.Contains(bind.Spec.ValidationActions, admissionv1.Deny) {
		t.Errorf("binding %+v does not deny through policy %s", bind.Spec, pol.Name)
	}
}

func checkConfig(t *testing.T, m *manifests, replicas int) {
	t.Helper()
	def := defaultConfig(t)
	for i := range replicas {
		pod := fmt.Sprintf("%s-%d", fullname, i)
		cfg, err := m.loadConfig(t, pod)
		if err != nil {
			t.Fatalf("config for %s does not load: %v", pod, err)
		}
		if len(cfg.Raft.Peers) != replicas {
			t.Fatalf("%d raft peers, want %d", len(cfg.Raft.Peers), replicas)
		}
		for j, p := range cfg.Raft.Peers {
			want := config.Peer{
				ID:      fmt.Sprintf("%s-%d", fullname, j),
				Address: fmt.Sprintf("%s-%d.%s.%s.svc:7000", fullname, j, headless, namespace),
			}
			if p != want {
				t.Errorf("raft.peers[%d] = %+v, want %+v", j, p, want)
			}
		}
		if cfg.Raft.ID != pod {
			t.Errorf("raft.id = %q, want the pod name %q", cfg.Raft.ID, pod)
		}
		if want := cfg.Raft.Peers[i].Address; cfg.Raft.AdvertiseAddress != want {
			t.Errorf("raft.advertiseAddress = %q, want %q", cfg.Raft.AdvertiseAddress, want)
		}
		if cfg.Hub.Namespace != namespace || cfg.Clusters.SecretNamespace != namespace {
			t.Errorf("hub.namespace = %q, clusters.secretNamespace = %q, want %q", cfg.Hub.Namespace, cfg.Clusters.SecretNamespace, namespace)
		}
		if cfg.Raft.TLS.Insecure || !cfg.Raft.TLS.Enabled() || cfg.Raft.AdminToken != "" {
			t.Errorf("raft TLS (%+v) off or admin token (%q) set by default", cfg.Raft.TLS, cfg.Raft.AdminToken)
		}
		if !cfg.Metrics.Secure {
			t.Error("metrics.secure is off by default")
		}
		if cfg.Raft.ClusterID != fullname {
			t.Errorf("raft.clusterID = %q, want %q", cfg.Raft.ClusterID, fullname)
		}
		// The chart lists the binary's defaults in values.yaml; catch drift.
		if diff := cmp.Diff(def.Controller, cfg.Controller); diff != "" {
			t.Errorf("controller differs from the binary's defaults (-binary +chart):\n%s", diff)
		}
		if diff := cmp.Diff(def.Failover, cfg.Failover); diff != "" {
			t.Errorf("failover differs from the binary's defaults (-binary +chart):\n%s", diff)
		}
		if cfg.Clusters.SecretSelector != def.Clusters.SecretSelector || cfg.Clusters.SecretKey != def.Clusters.SecretKey {
			t.Errorf("clusters = %+v, binary defaults %+v", cfg.Clusters, def.Clusters)
		}
		checkListeners(t, m, cfg)
	}
}

// checkListeners matches the config's listen ports with the container's
// ports and the PVC mount with raft.dataDir.
func checkListeners(t *testing.T, m *manifests, cfg *config.Config) {
	t.Helper()
	c := m.container(t)
	ports := map[string]string{}
	for _, p := range c.Ports {
		ports[p.Name] = fmt.Sprint(p.ContainerPort)
	}
	for name, addr := range map[string]string{
		"raft": cfg.Raft.BindAddress, "admin": cfg.Raft.AdminAddress,
		"metrics": cfg.Metrics.BindAddress, "health": cfg.Health.ProbeAddress,
	} {
		if !strings.HasSuffix(addr, ":"+ports[name]) {
			t.Errorf("config listens on %q for %s, container port is %s", addr, name, ports[name])
		}
	}
	pvc := m.statefulSet.Spec.VolumeClaimTemplates[0].Name
	for _, vm := range c.VolumeMounts {
		if vm.Name == pvc && vm.MountPath != cfg.Raft.DataDir {
			t.Errorf("PVC mounted at %q, raft.dataDir is %q", vm.MountPath, cfg.Raft.DataDir)
		}
	}
}

func TestScheduling(t *testing.T) {
	for _, tc := range []struct {
		name, antiAffinity, storageClass string
		wantClass                        *string
	}{
		{"hard anti-affinity, no storage class", "hard", "-", ptr("")},
		{"no anti-affinity, named storage class", "none", "fast-ssd", ptr("fast-ssd")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := template(t,
				"--set", "podAntiAffinity="+tc.antiAffinity,
				"--set", "persistence.storageClassName="+tc.storageClass,
				"--set-json", `topologySpreadConstraints=[{"maxSkew":1,"topologyKey":"topology.kubernetes.io/zone","whenUnsatisfiable":"ScheduleAnyway"}]`,
			)
			pod := m.statefulSet.Spec.Template.Spec
			switch tc.antiAffinity {
			case "hard":
				if a := pod.Affinity; a == nil || a.PodAntiAffinity == nil || len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 1 {
					t.Errorf("want one required anti-affinity term, got %+v", pod.Affinity)
				}
			case "none":
				if pod.Affinity != nil {
					t.Errorf("want no affinity, got %+v", pod.Affinity)
				}
			}
			if len(pod.TopologySpreadConstraints) != 1 {
				t.Fatalf("topologySpreadConstraints = %+v", pod.TopologySpreadConstraints)
			}
			sel := pod.TopologySpreadConstraints[0].LabelSelector
			if sel == nil {
				t.Errorf("spread constraint has no selector, want the pod selector")
			} else if diff := cmp.Diff(m.statefulSet.Spec.Selector.MatchLabels, sel.MatchLabels); diff != "" {
				t.Errorf("spread constraint selector, want the pod selector (-pod selector +spread):\n%s", diff)
			}
			got := m.statefulSet.Spec.VolumeClaimTemplates[0].Spec.StorageClassName
			if (got == nil) != (tc.wantClass == nil) || got != nil && *got != *tc.wantClass {
				t.Errorf("storageClassName = %v, want %v", got, *tc.wantClass)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// The hub CRD is a template (so `helm upgrade` updates it) that `helm
// uninstall` keeps; it matches api/crds apart from that annotation.
func TestCRDs(t *testing.T) {
	m := template(t)
	files := []string{crds.FederatedReplicaSetFile, crds.MemberClusterFile, crds.AutoscalerFile}
	if len(m.crds) != len(files) {
		t.Fatalf("want the FederatedReplicaSet, MemberCluster and FederatedHorizontalPodAutoscaler CRDs rendered, got %d CRDs", len(m.crds))
	}
	for i, file := range files {
		got := m.crds[i]
		want, err := crds.Load(file)
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations["helm.sh/resource-policy"] != "keep" {
			t.Errorf("CRD %s annotations %v, want helm.sh/resource-policy: keep", got.Name, got.Annotations)
		}
		delete(got.Annotations, "helm.sh/resource-policy")
		if got.Name != want.Name {
			t.Errorf("the chart's CRD %s is named %s in api/crds/%s: run `make generate`", got.Name, want.Name, file)
		}
		if diff := cmp.Diff(want.Annotations, got.Annotations); diff != "" {
			t.Errorf("the chart's CRD %s annotations differ from api/crds/%s (-api +chart), run `make generate`:\n%s", got.Name, file, diff)
		}
		if diff := cmp.Diff(want.Spec, got.Spec); diff != "" {
			t.Errorf("the chart's CRD %s differs from api/crds/%s (-api +chart), run `make generate`:\n%s", got.Name, file, diff)
		}
	}
	if out, err := runHelm(t, "template", release, chartDir, "--namespace", namespace, "--set", "crds.install=false"); err != nil {
		t.Fatal(err)
	} else if strings.Contains(out, "kind: CustomResourceDefinition") {
		t.Error("crds.install=false still renders the CRD")
	}
	if entries, err := os.ReadDir(filepath.Join(chartDir, "crds")); err == nil && len(entries) > 0 {
		t.Errorf("charts/replicafed/crds is not empty: helm would install those once and never upgrade them")
	}
}

func TestConfigOverrides(t *testing.T) {
	m := template(t,
		"--set", "controller.workers=7",
		"--set", "failover.moveBack=OnRecovery",
		"--set", "logging.level=4",
		"--set-json", `config={"raft":{"snapshotThreshold":4096},"controller":{"burstReplicas":50}}`,
	)
	cfg, err := m.loadConfig(t, fullname+"-1")
	if err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	if cfg.Controller.Workers != 7 || cfg.Controller.BurstReplicas != 50 {
		t.Errorf("controller = %+v, want workers 7 and burstReplicas 50", cfg.Controller)
	}
	if cfg.Failover.MoveBack != "OnRecovery" || cfg.Logging.Level != "4" || cfg.Raft.SnapshotThreshold != 4096 {
		t.Errorf("overrides lost: moveBack=%q level=%q snapshotThreshold=%d", cfg.Failover.MoveBack, cfg.Logging.Level, cfg.Raft.SnapshotThreshold)
	}
	if len(cfg.Raft.Peers) != 3 {
		t.Errorf("config override dropped the generated peers: %+v", cfg.Raft.Peers)
	}

	// Keys the pod spec depends on cannot be overridden behind its back.
	for _, set := range []string{
		"config.raft.dataDir=/data", "config.raft.bindAddress=0.0.0.0:9000", "config.raft.peers=null",
		"config.metrics.bindAddress=:9090", "config.health.probeAddress=:9091", "config.raft.adminToken=s3cret",
	} {
		args := []string{"template", release, chartDir, "--namespace", namespace, "--set", set}
		if _, err := runHelm(t, args...); err == nil || !strings.Contains(err.Error(), "derived by the chart") && !strings.Contains(err.Error(), "secret in a ConfigMap") {
			t.Errorf("--set %s: want a refusal, got %v", set, err)
		}
	}
}

func TestAdminToken(t *testing.T) {
	m := template(t, "--set", "raft.adminToken.secretName=raft-admin", "--set", "raft.clusterID=prod-eu")
	cfg, err := m.loadConfig(t, fullname+"-2")
	if err != nil {
		t.Fatalf("config does not load: %v", err)
	}
	if want := "secret:raft-admin/token"; cfg.Raft.AdminToken != want {
		t.Errorf("raft.adminToken = %q, want it from env %q", cfg.Raft.AdminToken, want)
	}
	if cfg.Raft.ClusterID != "prod-eu" {
		t.Errorf("raft.clusterID = %q, want prod-eu", cfg.Raft.ClusterID)
	}
	if strings.Contains(m.configMap.Data[configKey], "adminToken") {
		t.Error("the ConfigMap mentions the admin token")
	}
}

func TestTLSAndStaticMembers(t *testing.T) {
	m := template(t,
		"--set", "raft.tls.secretName=raft-tls",
		"--set-json", `clusters.static=[{"name":"eu.west","secretName":"eu-kubeconfig","secretKey":"config","labels":{"region":"eu"},`+
			`"taints":[{"key":"maintenance","value":"planned","effect":"NoExecute","timeAdded":"2026-01-02T03:04:05Z"}]}]`,
	)
	_, err := m.loadConfig(t, fullname+"-0")
	// The files only exist inside the pod: the config must name them and
	// nothing else may be wrong.
	cfgErrs := config.FieldErrors(err)
	files := map[string]bool{}
	for _, fe := range cfgErrs {
		files[fe.Key] = true
		if !strings.HasPrefix(fe.Key, "raft.tls.") && !strings.HasPrefix(fe.Key, "clusters.static[0].kubeconfig") {
			t.Errorf("unexpected config problem: %v", fe)
		}
	}
	for _, k := range []string{"clusters.static[0].kubeconfig"} {
		if !files[k] {
			t.Errorf("%s is not set to a pod path (problems: %v)", k, err)
		}
	}

	// Read the paths from the raw file and check they land in the mounts.
	raw := m.configMap.Data[configKey]
	var rendered struct {
		Clusters struct {
			Static []struct {
				Name   string            `json:"name"`
				Labels map[string]string `json:"labels"`
				Taints []struct {
					Key, Value, Effect, TimeAdded string
				} `json:"taints"`
			} `json:"static"`
		} `json:"clusters"`
	}
	if err := utilyaml.Unmarshal([]byte(raw), &rendered); err != nil {
		t.Fatalf("decoding the rendered config: %v", err)
	}
	if st := rendered.Clusters.Static; len(st) != 1 || st[0].Labels["region"] != "eu" || len(st[0].Taints) != 1 ||
		st[0].Taints[0].Key != "maintenance" || st[0].Taints[0].Value != "planned" || st[0].Taints[0].Effect != "NoExecute" ||
		st[0].Taints[0].TimeAdded != "2026-01-02T03:04:05Z" {
		t.Errorf("static member labels and taints not rendered into the config: %+v\n%s", st, raw)
	}
	c := m.container(t)
	mounts := map[string]corev1.VolumeMount{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm
	}
	vols := map[string]corev1.Volume{}
	for _, v := range m.statefulSet.Spec.Template.Spec.Volumes {
		vols[v.Name] = v
	}
	for _, want := range []struct{ volume, secret, file string }{
		{"raft-tls", "raft-tls", "tls.crt"},
		{"raft-tls", "raft-tls", "tls.key"},
		{"raft-tls", "raft-tls", "ca.crt"},
		{"cluster-0", "eu-kubeconfig", "config"},
	} {
		vm, ok := mounts[want.volume]
		if !ok {
			t.Errorf("volume %s not mounted", want.volume)
			continue
		}
		path := vm.MountPath + "/" + want.file
		if !strings.Contains(raw, path) {
			t.Errorf("config does not reference %s:\n%s", path, raw)
		}
		v := vols[want.volume]
		if v.Secret == nil || v.Secret.SecretName != want.secret {
			t.Errorf("volume %s is not Secret %s: %+v", want.volume, want.secret, v)
			continue
		}
		var found bool
		for _, it := range v.Secret.Items {
			found = found || (it.Key == want.file && it.Path == want.file)
		}
		if !found {
			t.Errorf("volume %s does not project key %s", want.volume, want.file)
		}
	}
}

func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
		ok    bool
	}{
		{"one replica", []string{"--set", "replicas=1"}, true},
		{"five replicas", []string{"--set", "replicas=5"}, true},
		{"numeric log level", []string{"--set", "logging.level=4"}, true},
		{"bad log level", []string{"--set", "logging.level=verbose"}, false},
		{"two replicas", []string{"--set", "replicas=2"}, false},
		{"four replicas", []string{"--set", "replicas=4"}, false},
		{"zero replicas", []string{"--set", "replicas=0"}, false},
		{"replicas as string", []string{"--set-string", "replicas=3"}, false},
		{"unknown top-level key", []string{"--set", "replicaCount=3"}, false},
		{"unknown nested key", []string{"--set", "raft.tls.cert=x"}, false},
		{"bad duration", []string{"--set", "failover.unreachableGracePeriod=1 minute"}, false},
		{"bad moveBack", []string{"--set", "failover.moveBack=Sometimes"}, false},
		{"zero workers", []string{"--set", "controller.workers=0"}, false},
		{"too many hub workers", []string{"--set", "controller.hubWorkers=2000"}, false},
		{"bad port", []string{"--set", "raft.port=70000"}, false},
		{"bad anti-affinity", []string{"--set", "podAntiAffinity=maybe"}, false},
		{"static member without secret", []string{"--set-json", `clusters.static=[{"name":"m1"}]`}, false},
		{"static member taint", []string{"--set-json", `clusters.static=[{"name":"m1","secretName":"s","taints":[{"key":"spot","effect":"NoExecute","timeAdded":"2026-01-02T03:04:05Z"}]}]`}, true},
		{"static member taint with bad effect", []string{"--set-json", `clusters.static=[{"name":"m1","secretName":"s","taints":[{"key":"spot","effect":"PreferNoSchedule"}]}]`}, false},
		{"static member taint without key", []string{"--set-json", `clusters.static=[{"name":"m1","secretName":"s","taints":[{"effect":"NoSchedule"}]}]`}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"template", release, chartDir, "--namespace", namespace}, tc.flags...)
			_, err := runHelm(t, args...)
			switch {
			case tc.ok && err != nil:
				t.Fatalf("want success: %v", err)
			case !tc.ok && err == nil:
				t.Fatal("helm template succeeded, want a schema error")
			case !tc.ok && !strings.Contains(err.Error(), "schema"):
				t.Fatalf("failed, but not on the schema: %v", err)
			}
		})
	}
}

func TestRBAC(t *testing.T) {
	for _, tc := range []struct {
		name, secretNamespace string
		flags                 []string
	}{
		{"registry in release namespace", namespace, nil},
		{"registry elsewhere", "fleet", []string{"--set", "clusters.secretNamespace=fleet"}},
		{"dependency propagation", namespace, []string{"--set", "rbac.propagateDependencies=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := template(t, tc.flags...)
			sa := m.serviceAccount
			if sa == nil {
				t.Fatal("no ServiceAccount rendered")
			}
			if got := m.statefulSet.Spec.Template.Spec.ServiceAccountName; got != sa.Name {
				t.Errorf("pods run as %q, ServiceAccount is %q", got, sa.Name)
			}
			m.clusterRoles = withoutAggregated(m.clusterRoles) // checked in TestAggregatedRoles
			// The leader Lease role is checked in TestLeaderLeaseRBAC.
			m.roles = slices.DeleteFunc(m.roles, func(r *rbacv1.Role) bool { return r.Name == fullname+"-leader-lease" })
			m.roleBindings = slices.DeleteFunc(m.roleBindings, func(r *rbacv1.RoleBinding) bool { return r.Name == fullname+"-leader-lease" })
			if len(m.clusterRoles) != 1 || len(m.roles) != 1 {
				t.Fatalf("want 1 ClusterRole and 1 Role, got %d and %d", len(m.clusterRoles), len(m.roles))
			}
			var all []rbacv1.PolicyRule
			for _, r := range m.clusterRoles {
				all = append(all, r.Rules...)
				for _, rule := range r.Rules {
					deps := tc.name == "dependency propagation" && cmp.Equal(rule.Resources,
						[]string{"configmaps", "secrets", "serviceaccounts", "persistentvolumeclaims"})
					switch {
					case deps && !cmp.Equal(rule.Verbs, []string{"get"}):
						t.Errorf("dependency rule may do more than get: %+v", rule)
					case !deps && contains(rule.Resources, "secrets"):
						t.Errorf("ClusterRole %s grants Secrets cluster-wide: %+v", r.Name, rule)
					}
				}
				if tc.name == "dependency propagation" && !granted(r.Rules, "", "secrets", []string{"get"}) {
					t.Errorf("rbac.propagateDependencies=true does not grant get on Secrets")
				}
			}
			for _, r := range m.roles {
				all = append(all, r.Rules...)
				if r.Namespace != tc.secretNamespace {
					t.Errorf("Role %s in namespace %q, want %q", r.Name, r.Namespace, tc.secretNamespace)
				}
				for _, rule := range r.Rules {
					if contains(rule.Resources, "secrets") && !subset(rule.Verbs, "get", "list", "watch") {
						t.Errorf("Role %s may write Secrets: %+v", r.Name, rule)
					}
				}
			}
			for _, rule := range all {
				for _, field := range [][]string{rule.Verbs, rule.Resources, rule.APIGroups, rule.ResourceNames, rule.NonResourceURLs} {
					if contains(field, "*") {
						t.Errorf("wildcard in rule %+v", rule)
					}
				}
				if len(rule.NonResourceURLs) > 0 {
					t.Errorf("non-resource URLs granted: %+v", rule)
				}
			}
			for _, want := range []struct {
				group, resource string
				verbs           []string
			}{
				{"replicafed.io", "federatedreplicasets", []string{"get", "list", "watch", "update", "patch"}},
				{"replicafed.io", "federatedreplicasets/status", []string{"get", "update", "patch"}},
				{"replicafed.io", "federatedreplicasets/finalizers", []string{"update"}},
				{"replicafed.io", "federatedreplicasets/scale", []string{"get", "update", "patch"}},
				{"", "events", []string{"create", "patch"}},
				{"events.k8s.io", "events", []string{"create", "patch"}},
				{"", "namespaces", []string{"get", "list", "watch"}},
				{"apps", "controllerrevisions", []string{"get", "list", "create", "update", "delete"}},
				{"replicafed.io", "memberclusters", []string{"get", "list", "watch", "create", "delete"}},
				{"replicafed.io", "memberclusters/status", []string{"update"}},
			} {
				if !granted(m.clusterRoles[0].Rules, want.group, want.resource, want.verbs) {
					t.Errorf("ClusterRole lacks %v on %s.%s", want.verbs, want.resource, want.group)
				}
			}
			if !granted(m.roles[0].Rules, "", "secrets", []string{"get", "list", "watch"}) {
				t.Error("Role lacks get/list/watch on Secrets")
			}

			if len(m.clusterRoleBindings) != 1 || len(m.roleBindings) != 1 {
				t.Fatalf("want 1 ClusterRoleBinding and 1 RoleBinding, got %d and %d", len(m.clusterRoleBindings), len(m.roleBindings))
			}
			crb, rb := m.clusterRoleBindings[0], m.roleBindings[0]
			if crb.RoleRef.Kind != "ClusterRole" || crb.RoleRef.Name != m.clusterRoles[0].Name {
				t.Errorf("ClusterRoleBinding refers to %+v", crb.RoleRef)
			}
			if rb.RoleRef.Kind != "Role" || rb.RoleRef.Name != m.roles[0].Name || rb.Namespace != tc.secretNamespace {
				t.Errorf("RoleBinding %s/%s refers to %+v", rb.Namespace, rb.Name, rb.RoleRef)
			}
			wantSubject := []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}}
			for _, subjects := range [][]rbacv1.Subject{crb.Subjects, rb.Subjects} {
				if diff := cmp.Diff(wantSubject, subjects); diff != "" {
					t.Errorf("binding subjects (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func subset(list []string, allowed ...string) bool {
	for _, x := range list {
		if !contains(allowed, x) {
			return false
		}
	}
	return true
}

func granted(rules []rbacv1.PolicyRule, group, resource string, verbs []string) bool {
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
			if contains(r.APIGroups, group) && contains(r.Resources, resource) && contains(r.Verbs, v) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
