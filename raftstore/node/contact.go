package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// Contact rounds: what bounds the write lease.
//
// VerifyLeader alone cannot bound it. hashicorp/raft (v1.7.3,
// replication.go) counts a verification vote whenever a follower answers
// any AppendEntries successfully, heartbeat or replication, including one
// sent before the verification was asked for: a leader resuming from a
// pause (SIGSTOP, a long GC, a starved goroutine) reads answers that were
// written while it stood still, and they verify a round it asked for after
// it resumed. The follower had last heard from it long before, and may
// already have voted for another leader.
//
// So after VerifyLeader (whose heartbeats make the followers' last contact
// recent) the leader asks each other voter directly, over the side
// channel: whom it follows, in which term, and how long ago it last heard
// from its leader. A follower of hashicorp/raft refuses every vote while
// it knows a leader, and forgets the leader only once its last contact is
// a heartbeat timeout old; the answer left it after the round started. So
// a follower that answers "I follow you in your term, last contact age
// ago" votes for nobody else before start + heartbeat - age. The leader
// itself votes for nobody while it leads. Once a quorum (the leader
// counted) answered so, no other leader exists before the earliest of
// those bounds, and every permitted member write must have ended by then.

// contactAnswer is a voter's answer to a contact round.
type contactAnswer struct {
	// Follower is true when the answering node was a raft follower.
	Follower bool `json:"follower,omitempty"`
	// Term is its current term, LeaderID the leader it knows ("" none).
	Term     uint64 `json:"term,omitempty"`
	LeaderID string `json:"leaderID,omitempty"`
	// Age is how long before answering it last heard from that leader.
	Age time.Duration `json:"age,omitempty"`
	// Heartbeat is its raft heartbeat timeout: its own, which decides
	// when it forgets the leader.
	Heartbeat time.Duration `json:"heartbeat,omitempty"`
}

// contactMargin is kept back from each follower's bound: it covers the
// time between a write's lease check and the start of its deadline timer
// on a loaded process, timer lateness, and the election prompter's
// nanosecond-shorter timeout. Clock-rate drift over a second is parts per
// million and needs no more.
func contactMargin(heartbeat time.Duration) time.Duration {
	return max(heartbeat/20, 10*time.Millisecond)
}

// answerContact is a node's answer to a contact round. The last contact
// is read first: if the term and the leader read after it still name the
// same leader, this node followed it all along, so it forgets that leader
// no earlier than a heartbeat timeout after that contact. A term that
// moved during the reads, or a contact never made (raft sets the leader
// before it accepts a first AppendEntries), promises nothing.
func (n *Node) answerContact() *contactAnswer {
	last := n.raft.LastContact()
	term := n.raft.CurrentTerm()
	_, id := n.raft.LeaderWithID()
	follower := n.raft.State() == raft.Follower
	if n.raft.CurrentTerm() != term || last.IsZero() {
		id = ""
	}
	return &contactAnswer{
		Follower:  follower,
		Term:      term,
		LeaderID:  string(id),
		Age:       max(time.Since(last), 0),
		Heartbeat: n.cfg.HeartbeatTimeout,
	}
}

// bound is the instant before which the answering voter, asked in a round
// started at start, votes for no leader but self in term: start plus its
// heartbeat timeout less its contact age and the margin. ok is false for
// an answer that promises nothing (another term, another leader, not a
// follower, no heartbeat timeout).
func (a contactAnswer) bound(start time.Time, self string, term uint64) (time.Time, bool) {
	if !a.Follower || a.Term != term || a.LeaderID != self || a.Heartbeat <= 0 || a.Age < 0 {
		return time.Time{}, false
	}
	return start.Add(a.Heartbeat - a.Age - contactMargin(a.Heartbeat)), true
}

// quorumBound is the write lease that the other voters' bounds give a
// leader, which counts itself: the latest instant before which a quorum
// still votes for nobody else. ok is false while fewer than quorum-1
// bounds are known. A single voter (quorum 1) gets solo: it needs nobody,
// but its lease still ends, since voters may join (a cluster forming).
func quorumBound(bounds []time.Time, quorum int, solo time.Time) (time.Time, bool) {
	need := quorum - 1
	if need <= 0 {
		return solo, true
	}
	if len(bounds) < need {
		return time.Time{}, false
	}
	sorted := slices.SortedFunc(slices.Values(bounds), func(a, b time.Time) int { return b.Compare(a) })
	return sorted[need-1], true
}

// errNoContactOp is the answer of a replica that predates contact rounds.
var errNoContactOp = errors.New(`unknown op "contact"`)

// contactRound asks every other voter for its contact with this leader in
// term and returns the bound of a quorum of them (see quorumBound).
// legacyBound is what a voter that predates contact rounds counts for
// during a rolling upgrade: the bound VerifyLeader gave before. It returns
// as soon as a quorum promised, or once every voter answered or failed.
func (n *Node) contactRound(start time.Time, term uint64, voters []raft.ServerAddress, quorum int, legacyBound time.Time) (time.Time, bool) {
	solo := start.Add(n.cfg.HeartbeatTimeout - contactMargin(n.cfg.HeartbeatTimeout))
	if until, ok := quorumBound(nil, quorum, solo); ok {
		return until, true
	}
	// A voter slower than the quorum keeps its call to the deadline rather
	// than have its kept connection cut (contactCall).
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.HeartbeatTimeout)
	results := make(chan time.Time, len(voters))
	var wg sync.WaitGroup
	self := string(n.serverID)
	for _, addr := range voters {
		wg.Go(func() {
			if until, ok := n.askContact(ctx, addr, start, self, term, legacyBound); ok {
				results <- until
			}
		})
	}
	go func() { wg.Wait(); cancel(); close(results) }()
	var bounds []time.Time
	for b := range results {
		bounds = append(bounds, b)
		if until, ok := quorumBound(bounds, quorum, solo); ok {
			return until, true
		}
	}
	return time.Time{}, false
}

// askContact asks the voter at addr and returns its bound. A voter that
// predates contact rounds counts for legacyBound.
func (n *Node) askContact(ctx context.Context, addr raft.ServerAddress, start time.Time, self string, term uint64, legacyBound time.Time) (time.Time, bool) {
	resp, err := n.contactCall(ctx, string(addr))
	switch {
	case err != nil:
		n.log.V(4).Info("Contact round: no answer", "peer", addr, "reason", err.Error())
		return time.Time{}, false
	case resp.Contact != nil:
		return resp.Contact.bound(start, self, term)
	case strings.Contains(resp.Err, errNoContactOp.Error()):
		n.warnLegacyContact(addr)
		return legacyBound, !legacyBound.IsZero()
	default:
		n.log.V(4).Info("Contact round: refused", "peer", addr, "reason", resp.Err)
		return time.Time{}, false
	}
}

// warnLegacyContact logs, once per peer, that a voter predates contact
// rounds and its acknowledgements count as VerifyLeader's did.
func (n *Node) warnLegacyContact(addr raft.ServerAddress) {
	if _, seen := n.legacyContact.LoadOrStore(addr, true); seen {
		return
	}
	n.log.Info("WARNING: a raft voter predates contact rounds; until it is upgraded its VerifyLeader acknowledgements extend the member write lease as before, which a resumed paused leader can misread",
		"peer", addr)
}

// contactLink is the connection a leader keeps to one voter for contact
// rounds: a round every quarter lease would otherwise cost a TLS
// handshake per voter.
type contactLink struct {
	mu sync.Mutex
	c  net.Conn
}

// contactCall sends one contact request to the voter at addr over the
// kept connection, dialling when there is none; a kept connection that
// fails (the voter closed it while idle, or restarted) is dialled again
// once. It ends by ctx's deadline; ctx's cancellation alone does not cut
// a call in flight.
func (n *Node) contactCall(ctx context.Context, addr string) (*rpcResponse, error) {
	v, _ := n.contactLinks.LoadOrStore(addr, &contactLink{})
	link := v.(*contactLink)
	link.mu.Lock()
	defer link.mu.Unlock()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(n.cfg.HeartbeatTimeout)
	}
	for attempt := 0; ; attempt++ {
		kept := link.c != nil
		if !kept {
			c, err := n.layer.DialRPCTo(addr, "", max(time.Until(deadline), time.Millisecond))
			if err != nil {
				return nil, fmt.Errorf("dialing %s: %w", addr, err)
			}
			link.c = c
			n.contactDials.Add(1)
		}
		resp, err := exchangeContact(link.c, deadline)
		if err == nil && resp.Contact != nil {
			n.contactAnswers.Add(1)
			return resp, nil
		}
		// An answer without contact (an older version, a refusal) ends
		// the connection on the voter's side.
		_ = link.c.Close()
		link.c = nil
		if err == nil {
			return resp, nil
		}
		if !kept || attempt > 0 || time.Now().After(deadline) {
			return nil, fmt.Errorf("contact round with %s: %w", addr, err)
		}
	}
}

// exchangeContact writes one contact request on c and reads the answer.
func exchangeContact(c net.Conn, deadline time.Time) (*rpcResponse, error) {
	_ = c.SetDeadline(deadline)
	if err := writeFrame(c, &rpcRequest{Op: "contact"}); err != nil {
		return nil, fmt.Errorf("sending contact: %w", err)
	}
	var resp rpcResponse
	if err := readFrame(c, &resp, maxRPCSize); err != nil {
		return nil, fmt.Errorf("reading the contact answer: %w", err)
	}
	return &resp, nil
}

// contactIdle is how long a voter keeps a contact connection open without
// a request: several rounds of the longest lease config allows.
func (n *Node) contactIdle() time.Duration { return 4 * n.cfg.HeartbeatTimeout }
