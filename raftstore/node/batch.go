package node

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/replicafed/replicafed/internal/metrics"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// maxBatchBytes bounds the commands combined into one entry; a larger
// command is committed alone.
const maxBatchBytes = 1 << 20

// pendingApply is one command waiting to be committed on this leader.
type pendingApply struct {
	data []byte
	// onTick: sent in a round at a shared tick (OnTick); the committer may
	// hold it like background work.
	onTick bool
	done   chan struct{}
	res    *fsm.Result
	err    error
}

// ApplyOption changes how ApplyAll commits its commands.
type ApplyOption func(*applyOptions)

type applyOptions struct{ onTick bool }

// OnTick marks commands sent in a round that began at a shared tick (a
// multiple of its interval since the Unix epoch, see UntilAligned), as
// the member owners' crowded rounds of reservations do: the leader may
// hold them for backgroundLinger, as it holds background work, so that
// the rounds of several replicas at the same tick share one entry. Only
// for rounds that wait anyway (their creates wait for the member's QPS).
func OnTick() ApplyOption { return func(o *applyOptions) { o.onTick = true } }

// applier combines the commands that reach this leader while an entry is
// being committed into the next entry (group commit). Under load (many keys
// reserving names at once, the hub committing targets of many FRS) the log
// grows by one entry per commit round rather than one per command, with one
// disk sync and one replication round each. Every command keeps its own
// result, request ID and proposer term (fsm.TypeBatch); a command arriving
// while nothing is in flight is committed at once, alone, as before.
type applier struct {
	mu      sync.Mutex
	queue   []*pendingApply
	running bool
	// lingering is set while the committer holds background commands for
	// company (backgroundLinger); wake ends that at once when a command
	// others wait on arrives.
	lingering bool
	wake      chan struct{}
}

// applyLocal commits one encoded command through this node's raft (it must
// be the leader) and returns the FSM's result.
func (n *Node) applyLocal(data []byte) (*fsm.Result, error) {
	p := &pendingApply{data: data, done: make(chan struct{})}
	n.enqueue(p)
	<-p.done
	return p.res, p.err
}

// ApplyAll commits cmds, in order, and returns one result per command
// (each command's own refusal is in its result, see fsm.Result.Error). On
// the leader they are queued together, so they share one raft entry when
// group commit is allowed and they fit (fsm.MaxBatchCommands, 1 MiB).
// Every command not known to be committed then (on a follower, or when the
// shared entry failed: leadership lost for a moment, an enqueue timeout)
// goes the way Apply goes, in order and with its own request ID: retried
// until ctx ends, so one that did commit returns its first result, as a
// single Apply would. err is the first failure to commit; a command whose
// result is nil has an unknown outcome (it may still commit).
func (n *Node) ApplyAll(ctx context.Context, cmds []fsm.Command, opts ...ApplyOption) ([]*fsm.Result, error) {
	var o applyOptions
	for _, opt := range opts {
		opt(&o)
	}
	out := make([]*fsm.Result, len(cmds))
	data := make([][]byte, len(cmds))
	for i, c := range cmds {
		if err := n.needsFeature(c); err != nil {
			return out, err
		}
		d, err := fsm.Encode(c)
		if err != nil {
			return out, err
		}
		data[i] = d
	}
	if n.stopped() {
		return out, raft.ErrRaftShutdown
	}
	if err := ctx.Err(); err != nil {
		return out, fmt.Errorf("applying %d commands: %w", len(cmds), err)
	}
	if n.raft.State() == raft.Leader {
		n.commitTogether(data, out, o.onTick)
	} else {
		n.forwardTogether(ctx, data, out, o.onTick)
	}
	var first error
	for i, c := range cmds {
		if out[i] != nil {
			continue
		}
		res, err := n.Apply(ctx, c)
		if res != nil {
			err = nil // committed; a refusal is in the result
		}
		out[i] = res
		if err != nil && first == nil {
			first = err
		}
	}
	return out, first
}

// forwardTogether sends data, in order, to the leader in one request, which
// commits them together as its own ApplyAll would, and records the result
// of each command that committed in out. A follower's round of
// reservations (a member owner's, with sharding) then takes one entry, not
// one per command. On any failure out stays as it is and ApplyAll goes on
// command by command.
func (n *Node) forwardTogether(ctx context.Context, data [][]byte, out []*fsm.Result, onTick bool) {
	if len(data) < 2 || len(data) > fsm.MaxBatchCommands {
		return
	}
	addr, id := n.raft.LeaderWithID()
	if addr == "" {
		return
	}
	resp, err := n.call(ctx, string(addr), serverName(string(id)), &rpcRequest{Op: "applyall", Batch: data, OnTick: onTick})
	if err != nil || resp.Err != "" || len(resp.Results) != len(data) {
		return
	}
	copy(out, resp.Results)
	// Read your own writes; on a timeout the results stand (committed) and
	// the caller's next reads may miss them for a moment, as before.
	if err := n.fsm.WaitApplied(ctx, resp.Applied); err != nil {
		n.log.V(1).Info("A forwarded batch committed but this replica has not applied it yet", "reason", err.Error())
	}
}

// commitTogether queues data, in order, for this leader's committer and
// records the result of each command that committed in out. onTick: see
// OnTick.
func (n *Node) commitTogether(data [][]byte, out []*fsm.Result, onTick bool) {
	ps := make([]*pendingApply, len(data))
	for i, d := range data {
		ps[i] = &pendingApply{data: d, onTick: onTick, done: make(chan struct{})}
	}
	n.enqueue(ps...)
	for i, p := range ps {
		<-p.done
		if p.err == nil {
			out[i] = p.res
		}
	}
}

// enqueue queues ps, in order, for the committer, starting it if idle.
func (n *Node) enqueue(ps ...*pendingApply) {
	a := &n.applier
	a.mu.Lock()
	a.queue = append(a.queue, ps...)
	if a.lingering && !onlyBackground(ps) {
		select {
		case a.wake <- struct{}{}:
		default:
		}
	}
	if !a.running {
		a.running = true
		go n.commitQueued()
	}
	a.mu.Unlock()
}

// backgroundLinger is how long the committer holds an entry that would
// carry only background commands (renewals, usages, observation
// flushes: nobody waits on them to write to a member) or rounds sent at a
// shared tick (OnTick) for company. The replicas send those at shared
// ticks (align.go), a moment apart, so they go in one entry instead of
// one per replica.
var backgroundLinger = 20 * time.Millisecond // a var for the wake-up test

// background reports whether a command of type t is background work.
func background(t fsm.Type) bool {
	return t == fsm.TypeRenewOwnership || t == fsm.TypeSetMemberUsage || t == fsm.TypeSettle
}

// commitQueued commits what is queued, one entry at a time, until the queue
// is empty.
func (n *Node) commitQueued() {
	a := &n.applier
	lingered := false
	for {
		limit := 1
		if n.AllServersHave(FeatureBatch) {
			limit = fsm.MaxBatchCommands
		}
		a.mu.Lock()
		if !lingered && limit > 1 && onlyBackground(a.queue) {
			lingered = true
			n.linger(a)
			continue
		}
		lingered = false
		batch := takeBatch(&a.queue, limit)
		if len(batch) == 0 {
			a.running = false
			a.mu.Unlock()
			return
		}
		a.mu.Unlock()
		n.commit(batch)
	}
}

// linger holds the committer for backgroundLinger, or until a command
// that is not background work is queued, or the node stops. It is called
// with a.mu held and returns with it released.
func (n *Node) linger(a *applier) {
	if a.wake == nil {
		a.wake = make(chan struct{}, 1)
	}
	select {
	case <-a.wake: // a stale wake-up from an earlier linger
	default:
	}
	a.lingering = true
	a.mu.Unlock()
	t := time.NewTimer(backgroundLinger)
	defer t.Stop()
	select {
	case <-t.C:
	case <-a.wake:
	case <-n.stopCh:
	}
	a.mu.Lock()
	a.lingering = false
	a.mu.Unlock()
}

// onlyBackground reports whether q holds commands, all of them
// background work or sent at a shared tick.
func onlyBackground(q []*pendingApply) bool {
	for _, p := range q {
		if !p.onTick && !background(fsm.TypeOf(p.data)) {
			return false
		}
	}
	return len(q) > 0
}

// takeBatch removes the longest prefix of q that fits one entry of at most
// limit commands.
func takeBatch(q *[]*pendingApply, limit int) []*pendingApply {
	size, k := 0, 0
	for k < len(*q) && k < limit {
		d := len((*q)[k].data)
		if k > 0 && size+d > maxBatchBytes {
			break
		}
		size += d
		k++
	}
	batch := (*q)[:k:k]
	*q = (*q)[k:]
	return batch
}

// commit proposes batch as one raft entry and hands each command its result.
func (n *Node) commit(batch []*pendingApply) {
	defer func() {
		for _, p := range batch {
			close(p.done)
		}
	}()
	countProposal(batch)
	res, err := n.apply(batch)
	for i, p := range batch {
		if err != nil {
			p.err = err
			continue
		}
		p.res = res[i]
	}
}

// countProposal records an entry about to be proposed: its command count,
// its content and each command's type (internal/metrics).
func countProposal(batch []*pendingApply) {
	metrics.RaftCommandsPerEntry.Observe(float64(len(batch)))
	metrics.RaftEntriesProposed.WithLabelValues(entryContent(batch)).Inc()
	for _, p := range batch {
		metrics.RaftCommandsProposed.WithLabelValues(fsm.TypeOf(p.data).String()).Inc()
	}
}

// entryContent names what an entry of batch carries: the command's type
// alone, or "batch:" and the distinct types, sorted and joined by "+".
func entryContent(batch []*pendingApply) string {
	if len(batch) == 1 {
		return fsm.TypeOf(batch[0].data).String()
	}
	var types []string
	for _, p := range batch {
		if t := fsm.TypeOf(p.data).String(); !slices.Contains(types, t) {
			types = append(types, t)
		}
	}
	slices.Sort(types)
	return "batch:" + strings.Join(types, "+")
}

// apply commits batch as one raft entry (a batch entry when it holds more
// than one command) and returns one result per command, in order.
func (n *Node) apply(batch []*pendingApply) ([]*fsm.Result, error) {
	data := batch[0].data
	if len(batch) > 1 {
		cmds := make([][]byte, len(batch))
		for i, p := range batch {
			cmds[i] = p.data
		}
		var err error
		if data, err = fsm.EncodeBatch(cmds); err != nil {
			return nil, err
		}
	}
	f := n.raft.Apply(data, n.cfg.ApplyTimeout)
	if err := f.Error(); err != nil {
		return nil, err
	}
	if len(batch) == 1 {
		res, ok := f.Response().(*fsm.Result)
		if !ok {
			return nil, fmt.Errorf("unexpected FSM response %T", f.Response())
		}
		return []*fsm.Result{res}, nil
	}
	br, ok := f.Response().(*fsm.BatchResult)
	if !ok || len(br.Results) != len(batch) {
		return nil, fmt.Errorf("unexpected FSM response %T to a batch of %d commands", f.Response(), len(batch))
	}
	out := make([]*fsm.Result, len(batch))
	for i := range br.Results {
		out[i] = &br.Results[i]
	}
	return out, nil
}
