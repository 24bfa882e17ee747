// Package transport is the raft network layer of replicafed: one TCP
// listener, mutual TLS unless explicitly insecure, that carries both raft's
// msgpack RPCs and replicafed's own small RPCs, told apart by the first byte
// a dialer sends. Every inbound connection is authorized by the identity in
// the peer's verified certificate (see StandsFor) before raft sees it, and
// every outbound one is refused unless the server's certificate stands for
// the raft server expected at the address dialled (Config.Servers).
// Its Addr advertises a stable DNS name, which hashicorp/raft's stock TCP
// transport refuses.
package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
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

// ErrWrongPeer is returned by a dial whose server is not the raft server
// expected at that address, or when none is known there.
var ErrWrongPeer = errors.New("server certificate does not stand for the raft server expected at this address")

// Config configures a Layer.
type Config struct {
	// BindAddr is the local listen address, e.g. "0.0.0.0:7000" or "127.0.0.1:0".
	BindAddr string
	// AdvertiseAddr is what peers dial, e.g. "pod-0.replicafed.ns.svc:7000".
	// Empty means the listener's address.
	AdvertiseAddr string
	// Certs enables mutual TLS: peers must present a certificate from its CA.
	// Nil means plain TCP with no authentication at all.
	Certs *Certs
	// Authorize decides whether a peer may speak raft (ProtoRaft). Nil
	// refuses every TLS peer; without TLS it is not called.
	Authorize func(Peer) error
	// Servers lists the raft servers this node knows: the configured peers
	// and the servers of the raft configuration. With TLS, a raft
	// connection (ProtoRaft) is accepted only from a certificate that
	// stands for one of them (StandsFor), and a dial to an address listed
	// here succeeds only when the server's certificate stands for the
	// server listed at that address; a dial to an address not listed
	// fails unless the caller names the server (DialRPCTo). Nil knows no
	// server: every TLS raft connection and dial is refused.
	Servers func() []Server
	// HandleRPC serves connections that selected ProtoRPC; it authorizes
	// each operation itself. It owns the conn.
	HandleRPC func(net.Conn, Peer)
	// HandshakeTimeout bounds TLS handshakes and the protocol byte.
	HandshakeTimeout time.Duration
	Log              logr.Logger
}

// Server is a raft server by name (the raft server ID without its UUID
// suffix) and raft address.
type Server struct {
	Name, Address string
}

// Peer is who is on the other end of an inbound connection.
type Peer struct {
	// Server is the name of the known server (Config.Servers) the
	// certificate stands for, on an accepted raft connection; empty
	// otherwise.
	Server string
	// Verified is true when the peer presented a certificate that chains to
	// the CA; false only without TLS.
	Verified bool
	// Names is the certificate's identity (see Identity).
	Names []string
	// Cert is the verified leaf certificate; nil without TLS.
	Cert *x509.Certificate
	// Remote is the remote network address, for logs.
	Remote string
}

// Layer implements raft.StreamLayer and the RPC side channel.
type Layer struct {
	cfg       Config
	serverTLS *tls.Config
	ln        net.Listener
	advertise net.Addr
	raftCh    chan net.Conn
	closeOnce sync.Once
	closed    chan struct{}

	isolated atomic.Bool
	mu       sync.Mutex
	conns    map[*conn]struct{}
	contact  map[string]time.Time // dialed raft address -> last byte read

	// Faults on the raft connections this layer dialled (SetRaftFaults):
	// readDelay holds every read that returned data; heldWrites, while
	// non-nil, holds every write until it is closed.
	readDelay  atomic.Int64
	heldWrites atomic.Pointer[chan struct{}]
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
	if cfg.Certs != nil {
		l.serverTLS = cfg.Certs.ServerConfig(tls.RequireAndVerifyClientCert)
	}
	go l.acceptLoop()
	return l, nil
}

// ListenAddr is the bound listener address (useful with port 0).
func (l *Layer) ListenAddr() net.Addr { return l.ln.Addr() }

// TLS reports whether the layer uses TLS.
func (l *Layer) TLS() bool { return l.cfg.Certs != nil }

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
	peer := Peer{Remote: raw.RemoteAddr().String()}
	if l.TLS() {
		tc := tls.Server(raw, l.serverTLS)
		if err := tc.Handshake(); err != nil {
			l.cfg.Log.V(1).Info("Refused peer connection: TLS handshake failed", "remote", peer.Remote, "reason", err.Error())
			raw.Close()
			return
		}
		st := tc.ConnectionState()
		if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
			raw.Close() // unreachable with RequireAndVerifyClientCert
			return
		}
		peer.Verified, peer.Names, peer.Cert = true, Identity(st.PeerCertificates[0]), st.PeerCertificates[0]
		c = tc
	}
	var b [1]byte
	if _, err := io.ReadFull(c, b[:]); err != nil {
		c.Close()
		return
	}
	_ = raw.SetDeadline(time.Time{})
	switch b[0] {
	case ProtoRaft:
		if l.TLS() {
			var err error = ErrUnauthorized
			if peer.Server = l.serverOf(peer.Cert); peer.Server == "" {
				err = fmt.Errorf("%w: the certificate stands for no known raft server", ErrUnauthorized)
			} else if l.cfg.Authorize != nil {
				err = l.cfg.Authorize(peer)
			}
			if err != nil {
				l.cfg.Log.Info("Refused raft connection", "remote", peer.Remote, "identity", peer.Names, "reason", err.Error())
				c.Close()
				return
			}
		}
		tc := l.track(c, "")
		select {
		case l.raftCh <- tc:
		case <-l.closed:
			tc.Close()
		}
	case ProtoRPC:
		if l.cfg.HandleRPC == nil {
			c.Close()
			return
		}
		l.cfg.HandleRPC(l.track(c, ""), peer)
	default:
		l.cfg.Log.V(1).Info("Refused peer connection: unknown protocol byte", "remote", peer.Remote)
		c.Close()
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
	c, err := l.dial(string(address), "", ProtoRaft, timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c, string(address)), nil
}

// DialRPC opens a connection for the RPC side channel to the raft server
// Config.Servers lists at address.
func (l *Layer) DialRPC(address string, timeout time.Duration) (net.Conn, error) {
	return l.DialRPCTo(address, "", timeout)
}

// DialRPCTo is DialRPC to the raft server called name (for example the
// leader a peer named); an empty name looks address up in Config.Servers.
func (l *Layer) DialRPCTo(address, name string, timeout time.Duration) (net.Conn, error) {
	c, err := l.dial(address, name, ProtoRPC, timeout)
	if err != nil {
		return nil, err
	}
	return l.track(c, ""), nil
}

// expected is the raft server name a dial to address must reach.
func (l *Layer) expected(address, name string) (string, error) {
	if name != "" {
		return name, nil
	}
	if l.cfg.Servers != nil {
		for _, s := range l.cfg.Servers() {
			if s.Address == address && s.Name != "" {
				return s.Name, nil
			}
		}
	}
	return "", fmt.Errorf("%w: no raft server is known at %s", ErrWrongPeer, address)
}

// serverOf returns the name of the first known server cert stands for, ""
// when none.
func (l *Layer) serverOf(cert *x509.Certificate) string {
	if l.cfg.Servers == nil || cert == nil {
		return ""
	}
	for _, s := range l.cfg.Servers() {
		if StandsFor(cert, s.Name, s.Address) {
			return s.Name
		}
	}
	return ""
}

func (l *Layer) dial(address, name string, proto byte, timeout time.Duration) (net.Conn, error) {
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
		want, err := l.expected(address, name)
		if err != nil {
			raw.Close()
			return nil, err
		}
		host, _, _ := net.SplitHostPort(address)
		tc := tls.Client(raw, l.cfg.Certs.ClientConfig(host))
		_ = raw.SetDeadline(time.Now().Add(timeout))
		if err := tc.Handshake(); err != nil {
			raw.Close()
			return nil, fmt.Errorf("TLS handshake with %s: %w", address, err)
		}
		_ = raw.SetDeadline(time.Time{})
		if st := tc.ConnectionState(); len(st.PeerCertificates) == 0 || !StandsFor(st.PeerCertificates[0], want, address) {
			var names []string
			if len(st.PeerCertificates) > 0 {
				names = Identity(st.PeerCertificates[0])
			}
			raw.Close()
			return nil, fmt.Errorf("%w: dialled %s expecting %q, its certificate names %v", ErrWrongPeer, address, want, names)
		}
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

// SetRaftFaults delays each read that returns data on the raft
// connections this layer dialled (the answers to this node's own
// AppendEntries) by readDelay and, while holdWrites, holds their writes
// (nothing this node sends as leader reaches its followers). The RPC side
// channel and inbound connections are untouched. For fault-injection
// tests.
func (l *Layer) SetRaftFaults(readDelay time.Duration, holdWrites bool) {
	l.readDelay.Store(int64(readDelay))
	if holdWrites {
		ch := make(chan struct{})
		l.heldWrites.CompareAndSwap(nil, &ch)
	} else if ch := l.heldWrites.Swap(nil); ch != nil {
		close(*ch)
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
	if d := time.Duration(c.l.readDelay.Load()); n > 0 && c.dialed != "" && d > 0 {
		time.Sleep(d) // an injected fault: answers read late
	}
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
	if hold := c.l.heldWrites.Load(); hold != nil && c.dialed != "" {
		select {
		case <-*hold:
		case <-c.l.closed:
			return 0, net.ErrClosed
		}
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
