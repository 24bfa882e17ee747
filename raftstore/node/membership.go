package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// Server is one member of the raft configuration.
type Server struct {
	ID      string `json:"id"`
	Address string `json:"address"`
	Voter   bool   `json:"voter"`
	Leader  bool   `json:"leader"`
}

// Servers lists the current raft configuration as this node knows it.
func (n *Node) Servers() ([]Server, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, fmt.Errorf("reading raft configuration: %w", err)
	}
	_, leader := n.raft.LeaderWithID()
	var out []Server
	for _, s := range f.Configuration().Servers {
		out = append(out, Server{ID: string(s.ID), Address: string(s.Address), Voter: s.Suffrage == raft.Voter, Leader: s.ID == leader})
	}
	return out, nil
}

// AddVoter adds (or updates the address of) a voter, on the leader or
// forwarded to it. A server with the same name but another UUID (a replica
// that lost its disk) is removed first.
func (n *Node) AddVoter(ctx context.Context, id, address string) error {
	return n.forward(ctx, &rpcRequest{Op: "addvoter", ID: id, Address: address})
}

// RemoveServer removes a server from the configuration, on the leader or
// forwarded to it.
func (n *Node) RemoveServer(ctx context.Context, id string) error {
	return n.forward(ctx, &rpcRequest{Op: "remove", ID: id})
}

// TransferLeadership hands leadership to another voter. The member-write
// gate closes first and in-flight member writes drain, so the next leader's
// writes never overlap this one's; if the transfer fails the gate reopens.
func (n *Node) TransferLeadership() error {
	if n.raft.State() != raft.Leader {
		return ErrNotLeader
	}
	return n.handOver(false)
}

func (n *Node) addVoterLocal(id, address string) error {
	if id == "" || address == "" {
		return errors.New("add voter: id and address are required")
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return err
	}
	for _, s := range f.Configuration().Servers {
		if s.ID == raft.ServerID(id) {
			if string(s.Address) == address && s.Suffrage == raft.Voter {
				return nil
			}
			continue // AddVoter updates the address
		}
		if serverName(string(s.ID)) == serverName(id) || string(s.Address) == address {
			n.log.Info("Removing stale server that another takes the place of", "stale", string(s.ID), "new", id)
			if err := n.raft.RemoveServer(s.ID, 0, n.cfg.ApplyTimeout).Error(); err != nil {
				return fmt.Errorf("removing stale server %s: %w", s.ID, err)
			}
		}
	}
	if err := n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(address), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("adding voter %s at %s: %w", id, address, err)
	}
	n.log.Info("Added voter", "id", id, "address", address)
	n.refreshVoters()
	return nil
}

func (n *Node) removeServerLocal(id string) error {
	if err := n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.ApplyTimeout).Error(); err != nil {
		return fmt.Errorf("removing server %s: %w", id, err)
	}
	n.log.Info("Removed server", "id", id)
	n.refreshVoters()
	return nil
}

// membershipLoop makes sure this node is in the configuration. A node with
// no configuration asks every peer first: only when none has one does
// Peers[0] bootstrap (alone); every other node joins through the leader. A
// node that is not in the leader's configuration (removed while it was down)
// asks to be added again.
func (n *Node) membershipLoop() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		<-n.stopCh
		cancel()
	}()
	first := true
	for {
		if !first && !n.sleep(ctx, n.cfg.JoinInterval) {
			return
		}
		first = false
		if n.raft.State() == raft.Leader {
			continue
		}
		local := n.raft.GetConfiguration()
		if local.Error() != nil {
			continue
		}
		hasLocal := len(local.Configuration().Servers) > 0
		if hasLocal {
			// Known member with a live leader: nothing to do.
			if addr, _ := n.raft.LeaderWithID(); addr != "" {
				continue
			}
		}
		anyState, leaderAddr, leaderName, inLeaderConfig := false, "", "", false
		for _, p := range n.cfg.Peers {
			if p.ID == n.cfg.ID {
				continue
			}
			resp, err := n.peerStatus(ctx, p.Address, p.ID)
			if err != nil {
				continue
			}
			anyState = anyState || resp.HasState
			if resp.LeaderAddr != "" && leaderAddr == "" {
				// The leader's certificate must stand for the name the
				// peer gave (an older peer gives none: the address is
				// then looked up among the known servers).
				leaderAddr, leaderName = resp.LeaderAddr, serverName(resp.LeaderID)
				for _, s := range resp.Servers {
					inLeaderConfig = inLeaderConfig || s == string(n.serverID)
				}
			}
		}
		switch {
		case leaderAddr != "" && !inLeaderConfig:
			cctx, ccancel := context.WithTimeout(ctx, n.cfg.ApplyTimeout)
			resp, err := n.call(cctx, leaderAddr, leaderName, &rpcRequest{Op: "join", ID: string(n.serverID), Address: n.Address(), Token: n.cfg.AdminToken})
			ccancel()
			switch {
			case err != nil:
				n.log.V(1).Info("Join request failed", "leader", leaderAddr, "reason", err.Error())
			case resp.Err != "":
				n.log.V(1).Info("Join refused", "leader", leaderAddr, "reason", resp.Err)
			default:
				n.log.Info("Joined raft cluster", "leader", leaderAddr)
			}
		case !hasLocal && !anyState && n.cfg.Peers[0].ID == n.cfg.ID && n.allPeersAnswered(ctx):
			conf := raft.Configuration{Servers: []raft.Server{{ID: n.serverID, Address: raft.ServerAddress(n.Address()), Suffrage: raft.Voter}}}
			if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
				n.log.Error(err, "Bootstrap failed")
			} else if err == nil {
				n.log.Info("Bootstrapped new raft cluster", "clusterID", n.cfg.ClusterID)
			}
		}
	}
}

// peerStatus asks the peer name at addr for its raft status, waiting at
// most two seconds.
func (n *Node) peerStatus(ctx context.Context, addr, name string) (*rpcResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return n.call(ctx, addr, name, &rpcRequest{Op: "status", Token: n.cfg.AdminToken})
}

// allPeersAnswered is true when every other peer answered a status call with
// no configuration: only then is a fresh bootstrap safe (a peer that is down
// may hold the cluster's state).
func (n *Node) allPeersAnswered(ctx context.Context) bool {
	for _, p := range n.cfg.Peers {
		if p.ID == n.cfg.ID {
			continue
		}
		resp, err := n.peerStatus(ctx, p.Address, p.ID)
		if err != nil || resp.HasState {
			return false
		}
	}
	return true
}

// deadServerLoop, on the leader, removes voters that failed heartbeats for
// longer than DeadServerTimeout while at least MinVoters would remain. A
// removed replica that comes back is re-added by its membership loop.
func (n *Node) deadServerLoop(obs chan raft.Observation) {
	// A failure counts only in the term it was seen in: after a step-down and
	// a new election, heartbeats to a healthy voter succeed at once and raft
	// never reports them as resumed, so an older entry would remove it.
	type failure struct {
		since time.Time
		term  uint64
	}
	failing := map[raft.ServerID]failure{}
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case o := <-obs:
			switch d := o.Data.(type) {
			case raft.FailedHeartbeatObservation:
				if _, ok := failing[d.PeerID]; !ok {
					failing[d.PeerID] = failure{since: d.LastContact, term: n.raft.CurrentTerm()}
				}
			case raft.ResumedHeartbeatObservation:
				delete(failing, d.PeerID)
			}
		case <-t.C:
			if n.raft.State() != raft.Leader {
				clear(failing)
				continue
			}
			if n.cfg.DeadServerTimeout <= 0 {
				continue
			}
			servers, err := n.Servers()
			if err != nil {
				continue
			}
			voters := 0
			present := map[raft.ServerID]bool{}
			for _, s := range servers {
				present[raft.ServerID(s.ID)] = true
				if s.Voter {
					voters++
				}
			}
			term := n.raft.CurrentTerm()
			for id, f := range failing {
				if !present[id] || f.term != term {
					delete(failing, id)
					continue
				}
				if f.since.IsZero() || time.Since(f.since) < n.cfg.DeadServerTimeout || voters-1 < n.cfg.MinVoters {
					continue
				}
				n.log.Info("Removing dead server", "id", string(id), "lastContact", f.since)
				if err := n.removeServerLocal(string(id)); err != nil {
					n.log.Error(err, "Removing dead server failed; will retry", "id", string(id))
					continue
				}
				voters--
				delete(failing, id)
			}
		}
	}
}
