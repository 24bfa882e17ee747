package node

import (
	"context"
	"time"
)

// HoldCommits makes this node queue the commands it is asked to commit, as
// while an entry is in flight, until release is called; queued says how many
// wait. For the group commit test.
func (n *Node) HoldCommits() (queued func() int, release func()) {
	a := &n.applier
	for {
		a.mu.Lock()
		if !a.running {
			a.running = true
			a.mu.Unlock()
			break
		}
		a.mu.Unlock()
		time.Sleep(time.Millisecond) // an entry is in flight; it ends within ApplyTimeout
	}
	queued = func() int {
		a.mu.Lock()
		defer a.mu.Unlock()
		return len(a.queue)
	}
	return queued, func() { go n.commitQueued() }
}

// WithoutFeature makes n answer status, and judge its own features, as a
// replica of a version without feature.
func (n *Node) WithoutFeature(feature string) { n.hiddenFeatures.Store(feature, struct{}{}) }

// WithoutBatchFeature makes n answer status as a replica of a version that
// cannot apply batch entries.
func (n *Node) WithoutBatchFeature() { n.WithoutFeature(FeatureBatch) }

// CheckFeatures asks the servers of the configuration for their features
// now, as the feature loop does.
func (n *Node) CheckFeatures() { n.checkFeatures(context.Background()) }

// CheckBatchSupport asks the other servers now and returns whether this
// node may combine commands.
func (n *Node) CheckBatchSupport() bool {
	n.CheckFeatures()
	return n.CombinesCommands()
}

// FailQueued ends the commands HoldCommits queued with err, as a failed
// raft.Apply does; when committed is true their entry is committed first
// (the failure came after the append, as when leadership is lost then).
// Commits after it are normal.
func (n *Node) FailQueued(err error, committed bool) {
	a := &n.applier
	a.mu.Lock()
	batch := takeBatch(&a.queue, len(a.queue))
	a.mu.Unlock()
	if committed {
		_, _ = n.apply(batch)
	}
	for _, p := range batch {
		p.err = err
		close(p.done)
	}
	go n.commitQueued()
}

// Prompts is how many heartbeat checks the election prompter prompted.
func (n *Node) Prompts() int64 { return n.prompts.Load() }

// Exported for the prompt tests.
var (
	FollowerRank = followerRank
	PromptDue    = promptDue
)

// Until is when o's lease on member lapses (zero when it holds none).
func (o *OwnerLease) Until(member string) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.held[member].until
}

// QueuedUsages is how many usages wait for a renewal to carry them.
func (o *OwnerLease) QueuedUsages() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.usages)
}

// SetBackgroundLinger sets how long the committer holds background work
// and rounds on a tick for company until restore is called.
func SetBackgroundLinger(d time.Duration) (restore func()) {
	old := backgroundLinger
	backgroundLinger = d
	return func() { backgroundLinger = old }
}

// Queued is how many commands wait for this node's committer.
func (n *Node) Queued() int {
	a := &n.applier
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.queue)
}

// LegacyContactPeers counts the voters this node found to predate contact
// rounds.
func (n *Node) LegacyContactPeers() int {
	count := 0
	n.legacyContact.Range(func(any, any) bool { count++; return true })
	return count
}

// ContactLinks reports the connections this node dialled for contact
// rounds and the answers it read over them.
func (n *Node) ContactLinks() (dials, answers int64) {
	return n.contactDials.Load(), n.contactAnswers.Load()
}

// SetRaftFaults injects faults on the raft connections n dialled (see
// transport.Layer.SetRaftFaults).
func (n *Node) SetRaftFaults(readDelay time.Duration, holdWrites bool) {
	n.layer.SetRaftFaults(readDelay, holdWrites)
}

// LeaseUntil is when n's member write lease lapses.
func (n *Node) LeaseUntil() time.Time {
	n.lead.mu.Lock()
	defer n.lead.mu.Unlock()
	return n.lead.leaseUntil
}

// ContactMargin is what the leader keeps back from a follower's promise
// of heartbeat.
func ContactMargin(heartbeat time.Duration) time.Duration { return contactMargin(heartbeat) }
