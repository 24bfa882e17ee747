package promtext

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestGet(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.Error(w, "no such page", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte("# TYPE go_goroutines gauge\ngo_goroutines 42\n"))
	}))
	defer srv.Close()

	got, err := Get(context.Background(), srv.Client(), srv.URL+"/metrics")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if v := got.Sum("go_goroutines", nil); v != 42 {
		t.Errorf("go_goroutines = %v, want 42", v)
	}
	_, err = Get(context.Background(), srv.Client(), srv.URL+"/other")
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("Get of a missing page: err %v, want one naming 404", err)
	}
}
