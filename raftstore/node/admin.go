package node

import (
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"
)

// AdminHandler serves:
//
//	GET    /livez, /readyz               probes, unauthenticated
//	GET    /raft/servers                 the configuration
//	POST   /raft/voters                  {"id":..., "address":...} add a voter
//	DELETE /raft/servers/{id}            remove a server
//	POST   /raft/leadership-transfer     hand leadership to another voter
//
// The /raft endpoints need "Authorization: Bearer <AdminToken>" or, when
// served over TLS, a verified client certificate.
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
	mux.Handle("GET /livez", probe(n.Live))
	mux.Handle("GET /readyz", probe(n.Ready))
	mux.Handle("GET /raft/servers", n.auth(func(w http.ResponseWriter, _ *http.Request) {
		s, err := n.Servers()
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		writeJSON(w, s)
	}))
	mux.Handle("POST /raft/voters", n.auth(func(w http.ResponseWriter, r *http.Request) {
		var req struct{ ID, Address string }
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.ID == "" || req.Address == "" {
			http.Error(w, "body must be {\"id\":..., \"address\":...}", http.StatusBadRequest)
			return
		}
		if err := n.AddVoter(r.Context(), req.ID, req.Address); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"added": req.ID})
	}))
	mux.Handle("DELETE /raft/servers/{id}", n.auth(func(w http.ResponseWriter, r *http.Request) {
		id := r.PathValue("id")
		if err := n.RemoveServer(r.Context(), id); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"removed": id})
	}))
	mux.Handle("POST /raft/leadership-transfer", n.auth(func(w http.ResponseWriter, _ *http.Request) {
		if err := n.TransferLeadership(); err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, map[string]string{"transferred": "ok"})
	}))
	return mux
}

func (n *Node) auth(h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 {
			h(w, r)
			return
		}
		tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if n.cfg.AdminToken == "" || !ok || subtle.ConstantTimeCompare([]byte(tok), []byte(n.cfg.AdminToken)) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h(w, r)
	})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
