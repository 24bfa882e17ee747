package health

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Record is the replicated record of member health (the raft FSM in
// production): the leader writes transitions, every replica reads them.
type Record interface {
	// MemberHealth returns the recorded health of a member.
	MemberHealth(cluster string) (healthy bool, since time.Time, ok bool)
	// SetMemberHealth records a member's health; it fails off the leader.
	SetMemberHealth(ctx context.Context, cluster string, healthy bool, since time.Time) error
}

// Local is this replica's own probe results (Monitor).
type Local interface {
	State(cluster string) (State, bool)
	Clusters() []string
}

// Replicated combines this replica's probes with the replicated record, so
// that a new leader plans from what the fleet recorded instead of from
// "unknown", and an unreachable member's grace period runs from when the
// outage began, even if an earlier leader saw its start.
type Replicated struct {
	Local  Local
	Record Record
}

// State returns the member's health for planning:
//   - this replica has a verdict of its own: that verdict. An Unreachable
//     verdict takes the recorded start of the outage when the record says
//     the member was already unreachable and this replica has had no
//     successful probe since then; a record that predates a success seen
//     here belongs to an earlier outage and must not shorten this one's
//     grace period.
//   - no verdict of its own yet (just started, member just engaged): the
//     record.
func (h *Replicated) State(cluster string) (State, bool) {
	st, ok := h.Local.State(cluster)
	healthy, since, recorded := false, time.Time{}, false
	if h.Record != nil {
		healthy, since, recorded = h.Record.MemberHealth(cluster)
	}
	if !ok || st.Health == "" || st.Health == v1alpha1.ClusterHealthUnknown {
		if !recorded {
			return st, ok
		}
		out := State{Health: v1alpha1.ClusterHealthy, Since: since}
		if !healthy {
			out.Health = v1alpha1.ClusterUnreachable
		}
		return out, true
	}
	if st.Health == v1alpha1.ClusterUnreachable && recorded && !healthy &&
		since.Before(st.Since) && !st.LastSuccess.After(since) {
		st.Since = since
	}
	return st, true
}

// Desired returns the record a leader should hold for a member whose local
// state is st, given the current record; write is false when the record
// already says it.
func Desired(st State, healthy bool, since time.Time, recorded bool) (wantHealthy bool, wantSince time.Time, write bool) {
	switch st.Health {
	case v1alpha1.ClusterHealthy:
		if recorded && healthy {
			return true, since, false
		}
		return true, st.Since, true
	case v1alpha1.ClusterUnreachable:
		if recorded && !healthy && !since.After(st.Since) && !st.LastSuccess.After(since) {
			// The same outage, recorded with its earlier start.
			return false, since, false
		}
		return false, st.Since, true
	default:
		return false, time.Time{}, false
	}
}

// Recorder keeps the replicated record in line with this replica's probes
// while it leads. It is level-triggered: every pass compares each member's
// local verdict with the record and writes what differs, so a transition
// whose write failed (leadership moving, a timeout) is written again on the
// next pass until the record holds it, and a new leader records what it sees
// on its first pass.
type Recorder struct {
	Local  Local
	Record Record
	// Leading reports whether this replica may write the record now.
	Leading func() bool
	// Interval between passes when nothing kicks the recorder.
	Interval time.Duration
	// OnRecorded is called after a record changed (to re-plan); optional.
	OnRecorded func(cluster string)
	// Clock is injected for tests; RealClock when nil.
	Clock clock.WithTicker

	kick chan struct{}
}

// NewRecorder returns a Recorder; Kick it on every local health change.
func NewRecorder(local Local, record Record, leading func() bool, interval time.Duration) *Recorder {
	return &Recorder{Local: local, Record: record, Leading: leading, Interval: interval, kick: make(chan struct{}, 1)}
}

// Kick asks for a pass soon; it never blocks, and kicks coalesce.
func (r *Recorder) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// NeedLeaderElection is false: the recorder checks Leading itself.
func (r *Recorder) NeedLeaderElection() bool { return false }

// Start runs passes until ctx ends.
func (r *Recorder) Start(ctx context.Context) error {
	clk := r.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	interval := r.Interval
	if interval <= 0 {
		interval = time.Second
	}
	t := clk.NewTicker(interval)
	defer t.Stop()
	for {
		r.Pass(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C():
		case <-r.kick:
		}
	}
}

// Pass writes every member's local verdict that the record lacks, on the
// leader only, and returns how many writes failed (they are retried on the
// next pass).
func (r *Recorder) Pass(ctx context.Context) (failed int) {
	if r.Leading != nil && !r.Leading() {
		return 0
	}
	log := logr.FromContextOrDiscard(ctx)
	for _, cluster := range r.Local.Clusters() {
		st, ok := r.Local.State(cluster)
		if !ok {
			continue
		}
		healthy, since, recorded := r.Record.MemberHealth(cluster)
		wantHealthy, wantSince, write := Desired(st, healthy, since, recorded)
		if !write {
			continue
		}
		if err := r.Record.SetMemberHealth(ctx, cluster, wantHealthy, wantSince); err != nil {
			failed++
			log.V(1).Info("Recording member health failed; will retry", "cluster", cluster, "reason", err.Error())
			continue
		}
		log.V(1).Info("Member health recorded", "cluster", cluster, "healthy", wantHealthy, "since", wantSince)
		if r.OnRecorded != nil {
			r.OnRecorded(cluster)
		}
	}
	return failed
}
