package registry_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	mcmanager "sigs.k8s.io/multicluster-runtime/pkg/manager"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

const (
	secretNS    = "fleet"
	secretLabel = "replicafed.io/member"
)

// hostileKubeconfig is the member's own kubeconfig (server, CA, inline
// token) with its user replaced.
func hostileKubeconfig(t *testing.T, member *testcluster.Cluster, user *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for name := range kc.AuthInfos {
		kc.AuthInfos[name] = user
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Hostile kubeconfig Secrets are refused before anything is built from them:
// their exec command never runs, their files are never read, and their
// MemberCluster conditions and events name the field. An inline-token Secret
// still works, and a Secret named like a static member loses to it.
func TestSecretsOnRealClusters(t *testing.T) {
	hub := testcluster.Start(t, testcluster.Options{Name: "hub"})
	member := testcluster.Start(t, testcluster.Options{Name: "member"})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	hubCl, err := client.New(hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := hubCl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: secretNS}}); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	marker := filepath.Join(dir, "exec-ran")
	memberKC, err := clientcmd.LoadFromFile(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, u := range memberKC.AuthInfos {
		token = u.Token
	}
	tokenFile := writeFile(t, dir, "token", []byte(token))
	certFile := writeFile(t, dir, "tls.crt", []byte("not read"))
	keyFile := writeFile(t, dir, "tls.key", []byte("not read"))
	goodKC, err := os.ReadFile(member.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hubKC, err := os.ReadFile(hub.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	execUser := &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{
		APIVersion: "client.authentication.k8s.io/v1", Command: "/bin/sh",
		Args:            []string{"-c", fmt.Sprintf("touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"%s\"}}'", marker, token)},
		InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
	}}

	monitor := health.NewMonitor(health.Options{Interval: 200 * time.Millisecond, Timeout: 5 * time.Second,
		Thresholds: health.Thresholds{Failure: 1, Success: 1}})
	opts := registry.Options{
		SecretNamespace: secretNS, SecretSelector: secretLabel + "=true", SecretKey: "kubeconfig", Scheme: scheme, Health: monitor,
		Static: []registry.Static{{Name: "static-a", Kubeconfig: member.Kubeconfig}},
	}
	provider, err := registry.NewProvider(opts)
	if err != nil {
		t.Fatal(err)
	}
	sel := labels.SelectorFromSet(labels.Set{secretLabel: "true"})
	mgr, err := mcmanager.New(hub.Config, provider, manager.Options{
		Scheme: scheme, Logger: logr.Discard(), Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
		Cache: cache.Options{ByObject: map[client.Object]cache.ByObject{
			&corev1.Secret{}: {Namespaces: map[string]cache.Config{secretNS: {}}, Label: sel},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg := registry.New(opts, provider)
	if err := reg.Setup(ctx, mgr); err != nil {
		t.Fatal(err)
	}
	mgrCtx, stopMgr := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mgrCtx) }()
	defer func() {
		stopMgr()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("manager: %v", err)
		}
	}()

	put := func(name string, data []byte) {
		t.Helper()
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: name, Labels: map[string]string{secretLabel: "true"}}}
		if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), sec); err == nil {
			sec.Data = map[string][]byte{"kubeconfig": data}
			if err := hubCl.Update(ctx, sec); err != nil {
				t.Fatal(err)
			}
			return
		}
		sec.Data = map[string][]byte{"kubeconfig": data}
		if err := hubCl.Create(ctx, sec); err != nil {
			t.Fatal(err)
		}
	}
	refused := map[string]struct{ condition, message string }{
		"exec": {registry.ConditionCredentialsRefused, "users[admin].exec is not allowed: set clusters.credentials.allowExec to permit it"},
		"token-file": {registry.ConditionCredentialsRefused,
			"users[admin].tokenFile is not allowed: set clusters.credentials.allowFiles to permit it"},
		"auth-provider": {registry.ConditionCredentialsRefused,
			"users[admin].auth-provider is not allowed: set clusters.credentials.allowAuthProvider to permit it"},
		"key-file": {registry.ConditionCredentialsRefused,
			"users[admin].client-certificate is not allowed: set clusters.credentials.allowFiles to permit it; users[admin].client-key is not allowed: set clusters.credentials.allowFiles to permit it"},
		"static-a": {registry.ConditionNameConflict, "kubeconfig Secret fleet/static-a has the name of a static member"},
	}
	put("good", goodKC)
	put("exec", hostileKubeconfig(t, member, execUser))
	put("token-file", hostileKubeconfig(t, member, &clientcmdapi.AuthInfo{TokenFile: tokenFile}))
	put("auth-provider", hostileKubeconfig(t, member, &clientcmdapi.AuthInfo{AuthProvider: &clientcmdapi.AuthProviderConfig{
		Name: "oidc", Config: map[string]string{"idp-issuer-url": "https://issuer.example", "client-id": "x", "id-token": token}}}))
	put("key-file", hostileKubeconfig(t, member, &clientcmdapi.AuthInfo{ClientCertificate: certFile, ClientKey: keyFile}))
	// A valid kubeconfig, for the hub: used, it would replace the static
	// member with another cluster.
	put("static-a", hubKC)

	poll := func(what string, cond func() (bool, string)) {
		t.Helper()
		last := ""
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			ok, why := cond()
			last = why
			return ok, nil
		})
		if err != nil {
			t.Fatalf("%s: %v; last: %s", what, err, last)
		}
	}
	healthy := func(name string) (bool, string) {
		st, ok := monitor.State(name)
		return ok && st.Health == v1alpha1.ClusterHealthy, fmt.Sprintf("%s health %+v (%v)", name, st, ok)
	}
	poll("inline-token Secret member engaged and probed", func() (bool, string) { return healthy("good") })
	poll("static member engaged and probed", func() (bool, string) { return healthy("static-a") })
	for name, want := range refused {
		poll("condition of "+name, func() (bool, string) {
			for _, c := range reg.Conditions(name) {
				if c.Type == want.condition && c.Status == metav1.ConditionTrue && strings.HasPrefix(c.Message, want.message) {
					return true, ""
				}
			}
			return false, fmt.Sprintf("%+v", reg.Conditions(name))
		})
		if p := reg.SecretProblem(ctx, name); !strings.HasPrefix(p, want.condition+": "+want.message) {
			t.Errorf("%s: problem %q", name, p)
		}
	}
	if m, ok := reg.Get("static-a"); !ok || m.Cluster.GetConfig().Host != member.Config.Host {
		t.Errorf("static-a is engaged with %v (%v); want the static member's server %s, not the Secret's", m, ok, member.Config.Host)
	}
	for name := range refused {
		if name == "static-a" {
			continue
		}
		if _, ok := reg.Get(name); ok {
			t.Errorf("refused Secret %s is engaged", name)
		}
		if _, ok := monitor.State(name); ok {
			t.Errorf("refused Secret %s is probed", name)
		}
	}
	regs, err := reg.Registered(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(regs) != 6 {
		t.Errorf("registered %+v: want good, the four refused Secrets and static-a once", regs)
	}
	for _, r := range regs {
		tainted := len(r.Taints) == 1 && r.Taints[0].Key == registry.TaintCredentialsRefused && r.Taints[0].Effect == v1alpha1.TaintNoSchedule
		if want := r.Name != "good" && r.Name != "static-a"; tainted != want {
			t.Errorf("registration %s: taints %+v; want the %s taint %v", r.Name, r.Taints, registry.TaintCredentialsRefused, want)
		}
	}
	poll("an event for every refused Secret", func() (bool, string) {
		evs := &eventsv1.EventList{}
		if err := hubCl.List(ctx, evs, client.InNamespace(secretNS)); err != nil {
			return false, err.Error()
		}
		seen := map[string]bool{}
		for _, e := range evs.Items {
			if want, ok := refused[e.Regarding.Name]; ok && e.Regarding.Kind == "Secret" && e.Reason == want.condition && e.Type == corev1.EventTypeWarning &&
				strings.HasPrefix(e.Note, want.message) {
				seen[e.Regarding.Name] = true
			}
		}
		return len(seen) == len(refused), fmt.Sprintf("events for %v", seen)
	})

	// A good Secret edited into a hostile one is dropped, not kept on its
	// old credentials; fixed again, it is back.
	put("good", hostileKubeconfig(t, member, execUser))
	poll("good disengaged after the exec edit", func() (bool, string) {
		_, engaged := reg.Get("good")
		_, probed := monitor.State("good")
		p := reg.SecretProblem(ctx, "good")
		return !engaged && !probed && strings.HasPrefix(p, "CredentialsRefused: users[admin].exec"), fmt.Sprintf("engaged %v, probed %v, problem %q", engaged, probed, p)
	})
	put("good", goodKC)
	poll("good engaged again", func() (bool, string) { return healthy("good") })
	if p := reg.SecretProblem(ctx, "good"); p != "" {
		t.Errorf("good: problem %q after the fix", p)
	}
	if err := hubCl.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretNS, Name: "exec"}}); err != nil {
		t.Fatal(err)
	}
	poll("deleted Secret forgotten", func() (bool, string) {
		c := reg.Conditions("exec")
		return len(c) == 0, fmt.Sprintf("%+v", c)
	})

	// Probes ran against the members all along; no exec plugin did.
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the exec plugin of a refused Secret ran (marker %s: %v)", marker, err)
	}
	// The control: honoured, that kubeconfig does run its command.
	rc, err := clientcmd.RESTConfigFromKubeConfig(hostileKubeconfig(t, member, execUser))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().ServerVersion(); err != nil {
		t.Fatalf("control request with the exec kubeconfig: %v", err)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("control: the exec plugin did not leave its marker: %v", err)
	}
}
