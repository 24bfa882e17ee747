package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

// NewRequestID returns a random request ID for command deduplication.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Meta returns command metadata stamped with a new request ID, this node's
// clock and the current leader term (0 when not leading).
func (n *Node) Meta() fsm.Meta {
	_, term, _ := n.Leading()
	return fsm.Meta{ReqID: NewRequestID(), Now: n.clock.Now().UnixNano(), Term: term}
}

// SetTargets commits the per-member targets of frs planned at generation.
// An older generation than the committed one is refused with fsm.ErrStale.
func (n *Node) SetTargets(ctx context.Context, frs fsm.FRSRef, generation int64, targets map[string]int32) error {
	if _, err := n.Apply(ctx, &fsm.SetTargets{Meta: n.Meta(), FRS: frs, Generation: generation, Targets: targets}); err != nil {
		return fmt.Errorf("setting targets of %s: %w", frs, err)
	}
	return nil
}

// Targets returns the committed targets of frs and the generation they were
// planned for, from this node's FSM. A non-empty frs.UID must match.
func (n *Node) Targets(frs fsm.FRSRef) (targets map[string]int32, generation int64, ok bool) {
	rec, ok := n.fsm.Targets(frs)
	if !ok {
		return nil, 0, false
	}
	return rec.Targets, rec.Generation, true
}

// DeleteTargets removes the targets of frs; missing targets are not an error.
func (n *Node) DeleteTargets(ctx context.Context, frs fsm.FRSRef) error {
	res, err := n.Apply(ctx, &fsm.DeleteTargets{Meta: n.Meta(), FRS: frs})
	if err != nil && (res == nil || res.Code != fsm.CodeNotFound) {
		return fmt.Errorf("deleting targets of %s: %w", frs, err)
	}
	return nil
}

// SetRollout commits the rollout record (a JSON document) of frs.
func (n *Node) SetRollout(ctx context.Context, frs fsm.FRSRef, record []byte) error {
	if _, err := n.Apply(ctx, &fsm.SetRollout{Meta: n.Meta(), FRS: frs, Record: record}); err != nil {
		return fmt.Errorf("setting rollout of %s: %w", frs, err)
	}
	return nil
}

// Rollout returns the committed rollout record of frs from this node's FSM.
// A non-empty frs.UID must match.
func (n *Node) Rollout(frs fsm.FRSRef) ([]byte, bool) {
	rec, ok := n.fsm.Rollout(frs)
	return rec.Record, ok
}

// DeleteRollout removes the rollout record of frs; a missing one is not an
// error.
func (n *Node) DeleteRollout(ctx context.Context, frs fsm.FRSRef) error {
	res, err := n.Apply(ctx, &fsm.DeleteRollout{Meta: n.Meta(), FRS: frs})
	if err != nil && (res == nil || res.Code != fsm.CodeNotFound) {
		return fmt.Errorf("deleting rollout of %s: %w", frs, err)
	}
	return nil
}

// SetMemberHealth records a member cluster's health.
func (n *Node) SetMemberHealth(ctx context.Context, cluster string, healthy bool, since time.Time) error {
	if _, err := n.Apply(ctx, &fsm.SetHealth{Meta: n.Meta(), Cluster: cluster, Healthy: healthy, Since: since.UnixNano()}); err != nil {
		return fmt.Errorf("setting health of member %s: %w", cluster, err)
	}
	return nil
}

// PruneMembers drops the recorded health and the expectations of every
// member cluster not in members (the registered ones), and expired
// expectations of every key. Only the fenced leader may call it (the
// command is refused in any other term); call it after the member registry
// changed and now and then, with the complete list of registered members.
func (n *Node) PruneMembers(ctx context.Context, members []string) error {
	_, term, ok := n.Leading()
	if !ok {
		return fmt.Errorf("pruning member state: %w", ErrNotLeader)
	}
	m := n.Meta()
	m.Term = term
	if _, err := n.Apply(ctx, &fsm.PruneMembers{Meta: m, Members: members}); err != nil {
		return fmt.Errorf("pruning member state: %w", err)
	}
	return nil
}

// MemberHealth reads a member's recorded health from this node's FSM.
func (n *Node) MemberHealth(cluster string) (healthy bool, since time.Time, ok bool) {
	h, ok := n.fsm.Health(cluster)
	if !ok {
		return false, time.Time{}, false
	}
	return h.Healthy, time.Unix(0, h.Since), true
}

// OnApply registers fn to be called on this replica, leader or follower,
// after each SetTargets, DeleteTargets, SetRollout, DeleteRollout,
// AssignOwners and SetMemberUsage is applied to its FSM without refusal (also inside batch
// entries), and with a nil command after a snapshot was restored (read
// everything again). A replica's member workers learn of new targets of
// the members they own from it: a follower has no hub reconciler to poke
// them. fn runs on raft's apply path and must not block or apply commands
// (enqueue work and return); see fsm.FSM.OnApply.
func (n *Node) OnApply(fn func(cmd fsm.Command)) { n.fsm.OnApply(fn) }

// MemberUsage returns a copy of member's capacity usage as its current
// owner last published it (OwnerLease.PublishUsage), from this node's FSM.
func (n *Node) MemberUsage(member string) (fsm.MemberUsage, bool) { return n.fsm.MemberUsage(member) }
