package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

func TestMemberWriteDeadline(t *testing.T) {
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
	rc := &rest.Config{Host: srv.URL}
	if err := memberWriteDeadline(50 * time.Millisecond)(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
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
		if err := do(m, ""); err != nil {
			t.Errorf("%s within the deadline: %v", m, err)
		}
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
