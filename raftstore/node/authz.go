package node

import (
	"crypto/subtle"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/raftstore/transport"
)

// Who may do what, with mutual TLS (the default):
//
//   - raft itself (AppendEntries, RequestVote, InstallSnapshot, TimeoutNow)
//     and the RPCs status and apply: a peer whose certificate identity is a
//     server of the raft configuration or a configured peer (NodeConfig.Peers);
//     status also to a peer that sends the admin token (it is about to join).
//   - join: the certificate identity must be the name of the server ID asked
//     for (a peer joins only as itself), and either the admin token must
//     match (when one is set) or, without a token, the name must be a
//     configured peer or already in the configuration.
//   - addvoter, remove (forwarded admin calls): a known peer as above, plus
//     the admin token when one is set.
//
// Without TLS (raft.tls.insecure) nothing is authenticated; only the token
// checks remain.

var errNotAuthorized = errors.New("unauthorized")

// A certificate stands for a peer when one of its DNS SANs is exactly the
// peer's name or the DNS host of its raft address (transport.StandsFor: no
// common name, no wildcard, no IP address).
func matches(p transport.Peer, name, address string) bool {
	return transport.StandsFor(p.Cert, name, address)
}

// servers is the transport's Config.Servers: the configured peers, then
// the servers of the raft configuration (GetConfiguration does not block).
func (n *Node) servers() []transport.Server {
	out := make([]transport.Server, 0, len(n.cfg.Peers)+3)
	for _, p := range n.cfg.Peers {
		out = append(out, transport.Server{Name: p.ID, Address: p.Address})
	}
	if !n.started.Load() {
		return out
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return out
	}
	for _, s := range f.Configuration().Servers {
		out = append(out, transport.Server{Name: serverName(string(s.ID)), Address: string(s.Address)})
	}
	return out
}

// knownPeer reports whether p is a server of the raft configuration or a
// configured peer.
func (n *Node) knownPeer(p transport.Peer) bool {
	for _, c := range n.cfg.Peers {
		if matches(p, c.ID, c.Address) {
			return true
		}
	}
	return n.inConfiguration(p, false)
}

// inConfiguration reports whether p is a server (a voter, when votersOnly)
// of this node's raft configuration.
func (n *Node) inConfiguration(p transport.Peer, votersOnly bool) bool {
	if !n.started.Load() {
		return false
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if votersOnly && s.Suffrage != raft.Voter {
			continue
		}
		if matches(p, serverName(string(s.ID)), string(s.Address)) {
			return true
		}
	}
	return false
}

func (n *Node) tokenOK(tok string) bool {
	return n.cfg.AdminToken != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(n.cfg.AdminToken)) == 1
}

// authorizeRaft admits a raft connection.
func (n *Node) authorizeRaft(p transport.Peer) error {
	if !p.Verified || !n.knownPeer(p) {
		return fmt.Errorf("%w: identity %v is neither in the raft configuration nor a configured peer", errNotAuthorized, p.Names)
	}
	return nil
}

// authorizeRPC admits one side-channel RPC. The error goes back to the
// caller, so it names the rule, never the token.
func (n *Node) authorizeRPC(p transport.Peer, req *rpcRequest) error {
	switch req.Op {
	case "status":
		// A peer about to join asks for the leader first: with the admin
		// token it need not be known yet.
		if p.Verified && !n.knownPeer(p) && !n.tokenOK(req.Token) {
			return fmt.Errorf("%w: identity %v is neither in the raft configuration nor a configured peer, and no admin token was given", errNotAuthorized, p.Names)
		}
		return nil
	case "apply", "applyall", "contact":
		if p.Verified && !n.knownPeer(p) {
			return fmt.Errorf("%w: identity %v is neither in the raft configuration nor a configured peer", errNotAuthorized, p.Names)
		}
		return nil
	case "join":
		if p.Verified && !matches(p, serverName(req.ID), req.Address) {
			return fmt.Errorf("%w: identity %v may not join as %q", errNotAuthorized, p.Names, serverName(req.ID))
		}
		if n.cfg.AdminToken != "" {
			if !n.tokenOK(req.Token) {
				return fmt.Errorf("%w: join needs the admin token", errNotAuthorized)
			}
			return nil
		}
		if p.Verified && !n.knownPeer(p) {
			return fmt.Errorf("%w: %q is not a configured peer and no admin token is set", errNotAuthorized, serverName(req.ID))
		}
		return nil
	case "addvoter", "remove":
		if p.Verified && !n.knownPeer(p) {
			return fmt.Errorf("%w: identity %v is neither in the raft configuration nor a configured peer", errNotAuthorized, p.Names)
		}
		if n.cfg.AdminToken != "" && !n.tokenOK(req.Token) {
			return fmt.Errorf("%w: %s needs the admin token", errNotAuthorized, req.Op)
		}
		return nil
	default:
		return fmt.Errorf("unknown op %q", req.Op)
	}
}

// AdminTLSConfig is the TLS configuration for the admin endpoint: the raft
// certificates (reloaded on rotation), and a client certificate verified
// against the raft CA when one is presented (the bearer token is the other
// way in). Nil when raft.tls.insecure.
func (n *Node) AdminTLSConfig() *tls.Config {
	if n.certs == nil {
		return nil
	}
	return n.certs.ServerConfig(tls.VerifyClientCertIfGiven)
}
