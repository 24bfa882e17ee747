package writefence

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/controller/engine"
)

func TestWriteDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("slow") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer close(release)
	// The slow server blocks until released, so a short deadline always
	// expires; a request that is answered at once is checked with a long
	// one, so a loaded machine cannot make it miss.
	clientWith := func(deadline time.Duration) *http.Client {
		rc := &rest.Config{Host: srv.URL}
		if err := Option(deadline, nil)(rc); err != nil {
			t.Fatal(err)
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			t.Fatal(err)
		}
		return hc
	}
	short, long := clientWith(50*time.Millisecond), clientWith(time.Minute)
	hc := short
	do := func(method, query string) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+"/api/v1/namespaces/ns/pods"+query, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if err := do(m, "?slow=1"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s past the deadline: got %v, want a deadline error", m, err)
		}
		hc = long
		if err := do(m, ""); err != nil {
			t.Errorf("%s within the deadline: %v", m, err)
		}
		hc = short
	}
	// A read is not bounded: it returns once the server answers.
	got := make(chan error, 1)
	go func() { got <- do(http.MethodGet, "?slow=1") }()
	select {
	case err := <-got:
		t.Fatalf("GET returned before the server answered: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	release <- struct{}{}
	if err := <-got; err != nil {
		t.Fatalf("GET: %v", err)
	}
}

func TestPodWritesFencedByLease(t *testing.T) {
	var hits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits = append(hits, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	permitted := false
	rc := &rest.Config{Host: srv.URL}
	if err := Option(time.Minute, func() bool { return permitted })(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		method, path string
		fenced       bool
	}{
		{http.MethodPost, "/api/v1/namespaces/ns/pods", true},
		{http.MethodDelete, "/api/v1/namespaces/ns/pods/web-abc", true},
		{http.MethodPatch, "/api/v1/namespaces/ns/pods/web-abc", true},
		{http.MethodGet, "/api/v1/namespaces/ns/pods", false},
		{http.MethodPost, "/api/v1/namespaces", false},
		{http.MethodPost, "/apis/replicafed.io/v1alpha1/namespaces/ns/memberreplicasets", false},
		{http.MethodPost, "/api/v1/namespaces/ns/pods/web-abc/eviction", false},
	}
	for _, lease := range []bool{false, true} {
		permitted = lease
		for _, c := range cases {
			hits = nil
			req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			wantRefused := c.fenced && !lease
			if wantRefused {
				if !errors.Is(err, ErrNotPermitted) || len(hits) != 0 {
					t.Errorf("lease=%v %s %s: err %v, server saw %v; want refused before sending", lease, c.method, c.path, err, hits)
				}
				continue
			}
			if err != nil || len(hits) != 1 {
				t.Errorf("lease=%v %s %s: err %v, server saw %v; want sent once", lease, c.method, c.path, err, hits)
			}
		}
	}
}

// TestFencedCreateIsKnownNotSent: through client-go, a fenced pod create
// fails with engine.ErrNotSent, so the engine frees the name instead of
// holding it as an unknown outcome.
func TestFencedCreateIsKnownNotSent(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("request reached the server: %s %s", r.Method, r.URL.Path)
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	if err := Option(time.Minute, func() bool { return false })(rc); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "ns"}}
	_, err = cs.CoreV1().Pods("ns").Create(context.Background(), pod, metav1.CreateOptions{})
	if !errors.Is(err, engine.ErrNotSent) {
		t.Fatalf("create: got %v, want an error wrapping engine.ErrNotSent", err)
	}
}
