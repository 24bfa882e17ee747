package faultproxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// upstream is a TLS test server that records the requests it received.
type upstream struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen map[string]int // X-Test-ID -> count
}

func newUpstream(t *testing.T, h http.HandlerFunc) *upstream {
	t.Helper()
	u := &upstream{seen: map[string]int{}}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen[r.Header.Get("X-Test-ID")]++
		u.mu.Unlock()
		if h != nil {
			h(w, r)
			return
		}
		_, _ = fmt.Fprintf(w, "%s %s", r.Method, r.URL.Path)
	}))
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	return u
}

func (u *upstream) caPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.srv.Certificate().Raw})
}

func (u *upstream) count(id string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen[id]
}

func startProxy(t *testing.T, u *upstream, o Options) *Proxy {
	t.Helper()
	o.Upstream, o.UpstreamCA = u.srv.URL, u.caPEM()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

func clientFor(t *testing.T, p *Proxy) *http.Client {
	t.Helper()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(p.CAData()) {
		t.Fatal("proxy CA data holds no certificate")
	}
	return &http.Client{
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true},
		Timeout:   time.Minute,
	}
}

func TestPassThroughWithoutFaults(t *testing.T) {
	u := newUpstream(t, nil)
	p := startProxy(t, u, Options{})
	c := clientFor(t, p)
	resp, err := c.Get(p.URL() + "/api/v1/pods")
	if err != nil {
		t.Fatalf("GET through proxy: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "GET /api/v1/pods" {
		t.Errorf("got %d %q, want 200 %q", resp.StatusCode, body, "GET /api/v1/pods")
	}
	if st := p.Stats(); st.Requests != 1 || st.Forwarded != 1 || st.Failed() != 0 {
		t.Errorf("stats = %+v, want one request forwarded", st)
	}
}

// TestFaultKinds sends many requests at rate 1: every one fails, each kind
// occurs, injected errors never reach the upstream, and a mutating request
// that times out did reach it (its answer was lost).
func TestFaultKinds(t *testing.T) {
	u := newUpstream(t, nil)
	p := startProxy(t, u, Options{Seed: 7})
	if err := p.SetFaults(Faults{Rate: 1, TimeoutHold: time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, p)
	const n = 60
	got := map[string]int{}
	for i := range n {
		id := fmt.Sprintf("req-%d", i)
		method := http.MethodGet
		if i%2 == 0 {
			method = http.MethodPost
		}
		req, _ := http.NewRequest(method, p.URL()+"/api/v1/namespaces/x/pods", strings.NewReader("{}"))
		req.Header.Set("X-Test-ID", id)
		resp, err := c.Do(req)
		if err != nil {
			got["timeout"]++
			want := 0
			if method == http.MethodPost {
				want = 1
			}
			if u.count(id) != want {
				t.Errorf("%s %s timed out; upstream saw it %d times, want %d", method, id, u.count(id), want)
			}
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var st struct {
			Kind, Reason string
			Code         int
		}
		if err := json.Unmarshal(body, &st); err != nil || st.Kind != "Status" || st.Code != resp.StatusCode {
			t.Errorf("%s: body %q is not a Status for code %d", id, body, resp.StatusCode)
		}
		switch resp.StatusCode {
		case http.StatusInternalServerError:
			got["500"]++
		case http.StatusTooManyRequests:
			got["429"]++
			if resp.Header.Get("Retry-After") == "" {
				t.Errorf("%s: 429 without Retry-After", id)
			}
		default:
			t.Errorf("%s: status %d at fault rate 1", id, resp.StatusCode)
		}
		if u.count(id) != 0 {
			t.Errorf("%s: injected %d reached the upstream", id, resp.StatusCode)
		}
	}
	for _, k := range []string{"500", "429", "timeout"} {
		if got[k] == 0 {
			t.Errorf("no %s among %d faults: %v", k, n, got)
		}
	}
	st := p.Stats()
	if st.Requests != n || st.Failed() != n || st.Forwarded != 0 ||
		st.InternalErrors != int64(got["500"]) || st.TooManyRequests != int64(got["429"]) || st.Timeouts != int64(got["timeout"]) {
		t.Errorf("stats = %+v, client saw %v", st, got)
	}
}

// TestLatency checks that a request waits for the configured latency on the
// injected clock before it is forwarded.
func TestLatency(t *testing.T) {
	u := newUpstream(t, nil)
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	p := startProxy(t, u, Options{Clock: clk})
	if err := p.SetFaults(Faults{Latency: 50 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, p)
	done := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodGet, p.URL()+"/healthz", nil)
		req.Header.Set("X-Test-ID", "slow")
		resp, err := c.Do(req)
		if err == nil {
			_ = resp.Body.Close()
		}
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("request never waited on the clock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if n := u.count("slow"); n != 0 {
		t.Fatalf("upstream reached before the latency elapsed (%d)", n)
	}
	clk.Step(50 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatalf("delayed request: %v", err)
	}
	if n := u.count("slow"); n != 1 {
		t.Errorf("upstream saw the delayed request %d times, want 1", n)
	}
}

// TestStreaming checks that a streamed response (a watch) reaches the client
// as it is written, not when the upstream finishes.
func TestStreaming(t *testing.T) {
	release := make(chan struct{})
	u := newUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "event-1\n")
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, "event-2\n")
	})
	defer close(release)
	p := startProxy(t, u, Options{})
	resp, err := clientFor(t, p).Get(p.URL() + "/api/v1/pods?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || line != "event-1\n" {
		t.Fatalf("first streamed line = %q, %v", line, err)
	}
}

func TestBounds(t *testing.T) {
	u := newUpstream(t, nil)
	for _, tc := range []struct {
		name string
		o    Options
	}{
		{"listen on all interfaces", Options{Upstream: u.srv.URL, UpstreamCA: u.caPEM(), Listen: "0.0.0.0:0"}},
		{"listen on a routable address", Options{Upstream: u.srv.URL, UpstreamCA: u.caPEM(), Listen: "10.1.2.3:0"}},
		{"remote upstream", Options{Upstream: "https://192.0.2.1:6443", UpstreamCA: u.caPEM()}},
		{"plain http upstream", Options{Upstream: strings.Replace(u.srv.URL, "https", "http", 1), UpstreamCA: u.caPEM()}},
		{"no CA", Options{Upstream: u.srv.URL}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if p, err := New(tc.o); err == nil {
				_ = p.Close()
				t.Errorf("New accepted %+v", tc.o)
			}
		})
	}
	for _, tc := range []struct {
		f  Faults
		ok bool
	}{
		{Faults{}, true},
		{Faults{Rate: 0.1, Latency: 50 * time.Millisecond}, true},
		{Faults{Rate: 1, TimeoutHold: MaxTimeoutHold}, true},
		{Faults{Rate: -0.1}, false},
		{Faults{Rate: 1.5}, false},
		{Faults{Latency: MaxLatency + 1}, false},
		{Faults{Latency: -1}, false},
		{Faults{TimeoutHold: MaxTimeoutHold + 1}, false},
	} {
		if err := tc.f.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok=%v", tc.f, err, tc.ok)
		}
	}
}
