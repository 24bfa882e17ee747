package node

import (
	"context"
	"errors"
	"fmt"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

// Member usages ride renewals (issue 27): an owner renews its lease every
// lease/3 anyway, periodically or riding a round of reservations, so the
// usages it publishes go in the renewal's entry instead of one of their
// own. A publication then waits at most about one renewal interval,
// well inside the usage interval of the capacity layer.

// Bounds on the usages one renewal carries; the rest wait for the next, so
// a renewal (and a round it rides) stays one modest entry.
const (
	maxUsagesPerRenewal     = 64
	maxUsageBytesPerRenewal = 256 << 10
)

// ErrNotPermitted is returned by PublishUsage for a member this replica
// does not own, or may not write for now (lease lapsed, handover wait).
var ErrNotPermitted = errors.New("raftstore: this replica may not write for the member now")

// errNoResult is a carried usage's error when the renewal's batch gave it
// no result: its outcome is unknown.
var errNoResult = errors.New("no result: the renewal carrying it is not known to have committed")

// queuedUsage is one SetMemberUsage waiting for a renewal to carry it.
type queuedUsage struct {
	cmd  *fsm.SetMemberUsage
	size int
	// done is closed once res or err is set.
	done chan struct{}
	res  *fsm.Result
	err  error
}

// PublishUsage commits member's capacity usage (an opaque blob of at most
// fsm.MaxUsageBytes, from the capacity layer) under this replica's
// current ownership of member, from the leader or a follower. The usage
// rides in the entry of this replica's next renewal (Run's, or one riding
// a round: RideRenewal), so it waits up to about one renewal interval
// (lease/3); without Run it goes at once with a renewal of its own. The
// FSM keeps it only while that ownership is committed
// (fsm.SetMemberUsage). ErrNotPermitted when this replica may not write
// for member now (see PermittedFor); ErrFeatureMissing while a server
// does not list FeatureMemberUsage; fsm.ErrStale when the ownership
// changed before the usage committed. The wait is bounded by the lease.
func (o *OwnerLease) PublishUsage(ctx context.Context, member string, usage []byte) error {
	fence, ok := o.Permitted(member)
	if !ok {
		return fmt.Errorf("publishing the usage of member %s: %w", member, ErrNotPermitted)
	}
	m := fsm.Meta{ReqID: NewRequestID(), Now: o.n.clock.Now().UnixNano()}
	cmd := &fsm.SetMemberUsage{Meta: m, Member: member, Fence: fence, Usage: usage}
	if err := o.n.needsFeature(cmd); err != nil {
		return fmt.Errorf("publishing the usage of member %s: %w", member, err)
	}
	// Refused here, so that a bad usage never fails the batch it rides.
	data, err := fsm.Encode(cmd)
	if err != nil {
		return fmt.Errorf("publishing the usage of member %s: %w", member, err)
	}
	ctx, cancel := context.WithTimeout(ctx, o.lease)
	defer cancel()
	q := &queuedUsage{cmd: cmd, size: len(data), done: make(chan struct{})}
	o.mu.Lock()
	o.usages = append(o.usages, q)
	o.mu.Unlock()
	if !o.running.Load() {
		// Nothing renews periodically: this renewal carries it (its own
		// outcome is q's; a renewal refused says nothing about the usage).
		_ = o.Renew(ctx)
	}
	select {
	case <-q.done:
	case <-ctx.Done():
		if o.unqueueUsage(q) {
			return fmt.Errorf("publishing the usage of member %s: not sent: %w", member, context.Cause(ctx))
		}
		// A renewal in flight carries it (a ride's round may outlast the
		// lease): its outcome is unknown, as an Apply's that timed out.
		return fmt.Errorf("publishing the usage of member %s at epoch %d: sent, outcome unknown: %w",
			member, fence.Epoch, context.Cause(ctx))
	}
	if q.err == nil {
		q.err = q.res.Error()
	}
	if q.err != nil {
		return fmt.Errorf("publishing the usage of member %s at epoch %d: %w", member, fence.Epoch, q.err)
	}
	return nil
}

// unqueueUsage removes q from the queue; false when a renewal took it.
func (o *OwnerLease) unqueueUsage(q *queuedUsage) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for i, p := range o.usages {
		if p == q {
			o.usages = append(o.usages[:i:i], o.usages[i+1:]...)
			return true
		}
	}
	return false
}

// takeUsages removes from the queue, oldest first, the usages the next
// renewal carries. While a server does not list FeatureMemberUsage (it
// restarted with an older version since they were queued) it fails them
// all instead, as the batch they ride would be refused as a whole.
func (o *OwnerLease) takeUsages() []*queuedUsage {
	o.mu.Lock()
	if len(o.usages) == 0 {
		o.mu.Unlock()
		return nil
	}
	if !o.n.AllServersHave(FeatureMemberUsage) {
		failed := o.usages
		o.usages = nil
		o.mu.Unlock()
		err := fmt.Errorf("carrying a usage in a renewal: %w %q", ErrFeatureMissing, FeatureMemberUsage)
		for _, q := range failed {
			q.err = err
			close(q.done)
		}
		return nil
	}
	defer o.mu.Unlock()
	k, size := 0, 0
	for k < len(o.usages) && k < maxUsagesPerRenewal {
		if k > 0 && size+o.usages[k].size > maxUsageBytesPerRenewal {
			break
		}
		size += o.usages[k].size
		k++
	}
	taken := o.usages[:k:k]
	o.usages = append([]*queuedUsage(nil), o.usages[k:]...)
	return taken
}

// commands returns r's renewal followed by the usages it carries.
func (r *renewal) commands() []fsm.Command {
	cmds := make([]fsm.Command, 0, 1+len(r.usages))
	cmds = append(cmds, r.cmd)
	for _, q := range r.usages {
		cmds = append(cmds, q.cmd)
	}
	return cmds
}

// finishUsages hands each usage r carries its result from res (the
// results of the usages, in order; missing or nil when unknown), or err.
func (r *renewal) finishUsages(res []*fsm.Result, err error) {
	if err == nil {
		err = errNoResult
	}
	for i, q := range r.usages {
		if i < len(res) && res[i] != nil {
			q.res = res[i]
		} else {
			q.err = err
		}
		close(q.done)
	}
}

// send commits r: the renewal alone (Apply), or with the usages it
// carries in one batch (ApplyAll), and returns the renewal's result.
func (o *OwnerLease) send(ctx context.Context, r *renewal) (*fsm.Result, error) {
	if len(r.usages) == 0 {
		return o.n.Apply(ctx, r.cmd)
	}
	res, err := o.n.ApplyAll(ctx, r.commands())
	r.finishUsages(res[1:], err)
	if err == nil && res[0] != nil {
		err = res[0].Error()
	}
	return res[0], err
}
