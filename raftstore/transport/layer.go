// Package transport is the raft network layer of replicafed: one TCP
// listener (optionally mutual TLS) that carries both raft's msgpack RPCs and
// replicafed's own small RPCs, told apart by the first byte a dialer sends.
// Its Addr advertises a stable DNS name, which hashicorp/raft's stock TCP
// transport refuses.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/raft"
)

// First bytes written by a dialer to select the protocol.
const (
	ProtoRaft byte = 'R'
	ProtoRPC  byte = 'F'
)

// ErrIsolated is returned by Dial while the layer is isolated (fault injection).
var ErrIsolated = errors.New("transport isolated")

// Config configures a Layer.
type Config struct {
	// BindAddr is the local listen address, e.g. "0.0.0.0:7000" or "127.0.0.1:0".
	BindAddr string
	// AdvertiseAddr is what peers dial, e.g. "pod-0.replicafed.ns.svc:7000".
	// Empty means the listener's address.
	AdvertiseAddr string
	// ServerTLS and ClientTLS enable TLS when both are set (see LoadTLS).
	ServerTLS, ClientTLS *tls.Config
	// HandleRPC serves connections that selected ProtoRPC. It owns the conn.
	HandleRPC func(net.Conn)
	// HandshakeTimeout bounds TLS handshakes and the protocol byte.
	HandshakeTimeout time.Duration
	Log              logr.Logger
}

// Layer implements raft.StreamLayer and the RPC side channel.
type Layer struct {
	cfg       Config
	ln        net.Listener
	advertise net.Addr
	raftCh    chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}

	isolated atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
	contact  map[string]time.Time // dialed raft address -> last byte read
}

var _ raft.StreamLayer = (*Layer)(nil)

type advAddr string

func (a advAddr) Network() string { return "tcp" }
func (a advAddr) String() string  { return string(a) }

// Listen opens the listener and starts accepting.
func Listen(cfg Config) (*Layer, error) {
	if cfg.HandshakeTimeout == 0 {
		cfg.HandshakeTimeout = 5 * time.Second
	}
	ln, err := net.Listen("tcp", cfg.BindAddr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s: %w", cfg.BindAddr, err)
	}
	adv := cfg.AdvertiseAddr
	if adv == "" {
		adv = ln.Addr().String()
	}
	if _, _, err := net.SplitHostPort(adv); err != nil {
		ln.Close()
		return nil, fmt.Errorf("advertise address %q: %w", adv, err)
	}
	l := &Layer{
		cfg: cfg, ln: ln, advertise: advAddr(adv),
		raftCh: make(chan net.Conn), closed: make(chan struct{}),
		conns: map[*conn]struct{}{}, contact: map[string]time.Time{},
	}
	go l.acceptLoop()
	return l, nil
}

// ListenAddr is the bound listener address (useful with port 0).
func (l *Layer) ListenAddr() net.Addr { return l.ln.Addr() }

// TLS reports whether the layer uses TLS.
func (l *Layer) TLS() bool { return l.cfg.ServerTLS != nil && l.cfg.ClientTLS != nil }

func (l *Layer) acceptLoop() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			select {
			case <-l.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			l.cfg.Log.Error(err, "Accept failed")
			time.Sleep(50 * time.Millisecond)
			continue
		}
		go l.handshake(c)
	}
}

func (l *Layer) handshake(raw net.Conn) {
	if l.isolated.Load() {
		raw.Close()
		return
	}
	_ = raw.SetDeadline(time.Now().Add(l.cfg.HandshakeTimeout))
	var c net.Conn = raw
	if l.TLS() {
		tc := tls.Server(raw, l.cfg.ServerTLS)
		if err := tc.Handshake(); err != nil {
			l.cfg.Log.V(1).Info("Refused peer connection: TLS handshake failed", "remote", raw.RemoteAddr().String(), "err", err.Error())
			raw.Close()
			return
		}
		c = tc
	}
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	tc := l.track(c, "")
	switch b[0] {
	case ProtoRaft:
		select {
		case l.raftCh <- tc:
		case <-l.closed:
			tc.Close()
		}
	case ProtoRPC:
		if l.cfg.HandleRPC == nil {
			tc.Close()
			return
		}
		l.cfg.HandleRPC(tc)
	default:
		l.cfg.Log.V(1).Info("Refused peer connection: unknown protocol byte", "remote", raw.RemoteAddr().String())
		tc.Close()
	}
}

// Accept implements net.Listener for raft.
func (l *Layer) Accept() (net.Conn, error) {
	select {
	case c := <-l.raftCh:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener and closes every tracked connection.
func (l *Layer) Close() error {
	var err error
	l.closeOnce.Do(func() {
		close(l.closed)
		err = l.ln.Close()
		l.dropAll()
	})
	return err
}

// Addr implements net.Listener: the advertised address.
func (l *Layer) Addr() net.Addr { return l.advertise }

// Dial implements raft.StreamLayer.
func (l *Layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	c, err := l.dial(string(address), ProtoRaft, timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c, string(address)), nil
}

// DialRPC opens a connection for the RPC side channel.
func (l *Layer) DialRPC(address string, timeout time.Duration) (net.Conn, error) {
	c, err := l.dial(address, ProtoRPC, timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c, ""), nil
}

func (l *Layer) dial(address string, proto byte, timeout time.Duration) (net.Conn, error) {
	if l.isolated.Load() {
		return nil, ErrIsolated
	}
	d := &net.Dialer{Timeout: timeout}
	raw, err := d.Dial("tcp", address)
	if err != nil {
		return nil, err
	}
	var c net.Conn = raw
	if l.TLS() {
		host, _, _ := net.SplitHostPort(address)
		cfg := l.cfg.ClientTLS.Clone()
		if cfg.ServerName == "" {
			cfg.ServerName = host
		}
		tc := tls.Client(raw, cfg)
		_ = raw.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", address, err)
		}
		_ = raw.SetDeadline(time.Time{})
		c = tc
	}
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// LastContact is when bytes were last read from a raft connection this
// layer dialed to address: the responses to this node's own RPCs. A leader
// uses it as evidence that a peer still acknowledges it.
func (l *Layer) LastContact(address string) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.contact[address]
}

// SetIsolated cuts (true) or restores (false) all traffic: open connections
// are closed, dials fail and inbound connections are dropped. It exists for
// fault-injection tests and for an operator drain.
func (l *Layer) SetIsolated(v bool) {
	l.isolated.Store(v)
	if v {
		l.dropAll()
	}
}

func (l *Layer) dropAll() {
	l.mu.Lock()
	cs := make([]*conn, 0, len(l.conns))
	for c := range l.conns {
		cs = append(cs, c)
	}
	l.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}

func (l *Layer) track(c net.Conn, dialed string) *conn {
	tc := &conn{Conn: c, l: l, dialed: dialed}
	l.mu.Lock()
	l.conns[tc] = struct{}{}
	l.mu.Unlock()
	return tc
}

type conn struct {
	net.Conn
	l      *Layer
	dialed string
	once   sync.Once
}

func (c *conn) Read(b []byte) (int, error) {
	if c.l.isolated.Load() {
		c.Close()
		return 0, ErrIsolated
	}
	n, err := c.Conn.Read(b)
	if n > 0 && c.dialed != "" && !c.l.isolated.Load() {
		c.l.mu.Lock()
		c.l.contact[c.dialed] = time.Now()
		c.l.mu.Unlock()
	}
	return n, err
}

func (c *conn) Write(b []byte) (int, error) {
	if c.l.isolated.Load() {
		c.Close()
		return 0, ErrIsolated
	}
	return c.Conn.Write(b)
}

func (c *conn) Close() error {
	var err error
	c.once.Do(func() {
		c.l.mu.Lock()
		delete(c.l.conns, c)
		c.l.mu.Unlock()
		err = c.Conn.Close()
	})
	return err
}

// LoadTLS builds server and client TLS configs from PEM files. With mutual
// set, the server requires and verifies a client certificate signed by the
// CA, so a peer with a bad certificate is refused.
func LoadTLS(certFile, keyFile, caFile string, mutual bool) (server, client *tls.Config, err error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, nil, fmt.Errorf("loading TLS key pair %s/%s: %w", certFile, keyFile, err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading TLS CA %s: %w", caFile, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, nil, fmt.Errorf("TLS CA %s holds no certificate", caFile)
	}
	server = &tls.Config{Certificates: []tls.Certificate{cert}, ClientCAs: pool, MinVersion: tls.VersionTLS12}
	if mutual {
		server.ClientAuth = tls.RequireAndVerifyClientCert
	}
	client = &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: pool, MinVersion: tls.VersionTLS12}
	return server, client, nil
}
