package writefence

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
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

// TestPodWriteCheckSeesRequestContext: BoundedContext's check is asked
// with the request's context, so a sync's fence in the context decides.
func TestPodWriteCheckSeesRequestContext(t *testing.T) {
	var hits int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits++
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	type fenceKey struct{}
	rc := &rest.Config{Host: srv.URL}
	check := func(ctx context.Context) bool { v, _ := ctx.Value(fenceKey{}).(string); return v == "owner@2" }
	if err := BoundedContext(time.Minute, check, 4)(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		fence   string
		refused bool
	}{{"owner@2", false}, {"owner@1", true}, {"", true}} {
		hits = 0
		ctx := context.WithValue(context.Background(), fenceKey{}, tc.fence)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if tc.refused && (!errors.Is(err, ErrNotPermitted) || hits != 0) {
			t.Errorf("fence %q: err %v, %d sent; want refused before sending", tc.fence, err, hits)
		}
		if !tc.refused && (err != nil || hits != 1) {
			t.Errorf("fence %q: err %v, %d sent; want sent once", tc.fence, err, hits)
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

// TestWritesInFlightBounded: at most maxInFlight mutating requests are in
// flight; one more waits before it is sent (a request whose context ends
// while it waits was never sent: engine.ErrNotSent), reads do not wait, and
// a slot is free again once a request is done.
func TestWritesInFlightBounded(t *testing.T) {
	const maxInFlight = 3
	release := make(chan struct{})
	arrived := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Method + " " + r.URL.Path
		if r.URL.Query().Get("hold") != "" {
			<-release
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	if err := Bounded(time.Minute, func() bool { return true }, maxInFlight)(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	do := func(ctx context.Context, method, query string) error {
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+"/api/v1/namespaces/ns/pods"+query, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	held := make(chan error, maxInFlight)
	for range maxInFlight {
		go func() { held <- do(context.Background(), http.MethodPost, "?hold=1") }()
	}
	for range maxInFlight {
		<-arrived
	}
	// Every slot is taken: a create whose context has ended waits for none
	// and is refused as never sent.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := do(ctx, http.MethodPost, ""); !errors.Is(err, engine.ErrNotSent) || !errors.Is(err, context.Canceled) {
		t.Fatalf("create with every slot taken and its context ended: got %v, want engine.ErrNotSent and context.Canceled", err)
	}
	// Reads are not bounded.
	if err := do(context.Background(), http.MethodGet, ""); err != nil {
		t.Fatalf("GET with every write slot taken: %v", err)
	}
	if got := <-arrived; got != "GET /api/v1/namespaces/ns/pods" {
		t.Fatalf("server saw %q, want only the GET", got)
	}
	// One more create waits until a held one is done, then is sent.
	waiting := make(chan error, 1)
	go func() { waiting <- do(context.Background(), http.MethodPost, "") }()
	close(release)
	for range maxInFlight {
		if err := <-held; err != nil {
			t.Fatalf("held create: %v", err)
		}
	}
	if err := <-waiting; err != nil {
		t.Fatalf("create that waited for a slot: %v", err)
	}
	if got := <-arrived; got != "POST /api/v1/namespaces/ns/pods" {
		t.Fatalf("server saw %q, want the create that waited", got)
	}
	select {
	case got := <-arrived:
		t.Fatalf("server saw an extra request %q", got)
	default:
	}
}

// TestSlotFreedAtDeadline: a request that outlives its deadline frees its
// slot, so with one slot the next write is sent.
func TestSlotFreedAtDeadline(t *testing.T) {
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
	if err := Bounded(50*time.Millisecond, nil, 1)(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	for i, query := range []string{"?slow=1", "?slow=1", ""} {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods"+query, nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		cancel()
		switch {
		case query != "" && !errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("request %d past its deadline: got %v, want a deadline error", i, err)
		case query == "" && err != nil:
			t.Fatalf("request %d after the slot was freed: %v", i, err)
		}
	}
}

// TestBodyNotCutOffAfterAnswer: the deadline ends with the answer's status
// line. The member has made the write by then, so a body that arrives
// after the deadline is still read: the outcome stays known.
func TestBodyNotCutOffAfterAnswer(t *testing.T) {
	const deadline = 20 * time.Millisecond
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		w.(http.Flusher).Flush()
		<-release
		_, _ = w.Write([]byte(`{"kind":"Pod"}`))
	}))
	defer srv.Close()
	rc := &rest.Config{Host: srv.URL}
	if err := Option(deadline, func() bool { return true })(rc); err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(rc)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods", nil)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("create answered at once: %v", err)
	}
	defer resp.Body.Close()
	// Well past the deadline (a slower machine only makes it more so).
	time.Sleep(5 * deadline)
	close(release)
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != `{"kind":"Pod"}` {
		t.Fatalf("body after the deadline: %q, %v; want it read in full", body, err)
	}
}

// TestErrNotPermitted: the refusal names both fences it may stand for
// (the leader's write lease, a member's owner lease) and is known not
// sent.
func TestErrNotPermitted(t *testing.T) {
	if msg := ErrNotPermitted.Error(); !strings.Contains(msg, "write lease or member ownership") || strings.Contains(msg, "leader's") {
		t.Errorf("ErrNotPermitted = %q, want it to name the write lease or member ownership, not the leader's lease alone", msg)
	}
	if !errors.Is(ErrNotPermitted, engine.ErrNotSent) {
		t.Error("ErrNotPermitted is not engine.ErrNotSent")
	}
}

// TestDeadlineRenewal: a write unanswered at its deadline runs on while
// Renewal.Covers holds (asked with the request's context) and within Max,
// and is cut as before otherwise. The server answers only once Covers has
// been asked answerAfter times, so no case depends on the machine's speed.
func TestDeadlineRenewal(t *testing.T) {
	const d = 20 * time.Millisecond
	type key struct{}
	for _, tc := range []struct {
		name        string
		covers      func(call int) bool // call counts from 1
		step, max   time.Duration
		answerAfter int // 0: never answers
		wantErr     bool
		wantCalls   func(n int) bool
	}{
		{name: "covered: answered after two renewals", covers: func(int) bool { return true }, max: time.Minute,
			answerAfter: 2, wantCalls: func(n int) bool { return n == 2 }},
		{name: "short steps: answered after three renewals", covers: func(int) bool { return true }, step: d / 4, max: time.Minute,
			answerAfter: 3, wantCalls: func(n int) bool { return n == 3 }},
		{name: "short steps past max: cut", covers: func(int) bool { return true }, step: d / 4, max: d + d/2,
			wantErr: true, wantCalls: func(n int) bool { return n <= 2 }},
		{name: "lease lapses at the second deadline: cut", covers: func(call int) bool { return call == 1 }, max: time.Minute,
			wantErr: true, wantCalls: func(n int) bool { return n == 2 }},
		{name: "covered but past max: cut", covers: func(int) bool { return true }, max: 4 * d,
			wantErr: true, wantCalls: func(n int) bool { return n <= 3 }},
		{name: "max not above the deadline: never renewed", covers: func(int) bool { return true }, max: d,
			wantErr: true, wantCalls: func(n int) bool { return n == 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			answer := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				select {
				case <-answer:
					w.WriteHeader(http.StatusCreated)
				case <-r.Context().Done():
				}
			}))
			defer srv.Close()
			calls := 0 // Covers runs under the request's deadline lock, one call at a time
			covers := func(ctx context.Context) bool {
				if ctx.Value(key{}) != "sync" {
					t.Error("Covers not asked with the request's context")
				}
				calls++
				if calls == tc.answerAfter {
					close(answer)
				}
				return tc.covers(calls)
			}
			rc := &rest.Config{Host: srv.URL}
			if err := Renewed(d, nil, Renewal{Covers: covers, Step: tc.step, Max: tc.max}, 0)(rc); err != nil {
				t.Fatal(err)
			}
			hc, err := rest.HTTPClientFor(rc)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "sync"), 30*time.Second)
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods", nil)
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			switch {
			case tc.wantErr && !errors.Is(err, context.DeadlineExceeded):
				t.Errorf("got %v, want a deadline error", err)
			case tc.wantErr && !strings.Contains(err.Error(), "renewed"):
				t.Errorf("error %q does not say how often the deadline was renewed", err)
			case !tc.wantErr && (err != nil || resp.StatusCode != http.StatusCreated):
				t.Errorf("got %v, want the server's answer", err)
			}
			if !tc.wantCalls(calls) {
				t.Errorf("Covers asked %d times", calls)
			}
		})
	}
}
