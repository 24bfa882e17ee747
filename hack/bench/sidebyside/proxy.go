package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"k8s.io/client-go/rest"
	certutil "k8s.io/client-go/util/cert"

	"github.com/replicafed/replicafed/internal/test/faultproxy"
)

// requestKind names a request for counting: its verb (create, update, patch,
// delete, deletecollection, get, list, watch) and its resource with the
// subresource, if any ("pods", "replicasets/status", "events.k8s.io/events").
type requestKind struct {
	Verb, Resource string
}

// isWrite reports whether the request changes state in the API server.
func (k requestKind) isWrite() bool {
	switch k.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// classify names an API request from its method, path and query. Paths
// outside /api and /apis (discovery, /version, /healthz) get resource "-".
func classify(method string, u *url.URL) requestKind {
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	var group string
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:] // api/v1
	case len(parts) >= 3 && parts[0] == "apis":
		group, parts = parts[1], parts[3:] // apis/<group>/<version>
	default:
		return requestKind{Verb: strings.ToLower(method), Resource: "-"}
	}
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		parts = parts[2:] // namespaces/<ns>/<resource>...
	}
	if len(parts) == 0 {
		return requestKind{Verb: strings.ToLower(method), Resource: "-"}
	}
	res := parts[0]
	if len(parts) >= 3 {
		res += "/" + parts[2]
	}
	if group != "" {
		res = group + "/" + res
	}
	named := len(parts) >= 2
	var verb string
	switch method {
	case http.MethodGet:
		switch {
		case u.Query().Get("watch") == "true" || u.Query().Get("watch") == "1":
			verb = "watch"
		case named:
			verb = "get"
		default:
			verb = "list"
		}
	case http.MethodPost:
		verb = "create"
	case http.MethodPut:
		verb = "update"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
		if !named {
			verb = "deletecollection"
		}
	default:
		verb = strings.ToLower(method)
	}
	return requestKind{Verb: verb, Resource: res}
}

// counts is a set of request counters.
type counts map[requestKind]int

// writes is the number of state-changing requests.
func (c counts) writes() int {
	n := 0
	for k, v := range c {
		if k.isWrite() {
			n += v
		}
	}
	return n
}

// countingProxy is a TLS reverse proxy in front of kube-apiserver that
// counts every request it forwards. Only the controller under test talks
// through it, so its counters are that controller's requests and nothing
// else's (the scheduler, kwok and the benchmark itself go direct). No audit
// log is needed.
type countingProxy struct {
	srv  *http.Server
	addr string
	ca   []byte

	mu  sync.Mutex
	cur counts
}

// startProxy serves on a free loopback port and forwards to the API server
// of cfg; client credentials pass through unchanged.
func startProxy(cfg *rest.Config) (*countingProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, fmt.Errorf("parsing API server address %q: %w", cfg.Host, err)
	}
	// The upstream transport trusts the API server's CA and adds no
	// credentials of its own.
	rt, err := rest.TransportFor(&rest.Config{Host: cfg.Host, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}})
	if err != nil {
		return nil, fmt.Errorf("building the proxy's upstream transport: %w", err)
	}
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey("localhost", []net.IP{net.ParseIP("127.0.0.1")}, nil)
	if err != nil {
		return nil, fmt.Errorf("generating the proxy's serving certificate: %w", err)
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("loading the proxy's serving certificate: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the proxy: %w", err)
	}
	p := &countingProxy{addr: l.Addr().String(), ca: certPEM, cur: counts{}}
	rp := faultproxy.ReverseProxy(target, rt)
	p.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			k := classify(r.Method, r.URL)
			p.mu.Lock()
			p.cur[k]++
			p.mu.Unlock()
			rp.ServeHTTP(w, r)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2", "http/1.1"}, MinVersion: tls.VersionTLS12},
	}
	go func() { _ = p.srv.ServeTLS(l, "", "") }()
	return p, nil
}

// reset returns the counts since the last reset and starts new ones.
func (p *countingProxy) reset() counts {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.cur
	p.cur = counts{}
	return out
}

// writesSoFar returns how many writes were counted since the last reset.
func (p *countingProxy) writesSoFar() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur.writes()
}

func (p *countingProxy) close() { _ = p.srv.Close() }
