package node

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/raftstore/fsm"
)

// OwnerLease is this replica's lease on the members it owns (sharding,
// issue 27). A write to a member is permitted only while
//
//   - the committed ownership table (this node's FSM) gives the member to
//     this replica at the epoch the lease was renewed for, and
//   - a RenewOwnership this replica SENT less than Lease ago committed and
//     accepted that (member, epoch), measured on the monotonic clock from
//     the send, as the write lease is (lease.go): a process resumed after
//     SIGSTOP or a long GC finds its lease lapsed, whatever answers it
//     reads then, and
//   - for an assignment marked Handover (the previous owner may still have
//     held a lease when it was decided), Lease plus Margin has passed since
//     this replica first saw the assignment: the previous owner's last
//     accepted renewal committed before the assignment did, so its lease
//     has lapsed by then.
//
// The leader moves a member away only after Lease plus Margin on its own
// clock since it saw the owner's latest renewal (ownership.Watch,
// Assigner), so an owner that stops renewing has stopped writing before
// another starts.
type OwnerLease struct {
	n     *Node
	clock clock.Clock
	lease time.Duration
	grace time.Duration // lease + margin

	mu   sync.Mutex
	held map[string]heldMember
	// changed is closed at the next change and replaced (Changed); lapse
	// signals when the earliest lease runs out without a renewal.
	changed chan struct{}
	lapse   clock.Timer
	// gained asks Run for a renewal now: an applied assignment gave this
	// replica a member, which it may write only once a renewal accepted
	// the new epoch (and whose handover wait counts from then).
	gained chan struct{}
	// lastSent is the send time of the latest renewal built (sent or
	// riding), lastRenewed that of the latest one accepted.
	lastSent, lastRenewed time.Time
	// usages wait for the next renewal to carry them (PublishUsage).
	usages []*queuedUsage
	// running is set while Run renews periodically.
	running atomic.Bool
}

// heldMember is what this replica knows of one member it owns.
type heldMember struct {
	epoch uint64
	// seen is when this replica first saw itself the owner at epoch.
	seen time.Time
	// until is when the lease from the latest accepted renewal lapses.
	until time.Time
}

// NewOwnerLease returns this replica's owner lease: lease is how long a
// renewal covers from its send, margin the allowance for clock-rate drift
// the leader adds before reassigning. clk must be a monotonic clock
// (clock.RealClock in production).
func (n *Node) NewOwnerLease(lease, margin time.Duration, clk clock.Clock) *OwnerLease {
	o := &OwnerLease{n: n, clock: clk, lease: lease, grace: lease + margin, held: map[string]heldMember{},
		changed: make(chan struct{}), gained: make(chan struct{}, 1)}
	n.fsm.OnApply(func(cmd fsm.Command) {
		a, assign := cmd.(*fsm.AssignOwners)
		if !assign && cmd != nil {
			return
		}
		o.signal()
		if cmd == nil || gains(a, n.ServerID()) {
			select {
			case o.gained <- struct{}{}:
			default:
			}
		}
	})
	return o
}

// gains reports whether a gives a member to self.
func gains(a *fsm.AssignOwners, self string) bool {
	return slices.ContainsFunc(a.Set, func(s fsm.OwnerAssignment) bool { return s.Owner == self })
}

// Permitted reports whether this replica may write to member now, and the
// fence its expectations commands must carry. It is PermittedFor(member,
// 0): prefer PermittedFor with the write's deadline.
func (o *OwnerLease) Permitted(member string) (fsm.OwnerFence, bool) {
	return o.PermittedFor(member, 0)
}

// PermittedFor reports whether this replica may send a write to member
// that may take up to d (its deadline, counted from now), and the fence
// its expectations commands must carry: as Permitted, and the lease must
// still hold at now+d, so the write has ended before the lease lapses (as
// Node.WriteLease(wait) asks of the leader). Member writers ask it right
// before every pod write.
func (o *OwnerLease) PermittedFor(member string, d time.Duration) (fsm.OwnerFence, bool) {
	own, ok := o.n.fsm.Owner(member)
	if !ok || own.Owner != o.n.ServerID() {
		return fsm.OwnerFence{}, false
	}
	o.mu.Lock()
	h, ok := o.held[member]
	o.mu.Unlock()
	now := o.clock.Now()
	if !ok || h.epoch != own.Epoch || !now.Add(d).Before(h.until) {
		return fsm.OwnerFence{}, false
	}
	if own.Handover && now.Sub(h.seen) < o.grace {
		return fsm.OwnerFence{}, false
	}
	return fsm.OwnerFence{Owner: own.Owner, Epoch: own.Epoch}, true
}

// Owned lists the members the committed table gives this replica, sorted,
// with their epochs: the members whose workers it should run.
func (o *OwnerLease) Owned() []fsm.MemberEpoch {
	self := o.n.ServerID()
	var out []fsm.MemberEpoch
	for m, own := range o.n.fsm.Owners() {
		if own.Owner == self {
			out = append(out, fsm.MemberEpoch{Member: m, Epoch: own.Epoch})
		}
	}
	slices.SortFunc(out, func(a, b fsm.MemberEpoch) int { return cmp.Compare(a.Member, b.Member) })
	return out
}

// Renew commits one RenewOwnership for every member this replica owns
// (also none: the renewal then tells the leader this replica is alive and
// may be given members) and extends the lease of the pairs it accepted,
// to the send time plus the lease. A follower's renewal goes to the leader
// (Node.Apply forwards it).
func (o *OwnerLease) Renew(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, o.lease)
	defer cancel()
	r := o.newRenewal()
	res, err := o.send(ctx, r)
	if !o.settle(r, res) {
		// Not committed, or refused as a whole: no lease is extended.
		return fmt.Errorf("renewing the ownership of %d members: %w", len(r.owned), err)
	}
	return nil
}

// RideRenewal offers a renewal of this replica's owner lease, with the
// usages queued for it (PublishUsage), to send in a batch of commands the
// caller sends at once anyway (a round of reservations: node.ApplyAll),
// so that they take no raft entry of their own. It returns no commands
// when a renewal was sent less than half the renewal interval (lease/3)
// ago, or while a server does not list FeatureOwnership. Otherwise the
// caller must send cmds right away, in order, and call done once with
// their results in order (a nil slice, or nil entries, for those not
// known to have committed). As with Renew, the lease of each pair it
// accepted runs from its send, taken when RideRenewal built it, on the
// monotonic clock; Run counts an accepted ride as its periodic renewal.
func (o *OwnerLease) RideRenewal() (cmds []fsm.Command, done func([]*fsm.Result)) {
	if !o.n.AllServersHave(FeatureOwnership) {
		return nil, nil
	}
	o.mu.Lock()
	recent := !o.lastSent.IsZero() && o.clock.Since(o.lastSent) < o.lease/6
	if !recent {
		o.lastSent = o.clock.Now() // no second ride meanwhile
	}
	o.mu.Unlock()
	if recent {
		return nil, nil
	}
	r := o.newRenewal()
	return r.commands(), func(res []*fsm.Result) {
		if len(res) == 0 {
			r.finishUsages(nil, nil)
			o.settle(r, nil)
			return
		}
		r.finishUsages(res[1:], nil)
		o.settle(r, res[0])
	}
}

// renewal is one RenewOwnership this replica built: the pairs it names
// and its send time, taken before it goes out, so the leases it grants
// never run past a lease from its actual send.
type renewal struct {
	owned []fsm.MemberEpoch
	sent  time.Time
	cmd   *fsm.RenewOwnership
	// usages ride with it, after cmd, in the same entry.
	usages []*queuedUsage
}

// newRenewal builds a renewal of what this replica owns now, to be sent
// at once.
func (o *OwnerLease) newRenewal() *renewal {
	owned := o.Owned()
	o.note(owned)
	sent := o.clock.Now()
	o.mu.Lock()
	if sent.After(o.lastSent) {
		o.lastSent = sent
	}
	o.mu.Unlock()
	m := fsm.Meta{ReqID: NewRequestID(), Now: o.n.clock.Now().UnixNano()}
	return &renewal{owned: owned, sent: sent, cmd: &fsm.RenewOwnership{Meta: m, Owner: o.n.ServerID(), Held: owned},
		usages: o.takeUsages()}
}

// settle extends, when res is r's committed and accepted result, the lease
// of every pair it accepted to r's send time plus the lease, and forgets
// those it did not; it reports whether res was accepted. It signals
// Changed either way.
func (o *OwnerLease) settle(r *renewal, res *fsm.Result) bool {
	defer o.signal()
	if res == nil || res.Code != fsm.CodeOK {
		return false
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if r.sent.After(o.lastRenewed) {
		o.lastRenewed = r.sent
	}
	for _, p := range r.owned {
		h, ok := o.held[p.Member]
		if !ok || h.epoch != p.Epoch {
			continue
		}
		if slices.Contains(res.NotOwned, p) {
			delete(o.held, p.Member)
			continue
		}
		if until := r.sent.Add(o.lease); until.After(h.until) {
			h.until = until
			o.held[p.Member] = h
		}
	}
	o.armLapseLocked()
	return true
}

// Release tells the raft leader that this replica has stopped writing to
// member, which an assignment at epoch moved away from it with a handover
// wait: the new owner may then write at once instead of after lease plus
// margin. Call it only once every write this replica sent to member under
// its former ownership has ended (its syncs drained, the last write's
// deadline passed). It changes nothing when the member is no longer at
// epoch or was not moved from this replica. ErrFeatureMissing while a
// server does not list FeatureOwnerRelease: the wait then runs out.
func (o *OwnerLease) Release(ctx context.Context, member string, epoch uint64) (ended bool, err error) {
	m := fsm.Meta{ReqID: NewRequestID(), Now: o.n.clock.Now().UnixNano()}
	res, err := o.n.Apply(ctx, &fsm.ReleaseOwnership{Meta: m, Owner: o.n.ServerID(), Member: member, Epoch: epoch})
	if err != nil {
		return false, fmt.Errorf("releasing member %s at epoch %d: %w", member, epoch, err)
	}
	return res.HandoverEnded, nil
}

// Changed returns a channel that is closed at the next change of what
// this replica owns or may write: an AssignOwners applied here (or a
// snapshot restored), the result of a renewal (accepted or not), and the
// lapse of a lease no renewal extended in time. A member writer waits on
// it to cancel its in-flight work on a member promptly (ask Owned and
// PermittedFor again, then call Changed again for the next change) rather
// than poll. The channel may close without anything it cares about
// having changed.
func (o *OwnerLease) Changed() <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.changed
}

// signal closes the current Changed channel.
func (o *OwnerLease) signal() {
	o.mu.Lock()
	defer o.mu.Unlock()
	close(o.changed)
	o.changed = make(chan struct{})
}

// armLapseLocked arranges a signal when the earliest lease still running
// lapses, with a clock that runs functions later (clock.RealClock and the
// fake clocks do).
func (o *OwnerLease) armLapseLocked() {
	later, ok := o.clock.(clock.WithDelayedExecution)
	if !ok {
		return
	}
	now := o.clock.Now()
	var first time.Time
	for _, h := range o.held {
		if h.until.After(now) && (first.IsZero() || h.until.Before(first)) {
			first = h.until
		}
	}
	if o.lapse != nil {
		o.lapse.Stop()
		o.lapse = nil
	}
	if !first.IsZero() {
		// In a goroutine: a fake clock runs the function under its own
		// lock, which Stop above takes under o.mu.
		o.lapse = later.AfterFunc(first.Sub(now), func() { go o.signal() })
	}
}

// note records when this replica first saw each (member, epoch) it owns
// and forgets the members it no longer owns.
func (o *OwnerLease) note(owned []fsm.MemberEpoch) {
	now := o.clock.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	keep := make(map[string]bool, len(owned))
	for _, p := range owned {
		keep[p.Member] = true
		if h, ok := o.held[p.Member]; !ok || h.epoch != p.Epoch {
			o.held[p.Member] = heldMember{epoch: p.Epoch, seen: now}
		}
	}
	for m := range o.held {
		if !keep[m] {
			delete(o.held, m)
		}
	}
}

// Run renews every lease/3, and at once when an applied assignment gives
// this replica a member (its writes there wait for a renewal that accepts
// the new epoch), until ctx ends or the node stops; a failed renewal is
// logged and the next one tried on time. A renewal that rode in a round
// (RideRenewal) and was accepted counts. The next renewal is due at the
// multiple of lease/3 since the Unix epoch nearest lease/3 after the
// latest accepted one's send (alignedDue: between a half and one and a
// half intervals), so the replicas renew together and the leader commits
// their renewals in one entry; the lease still runs from each send.
func (o *OwnerLease) Run(ctx context.Context) {
	o.running.Store(true)
	defer o.running.Store(false)
	interval := o.lease / 3
	var wait time.Duration
	for {
		if wait <= 0 {
			if err := o.Renew(ctx); err != nil && ctx.Err() == nil {
				o.n.log.V(1).Info("Ownership renewal failed", "reason", err.Error())
			}
			wait = interval
		}
		select {
		case <-ctx.Done():
			return
		case <-o.n.stopCh:
			return
		case <-o.gained:
			wait = 0
			continue
		case <-o.clock.After(wait):
		}
		o.mu.Lock()
		wait = alignedDue(o.lastRenewed, interval).Sub(o.clock.Now())
		o.mu.Unlock()
	}
}
