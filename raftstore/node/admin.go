package node

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/replicafed/replicafed/raftstore/transport"
)

// maxAdminBody bounds an admin request body; the largest is {"id","address"}.
const maxAdminBody = 64 << 10

// AdminHandler serves the admin endpoint (with AdminTLSConfig unless
// raft.tls.insecure):
//
//	GET    /status, /livez, /readyz      read: this replica's view
//	GET    /raft/servers                 read: the configuration
//	POST   /raft/voters                  mutate: {"id":..., "address":...} add a voter
//	DELETE /raft/servers/{id}            mutate: remove a server
//	POST   /raft/leadership-transfer     mutate: hand leadership to another voter
//
// Reads need the admin token ("Authorization: Bearer <token>") or a client
// certificate from the raft CA whose identity is a configured peer or a
// server of the raft configuration. Mutations need the token or the
// certificate of a current voter. Without TLS only the token authorizes;
// with neither TLS nor a token, reads are open and mutations refused.
func (n *Node) AdminHandler() http.Handler {
	mux := http.NewServeMux()
	probe := func(f func() error) http.HandlerFunc {
		return func(w http.ResponseWriter, _ *http.Request) {
			if err := f(); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		}
	}
	mux.Handle("GET /livez", n.auth(false, probe(n.Live)))
	mux.Handle("GET /readyz", n.auth(false, probe(n.Ready)))
	mux.Handle("GET /status", n.auth(false, func(w http.ResponseWriter, _ *http.Request) {
		leaderAddr, leaderID := n.Leader()
		_, term, leading := n.Leading()
		st := map[string]any{
			"id": n.ServerID(), "address": n.Address(), "leading": leading, "term": term,
			"leaderID": leaderID, "leaderAddress": leaderAddr, "ready": n.Ready() == nil,
		}
		if owners := n.fsm.Owners(); len(owners) > 0 {
			// Sharding: who writes to which member, as committed here.
			rows := make(map[string]any, len(owners))
			for m, o := range owners {
				rows[m] = map[string]any{"owner": o.Owner, "epoch": o.Epoch}
			}
			st["owners"] = rows
		}
		if leading {
			elected, first := n.Handover()
			st["leaderSince"] = elected.UTC().Format(time.RFC3339Nano)
			if !first.IsZero() {
				st["firstMemberWrite"] = first.UTC().Format(time.RFC3339Nano)
			}
		}
		writeJSON(w, st)
	}))
	mux.Handle("GET /raft/servers", n.auth(false, func(w http.ResponseWriter, _ *http.Request) {
		s, err := n.Servers()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, s)
	}))
	mux.Handle("POST /raft/voters", n.auth(true, func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ID, Address string }
		if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAdminBody)).Decode(&req); err != nil || req.ID == "" || req.Address == "" {
			http.Error(w, "body must be {\"id\":..., \"address\":...}", http.StatusBadRequest)
			return
		}
		if err := n.AddVoter(r.Context(), req.ID, req.Address); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"added": req.ID})
	}))
	mux.Handle("DELETE /raft/servers/{id}", n.auth(true, func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := n.RemoveServer(r.Context(), id); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"removed": id})
	}))
	mux.Handle("POST /raft/leadership-transfer", n.auth(true, func(w http.ResponseWriter, _ *http.Request) {
		if err := n.TransferLeadership(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"transferred": "ok"})
	}))
	return mux
}

// auth admits a request to a read (mutate false) or mutating endpoint.
func (n *Node) auth(mutate bool, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && n.tokenOK(tok) {
			h(w, r)
			return
		}
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.PeerCertificates) > 0 {
			cert := r.TLS.PeerCertificates[0]
			p := transport.Peer{Verified: true, Names: transport.Identity(cert), Cert: cert}
			if (mutate && n.inConfiguration(p, true)) || (!mutate && n.knownPeer(p)) {
				h(w, r)
				return
			}
			http.Error(w, "forbidden: certificate identity is not allowed here", http.StatusForbidden)
			return
		}
		if n.certs == nil && n.cfg.AdminToken == "" && !mutate {
			h(w, r) // insecure and tokenless: warned about at start
			return
		}
		w.Header().Set("WWW-Authenticate", "Bearer")
		http.Error(w, "unauthorized", http.StatusUnauthorized)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
