package node

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/transport"
)

// The side-channel RPC: one JSON request and one JSON response per
// connection, each prefixed with a 4-byte big-endian length.

// Frame size limits. A request from a known peer carries at most one
// encoded command (fsm.MaxItems pods); anyone else can only join, whose
// request is tiny, so a stranger cannot make a replica allocate more than
// maxStrangerFrame before it is refused.
const (
	maxRPCSize       = 16 << 20
	maxStrangerFrame = 64 << 10
)

type rpcRequest struct {
	Op string `json:"op"`
	// apply
	Data []byte `json:"data,omitempty"`
	// applyall: commands committed together, in order (ApplyAll)
	Batch [][]byte `json:"batch,omitempty"`
	// OnTick: the applyall is a round sent at a shared tick (OnTick). A
	// leader that predates it commits the batch at once, as before.
	OnTick bool `json:"onTick,omitempty"`
	// join / add voter / remove
	ID      string `json:"id,omitempty"`
	Address string `json:"address,omitempty"`
	Token   string `json:"token,omitempty"`
}

type rpcResponse struct {
	Err       string      `json:"err,omitempty"`
	NotLeader bool        `json:"notLeader,omitempty"`
	Result    *fsm.Result `json:"result,omitempty"`
	// Results answer an applyall, one per command; nil for a command not
	// known to be committed.
	Results []*fsm.Result `json:"results,omitempty"`
	// Applied answers an apply or applyall: the leader FSM's applied index
	// when it answered, at or after the command's entry. The follower
	// waits to apply it too before it returns (read your own writes); 0
	// from a leader that predates it.
	Applied uint64 `json:"applied,omitempty"`
	// status
	HasState   bool   `json:"hasState,omitempty"`
	LeaderAddr string `json:"leaderAddr,omitempty"`
	// LeaderID is the leader's raft server ID: a joining peer checks that
	// the leader it dials stands for it.
	LeaderID string   `json:"leaderID,omitempty"`
	Servers  []string `json:"servers,omitempty"`
	// Features lists optional abilities of the answering replica
	// (FeatureBatch, FeatureHoldReissued).
	Features []string `json:"features,omitempty"`
	// Contact answers a contact round (contact.go).
	Contact *contactAnswer `json:"contact,omitempty"`
}

func writeFrame(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b)))
	if _, err := w.Write(append(hdr[:], b...)); err != nil {
		return err
	}
	return nil
}

// errFrameTooLarge is returned for a frame whose header announces more than
// the reader accepts; nothing of its body has been read or allocated.
var errFrameTooLarge = errors.New("rpc frame too large")

// readFrame reads one length-prefixed JSON frame of at most limit bytes.
func readFrame(r io.Reader, v any, limit uint32) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	size := binary.BigEndian.Uint32(hdr[:])
	if size > limit {
		return fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, size, limit)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(r, b); err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

func (n *Node) serveRPC(c net.Conn, p transport.Peer) {
	defer c.Close()
	if !n.started.Load() {
		return
	}
	_ = c.SetDeadline(time.Now().Add(n.cfg.ApplyTimeout + 5*time.Second))
	limit := uint32(maxRPCSize)
	if p.Verified && !n.knownPeer(p) {
		limit = maxStrangerFrame
	}
	var req rpcRequest
	if err := readFrame(c, &req, limit); err != nil {
		n.log.V(1).Info("Dropped RPC: unreadable request", "remote", p.Remote, "reason", err.Error())
		return
	}
	// A contact answer keeps the connection for the leader's next rounds
	// (contact.go): more contact requests, each authorized again (the peer
	// may have left the configuration), until the leader closes it, it
	// idles past contactIdle, or anything else arrives.
	for n.answerRPC(c, p, &req) {
		_ = c.SetDeadline(time.Now().Add(n.contactIdle()))
		req = rpcRequest{}
		if err := readFrame(c, &req, maxStrangerFrame); err != nil {
			return
		}
		if req.Op != "contact" {
			_ = writeFrame(c, &rpcResponse{Err: fmt.Sprintf("op %q on a contact connection", req.Op)})
			return
		}
	}
}

// answerRPC authorizes and runs req and writes the answer; it reports
// whether that was a contact answer, after which the connection stays
// open for the next one.
func (n *Node) answerRPC(c net.Conn, p transport.Peer, req *rpcRequest) bool {
	if err := n.authorizeRPC(p, req); err != nil {
		n.log.Info("Refused RPC", "op", req.Op, "remote", p.Remote, "identity", p.Names, "reason", err.Error())
		_ = writeFrame(c, &rpcResponse{Err: err.Error()})
		return false
	}
	resp := n.handleRPC(req)
	return writeFrame(c, resp) == nil && resp.Contact != nil
}

// handleRPC runs an authorized request (see authorizeRPC).
func (n *Node) handleRPC(req *rpcRequest) *rpcResponse {
	switch req.Op {
	case "status":
		addr, id := n.raft.LeaderWithID()
		r := &rpcResponse{LeaderAddr: string(addr), LeaderID: string(id)}
		r.Features = n.localFeatures()
		if f := n.raft.GetConfiguration(); f.Error() == nil {
			for _, s := range f.Configuration().Servers {
				r.Servers = append(r.Servers, string(s.ID))
			}
			r.HasState = len(r.Servers) > 0
		}
		return r
	case "apply":
		if n.raft.State() != raft.Leader {
			return &rpcResponse{NotLeader: true, Err: ErrNotLeader.Error()}
		}
		if err := n.forwardedNeedsFeature(req.Data); err != nil {
			return &rpcResponse{Err: err.Error()}
		}
		res, err := n.applyLocal(req.Data)
		if err != nil {
			return &rpcResponse{Err: err.Error(), NotLeader: isLeadershipErr(err)}
		}
		return &rpcResponse{Result: res, Applied: n.fsm.AppliedIndex()}
	case "applyall":
		return n.handleApplyAll(req.Batch, req.OnTick)
	case "contact":
		if !slices.Contains(n.localFeatures(), FeatureContact) {
			return &rpcResponse{Err: errNoContactOp.Error()} // a test's older version
		}
		return &rpcResponse{Contact: n.answerContact()}
	case "join", "addvoter", "remove":
		if n.raft.State() != raft.Leader {
			return &rpcResponse{NotLeader: true, Err: ErrNotLeader.Error()}
		}
		var err error
		switch req.Op {
		case "join", "addvoter":
			err = n.addVoterLocal(req.ID, req.Address)
		case "remove":
			err = n.removeServerLocal(req.ID)
		}
		if err != nil {
			return &rpcResponse{Err: err.Error(), NotLeader: isLeadershipErr(err)}
		}
		return &rpcResponse{}
	default:
		return &rpcResponse{Err: "unknown op " + req.Op}
	}
}

// forwardedNeedsFeature is needsFeature for a command a follower
// forwarded: the follower checked too, but the leader's view decides.
func (n *Node) forwardedNeedsFeature(data []byte) error {
	if !fsm.MayUseOwnership(data) {
		return nil
	}
	cmd, err := fsm.Decode(data)
	if err != nil {
		return nil //nolint:nilerr // the FSM refuses a malformed command with its own result
	}
	return n.needsFeature(cmd)
}

// handleApplyAll commits a follower's ApplyAll together, as the leader's
// own ApplyAll does (one entry when group commit allows), and answers one
// result per command, nil for those not known to be committed (the
// follower retries them one by one with their request IDs).
func (n *Node) handleApplyAll(batch [][]byte, onTick bool) *rpcResponse {
	if n.raft.State() != raft.Leader {
		return &rpcResponse{NotLeader: true, Err: ErrNotLeader.Error()}
	}
	if len(batch) == 0 || len(batch) > fsm.MaxBatchCommands {
		return &rpcResponse{Err: fmt.Sprintf("applyall carries %d commands, want 1-%d", len(batch), fsm.MaxBatchCommands)}
	}
	for _, d := range batch {
		if err := n.forwardedNeedsFeature(d); err != nil {
			return &rpcResponse{Err: err.Error()}
		}
	}
	out := make([]*fsm.Result, len(batch))
	n.commitTogether(batch, out, onTick)
	return &rpcResponse{Results: out, Applied: n.fsm.AppliedIndex()}
}

func isLeadershipErr(err error) bool {
	return errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
		errors.Is(err, raft.ErrLeadershipTransferInProgress) || errors.Is(err, ErrNotLeader)
}

// call sends req to the raft server called name at addr (name empty: the
// server known at addr, see peerName).
func (n *Node) call(ctx context.Context, addr, name string, req *rpcRequest) (*rpcResponse, error) {
	timeout := n.cfg.ApplyTimeout + 5*time.Second
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < timeout {
		timeout = time.Until(dl)
	}
	if timeout <= 0 {
		// The deadline can pass before ctx says so; never answer nil, nil.
		return nil, fmt.Errorf("calling %s: %w", addr, context.DeadlineExceeded)
	}
	c, err := n.layer.DialRPCTo(addr, name, min(timeout, 5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("dialing %s: %w", addr, err)
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	_ = c.SetDeadline(time.Now().Add(timeout))
	if err := writeFrame(c, req); err != nil {
		return nil, fmt.Errorf("sending %s to %s: %w", req.Op, addr, err)
	}
	var resp rpcResponse
	if err := readFrame(c, &resp, maxRPCSize); err != nil {
		return nil, fmt.Errorf("reading %s reply from %s: %w", req.Op, addr, err)
	}
	return &resp, nil
}

// Apply commits cmd through raft and returns the FSM's result. On a follower
// the command is forwarded to the leader over the raft listener. Leadership
// errors are retried with the same bytes until ctx ends; the request ID in
// the command makes the retry idempotent. A result with a non-OK code is
// returned together with its error.
func (n *Node) Apply(ctx context.Context, cmd fsm.Command) (*fsm.Result, error) {
	if err := n.needsFeature(cmd); err != nil {
		return nil, err
	}
	data, err := fsm.Encode(cmd)
	if err != nil {
		return nil, err
	}
	var last error
	for {
		if n.stopped() {
			return nil, raft.ErrRaftShutdown
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("applying command type %d: %w (last error: %v)", cmd.Type(), err, last)
		}
		var res *fsm.Result
		if n.raft.State() == raft.Leader {
			res, err = n.applyLocal(data)
		} else if addr, id := n.raft.LeaderWithID(); addr != "" {
			var resp *rpcResponse
			resp, err = n.call(ctx, string(addr), serverName(string(id)), &rpcRequest{Op: "apply", Data: data})
			switch {
			case err != nil:
			case resp.NotLeader:
				err = ErrNotLeader
			case resp.Err != "":
				return nil, fmt.Errorf("applying command type %d on leader %s: %s", cmd.Type(), addr, resp.Err)
			case resp.Result == nil:
				err = errors.New("applying command: empty result")
			default:
				// Committed: never sent again, whatever the wait says.
				if werr := n.fsm.WaitApplied(ctx, resp.Applied); werr != nil {
					return resp.Result, fmt.Errorf("applying command type %d: committed, but %w", cmd.Type(), werr)
				}
				res = resp.Result
			}
		} else {
			err = ErrNotLeader
		}
		if err == nil {
			if res == nil {
				return nil, errors.New("applying command: empty result")
			}
			return res, res.Error()
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return nil, err
		}
		last = err
		n.sleep(ctx, 25*time.Millisecond)
	}
}

// forward sends a membership request to the leader.
func (n *Node) forward(ctx context.Context, req *rpcRequest) error {
	req.Token = n.cfg.AdminToken
	for {
		if n.stopped() {
			return raft.ErrRaftShutdown
		}
		if n.raft.State() == raft.Leader {
			if r := n.handleRPC(req); !r.NotLeader {
				if r.Err != "" {
					return errors.New(r.Err)
				}
				return nil
			}
		} else if addr, id := n.raft.LeaderWithID(); addr != "" {
			resp, err := n.call(ctx, string(addr), serverName(string(id)), req)
			if err == nil && !resp.NotLeader {
				if resp.Err != "" {
					return fmt.Errorf("%s on leader %s: %s", req.Op, addr, resp.Err)
				}
				return nil
			}
		}
		if !n.sleep(ctx, 50*time.Millisecond) {
			return fmt.Errorf("%s: %w", req.Op, errors.Join(ctx.Err(), ErrNotLeader))
		}
	}
}
