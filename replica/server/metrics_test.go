package server

import (
	"context"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testpki"
)

// TestSecureMetrics: with metrics.secure the metrics endpoint serves the
// raft certificate and answers only tokens the real hub API server
// authenticates and authorizes for get on /metrics (the chart's
// metrics-reader role); with metrics.profiling its /debug/pprof/ profiles
// need their own non-resource URLs, which the metrics reader lacks.
func TestSecureMetrics(t *testing.T) {
	hub := testcluster.Start(t, testcluster.Options{Name: "hub"})
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	token := func(sa string) string {
		t.Helper()
		if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return tr.Status.Token
	}
	scraper, profiler, nobody := token("scraper"), token("profiler"), token("nobody")
	bind := func(sa string, urls ...string) {
		t.Helper()
		if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: sa},
			Rules:      []rbacv1.PolicyRule{{NonResourceURLs: urls, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: sa},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: sa},
			Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa, Namespace: "default"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bind("scraper", "/metrics")
	bind("profiler", "/debug/pprof/*")

	ca, err := testpki.NewCA("raft")
	if err != nil {
		t.Fatal(err)
	}
	files, err := ca.Issue(filepath.Join(t.TempDir(), "tls"), "solo")
	if err != nil {
		t.Fatal(err)
	}
	addr := freeAddr(t)
	cfg := &config.Config{
		Metrics: config.Metrics{BindAddress: addr, Secure: true, Profiling: true},
		Raft:    config.Raft{TLS: config.TLS{CertFile: files.CertFile, KeyFile: files.KeyFile, CAFile: files.CAFile}},
	}
	mgr, err := manager.New(hub.Config, manager.Options{Metrics: metricsOptions(cfg), Logger: logr.Discard()})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	// Trusting only the raft CA proves the endpoint serves the raft certificate.
	tlsCfg, err := testpki.ClientTLS(testpki.Files{CAFile: files.CAFile})
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg.ServerName = "127.0.0.1"
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	get := func(tok string, path ...string) (int, error) {
		url := "https://" + addr + "/metrics"
		if len(path) > 0 {
			url = "https://" + addr + path[0]
		}
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, err := get(scraper)
		if err == nil && code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("scraper with metrics-reader: %d %v", code, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, tc := range []struct {
		name, token string
		want        []int
	}{
		{"no token", "", []int{http.StatusUnauthorized}},
		// controller-runtime's filter answers 500 when the TokenReview
		// authenticator fails on a token it cannot parse.
		{"invalid token", "not-a-token", []int{http.StatusUnauthorized, http.StatusInternalServerError}},
		{"authenticated, not authorized", nobody, []int{http.StatusForbidden}},
		{"profiler on /metrics", profiler, []int{http.StatusForbidden}},
	} {
		if code, err := get(tc.token); err != nil || !slices.Contains(tc.want, code) {
			t.Errorf("%s: got %d %v, want one of %v", tc.name, code, err, tc.want)
		}
	}
	for _, tc := range []struct {
		name, token, path string
		want              int
	}{
		{"heap profile, no token", "", "/debug/pprof/heap", http.StatusUnauthorized},
		{"heap profile, metrics reader", scraper, "/debug/pprof/heap", http.StatusForbidden},
		{"heap profile, profiler", profiler, "/debug/pprof/heap", http.StatusOK},
		{"profile index, profiler", profiler, "/debug/pprof/", http.StatusOK},
		{"goroutines, nobody", nobody, "/debug/pprof/goroutine", http.StatusForbidden},
	} {
		if code, err := get(tc.token, tc.path); err != nil || code != tc.want {
			t.Errorf("%s: got %d %v, want %d", tc.name, code, err, tc.want)
		}
	}
	if code, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + addr + "/metrics"); err == nil && code.StatusCode == http.StatusOK {
		t.Error("plain HTTP served metrics")
	}
}
