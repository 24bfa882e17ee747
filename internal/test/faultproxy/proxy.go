package faultproxy

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	certutil "k8s.io/client-go/util/cert"
	"k8s.io/utils/clock"
)

// Bounds on what a Faults value may ask for.
const (
	// MaxLatency is the largest added latency.
	MaxLatency = 5 * time.Second
	// MaxTimeoutHold is the longest a timed-out request is held.
	MaxTimeoutHold = 30 * time.Second
	// DefaultTimeoutHold is used when Faults.TimeoutHold is zero.
	DefaultTimeoutHold = 5 * time.Second
	// MaxHeld is the most requests held by timeout faults at once.
	MaxHeld = 64
	// forwardTimeout bounds the upstream call of a mutating request whose
	// response is dropped; it is no longer tied to the caller.
	forwardTimeout = 30 * time.Second
)

// Faults is what the proxy does to requests. The zero value forwards
// everything untouched.
type Faults struct {
	// Rate is the fraction of requests (0 to 1) that fail; each failure is a
	// 500, a 429 or a timeout with equal probability.
	Rate float64
	// Latency is added before every request is handled.
	Latency time.Duration
	// TimeoutHold is how long a timed-out request is held before its stream
	// is dropped; zero means DefaultTimeoutHold.
	TimeoutHold time.Duration
}

// Validate reports whether f stays within the proxy's bounds.
func (f Faults) Validate() error {
	switch {
	case f.Rate < 0 || f.Rate > 1 || f.Rate != f.Rate:
		return fmt.Errorf("fault rate %v: want 0 to 1", f.Rate)
	case f.Latency < 0 || f.Latency > MaxLatency:
		return fmt.Errorf("latency %s: want 0 to %s", f.Latency, MaxLatency)
	case f.TimeoutHold < 0 || f.TimeoutHold > MaxTimeoutHold:
		return fmt.Errorf("timeout hold %s: want 0 to %s", f.TimeoutHold, MaxTimeoutHold)
	}
	return nil
}

// Options configure a Proxy.
type Options struct {
	// Upstream is the https URL of the API server; its host must be a
	// loopback address.
	Upstream string
	// UpstreamCA is the PEM bundle that verifies the upstream's certificate.
	UpstreamCA []byte
	// Listen is a loopback host:port; default 127.0.0.1:0.
	Listen string
	// Seed makes the sequence of fault draws reproducible.
	Seed uint64
	// Clock times latency and holds; default the real clock.
	Clock clock.Clock
}

// Stats counts what the proxy did since it started.
type Stats struct {
	// Requests is every request received.
	Requests int64
	// Forwarded is requests passed upstream with their response returned.
	Forwarded int64
	// InternalErrors and TooManyRequests are injected 500 and 429 answers.
	InternalErrors, TooManyRequests int64
	// Timeouts is requests held and dropped; TimeoutsForwarded is the part
	// of them that reached the upstream first (mutating requests).
	Timeouts, TimeoutsForwarded int64
}

// Failed is the number of requests that got an injected fault.
func (s Stats) Failed() int64 { return s.InternalErrors + s.TooManyRequests + s.Timeouts }

// Proxy is a running fault-injecting reverse proxy.
type Proxy struct {
	upstream *url.URL
	caPEM    []byte
	clk      clock.Clock
	rp       *httputil.ReverseProxy
	srv      *http.Server
	ln       net.Listener
	closed   chan struct{}
	once     sync.Once

	mu     sync.Mutex
	faults Faults
	rng    *rand.Rand
	held   int

	requests, forwarded, err500, err429, timeouts, timeoutsFwd atomic.Int64
}

// New starts a proxy serving TLS with a fresh self-signed certificate for
// 127.0.0.1 (see CAData). Call Close when done.
func New(o Options) (*Proxy, error) {
	up, err := url.Parse(o.Upstream)
	if err != nil {
		return nil, fmt.Errorf("parsing upstream %q: %w", o.Upstream, err)
	}
	if up.Scheme != "https" {
		return nil, fmt.Errorf("upstream %q: want an https URL", o.Upstream)
	}
	if err := requireLoopback(up.Hostname()); err != nil {
		return nil, fmt.Errorf("upstream %q: %w", o.Upstream, err)
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", o.Listen, err)
	}
	if err := requireLoopback(host); err != nil {
		return nil, fmt.Errorf("listen address %q: %w", o.Listen, err)
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(o.UpstreamCA) {
		return nil, errors.New("upstream CA bundle holds no certificate")
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("127.0.0.1", []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating proxy certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading proxy certificate: %w", err)
	}
	ln, err := net.Listen("tcp", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", o.Listen, err)
	}
	p := &Proxy{
		upstream: up, caPEM: certPEM, clk: o.Clock, ln: ln, closed: make(chan struct{}),
		rng: rand.New(rand.NewPCG(o.Seed, o.Seed^0x9e3779b97f4a7c15)),
	}
	transport := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:   true,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
		TLSHandshakeTimeout: 10 * time.Second,
	}
	p.rp = ReverseProxy(up, transport)
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	go func() { _ = p.srv.ServeTLS(ln, "", "") }()
	return p, nil
}

// requireLoopback fails unless host is a loopback IP or "localhost".
// ReverseProxy forwards every request to the API server at up through rt,
// streaming responses (watches) as they come and keeping quiet about
// requests their callers cancel.
func ReverseProxy(up *url.URL, rt http.RoundTripper) *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Host = up.Host
		},
		Transport: rt,
		// Watches stream: every write goes out at once.
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
}

func requireLoopback(host string) error {
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("host %q is not a loopback address", host)
}

// URL is the proxy's https address.
func (p *Proxy) URL() string { return "https://" + p.ln.Addr().String() }

// CAData is the PEM certificate clients verify the proxy with.
func (p *Proxy) CAData() []byte { return append([]byte(nil), p.caPEM...) }

// SetFaults replaces the faults applied to requests from now on.
func (p *Proxy) SetFaults(f Faults) error {
	if err := f.Validate(); err != nil {
		return err
	}
	if f.TimeoutHold == 0 {
		f.TimeoutHold = DefaultTimeoutHold
	}
	p.mu.Lock()
	p.faults = f
	p.mu.Unlock()
	return nil
}

// Stats returns the counters so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Requests: p.requests.Load(), Forwarded: p.forwarded.Load(),
		InternalErrors: p.err500.Load(), TooManyRequests: p.err429.Load(),
		Timeouts: p.timeouts.Load(), TimeoutsForwarded: p.timeoutsFwd.Load(),
	}
}

// Close stops listening, drops open connections and releases held requests.
func (p *Proxy) Close() error {
	var err error
	p.once.Do(func() {
		close(p.closed)
		err = p.srv.Close()
	})
	return err
}

// fault is one draw's outcome.
type fault int

const (
	faultNone fault = iota
	fault500
	fault429
	faultTimeout
)

// draw picks the fate of one request and, for a timeout, reserves a hold
// slot (release it with unhold).
func (p *Proxy) draw() (fault, Faults) {
	p.mu.Lock()
	defer p.mu.Unlock()
	f := p.faults
	if f.Rate == 0 || p.rng.Float64() >= f.Rate {
		return faultNone, f
	}
	switch p.rng.IntN(3) {
	case 0:
		return fault500, f
	case 1:
		return fault429, f
	}
	if p.held >= MaxHeld {
		return fault500, f
	}
	p.held++
	return faultTimeout, f
}

func (p *Proxy) unhold() {
	p.mu.Lock()
	p.held--
	p.mu.Unlock()
}

// ServeHTTP implements http.Handler.
func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.requests.Add(1)
	kind, f := p.draw()
	if kind == faultTimeout {
		defer p.unhold()
	}
	if f.Latency > 0 && !p.wait(r.Context(), f.Latency) {
		if kind == faultTimeout {
			p.timeouts.Add(1)
		}
		return
	}
	switch kind {
	case fault500:
		p.err500.Add(1)
		writeStatus(w, http.StatusInternalServerError, "InternalError", "faultproxy: injected internal error")
	case fault429:
		p.err429.Add(1)
		w.Header().Set("Retry-After", "1")
		writeStatus(w, http.StatusTooManyRequests, "TooManyRequests", "faultproxy: injected throttling")
	case faultTimeout:
		p.timeouts.Add(1)
		if mutating(r.Method) {
			// The request takes effect; only its answer is lost.
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), forwardTimeout)
			p.rp.ServeHTTP(&discardWriter{h: http.Header{}}, r.WithContext(ctx))
			cancel()
			p.timeoutsFwd.Add(1)
		}
		p.wait(r.Context(), f.TimeoutHold)
		// Drops the connection (HTTP/1) or resets the stream (HTTP/2)
		// without an answer.
		panic(http.ErrAbortHandler)
	default:
		p.forwarded.Add(1)
		p.rp.ServeHTTP(w, r)
	}
}

// wait returns true after d, false if the request or the proxy ended first.
func (p *Proxy) wait(ctx context.Context, d time.Duration) bool {
	select {
	case <-p.clk.After(d):
		return true
	case <-ctx.Done():
		return false
	case <-p.closed:
		return false
	}
}

func mutating(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// writeStatus answers with a metav1.Status body, as kube-apiserver does, so
// clients parse the reason.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`+"\n", msg, reason, code)
}

// discardWriter receives an upstream response nobody will read.
type discardWriter struct{ h http.Header }

func (d *discardWriter) Header() http.Header         { return d.h }
func (d *discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (d *discardWriter) WriteHeader(int)             {}
func (d *discardWriter) Flush()                      {}
