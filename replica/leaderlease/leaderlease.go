// Package leaderlease mirrors the raft leader into a coordination.k8s.io/v1
// Lease in the hub namespace, so `kubectl get lease` shows which replica
// leads. The Lease is informational only: raft elects the leader and fences
// its writes; nothing reads the Lease to decide anything, and a stale Lease
// (renewTime older than leaseDurationSeconds) means only that no leader has
// written it lately.
//
// Only the raft leader writes it, while it may write to members (quorum
// contact, gate open): when it gains leadership and then on every tick of
// the renew interval, never twice within half an interval of one term.
package leaderlease

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// AnnotationTerm carries the raft term of the leader that wrote the Lease.
const AnnotationTerm = "replicafed.io/raft-term"

// Leader is the raft node as this package sees it (raftstore/node.Node).
type Leader interface {
	// Leading returns the leader context and term while this node leads.
	Leading() (ctx context.Context, term uint64, ok bool)
	// Allowed is true while this node leads with quorum contact and an open
	// write gate; a deposed leader that has not noticed yet is not.
	Allowed() (context.Context, bool)
	// LeaderChanges receives true when this node starts leading.
	LeaderChanges() <-chan bool
}

// Writer keeps the Lease. It is a manager Runnable on every replica; only
// the leader writes.
type Writer struct {
	// Reader reads the Lease directly from the API server (no cache: a
	// cache would watch every Lease of the cluster).
	Reader client.Reader
	// Writer creates and updates it.
	Writer client.Writer
	// Namespace and Name locate the Lease.
	Namespace, Name string
	// Identity is this replica's raft server ID, written as holderIdentity.
	Identity string
	// Leader says whether to write and with which term.
	Leader Leader
	// Interval is the renew interval; the Lease's duration is three of them.
	Interval time.Duration
	// Clock is injected for tests.
	Clock clock.WithTicker
	// Log receives write failures and, at V(2), writes; empty means the
	// logger of Start's context.
	Log logr.Logger

	// lastWrite is when this replica last wrote the Lease, and term the
	// raft term it wrote.
	lastWrite time.Time
	term      uint64
}

// NeedLeaderElection is false: leadership comes from raft.
func (w *Writer) NeedLeaderElection() bool { return false }

// Start writes the Lease when this replica gains leadership and every
// Interval while it leads, until ctx ends.
func (w *Writer) Start(ctx context.Context) error {
	log := w.Log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx).WithName("leader-lease")
	}
	changes := w.Leader.LeaderChanges()
	tick := w.Clock.NewTicker(w.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-tick.C():
		}
		wrote, err := w.Sync(ctx)
		if err != nil {
			// The next tick retries; raft, not this Lease, decides who leads.
			log.Error(err, "Writing the leader Lease", "lease", klog.KRef(w.Namespace, w.Name))
		} else if wrote {
			log.V(2).Info("Leader Lease written", "lease", klog.KRef(w.Namespace, w.Name), "term", w.term)
		}
	}
}

// Sync writes the Lease if this replica may and a write is due: a new term,
// or this replica's last renewal is at least half an Interval old. It
// reports whether it wrote.
func (w *Writer) Sync(ctx context.Context) (bool, error) {
	lctx, term, ok := w.Leader.Leading()
	if !ok {
		return false, nil
	}
	if _, ok := w.Leader.Allowed(); !ok {
		return false, nil
	}
	now := w.Clock.Now()
	// Half an interval: a tick that comes a little early (the write after
	// gaining leadership was between ticks) still renews.
	if term == w.term && !w.lastWrite.IsZero() && now.Sub(w.lastWrite) < w.Interval/2 {
		return false, nil
	}
	// The write ends with this term's leadership, and within an interval:
	// a hung hub call must not hold up the next renewal.
	ctx, cancel := context.WithTimeout(ctx, w.Interval)
	defer cancel()
	stop := context.AfterFunc(lctx, cancel)
	defer stop()

	lease := &coordinationv1.Lease{}
	err := w.Reader.Get(ctx, types.NamespacedName{Namespace: w.Namespace, Name: w.Name}, lease)
	switch {
	case apierrors.IsNotFound(err):
		lease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: w.Namespace, Name: w.Name}}
		w.fill(lease, term, now)
		if err := w.Writer.Create(ctx, lease); err != nil {
			return false, fmt.Errorf("creating Lease %s/%s: %w", w.Namespace, w.Name, err)
		}
	case err != nil:
		return false, fmt.Errorf("reading Lease %s/%s: %w", w.Namespace, w.Name, err)
	default:
		w.fill(lease, term, now)
		// Optimistic concurrency: a write that raced another holder's fails
		// and is retried at the next tick with what that holder wrote.
		if err := w.Writer.Update(ctx, lease); err != nil {
			return false, fmt.Errorf("renewing Lease %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	w.lastWrite, w.term = now, term
	return true, nil
}

// fill makes lease name this replica as holder in term, renewed at now.
func (w *Writer) fill(lease *coordinationv1.Lease, term uint64, now time.Time) {
	s := &lease.Spec
	at := metav1.NewMicroTime(now)
	if s.HolderIdentity == nil || *s.HolderIdentity != w.Identity || lease.Annotations[AnnotationTerm] != strconv.FormatUint(term, 10) {
		if s.HolderIdentity != nil && *s.HolderIdentity != w.Identity {
			n := int32(1)
			if s.LeaseTransitions != nil && *s.LeaseTransitions < math.MaxInt32 {
				n = *s.LeaseTransitions + 1
			}
			s.LeaseTransitions = &n
		}
		s.AcquireTime = &at
	}
	if s.LeaseTransitions == nil {
		s.LeaseTransitions = new(int32)
	}
	id := w.Identity
	s.HolderIdentity = &id
	s.RenewTime = &at
	d := int32(max(1, (3*w.Interval).Round(time.Second)/time.Second))
	s.LeaseDurationSeconds = &d
	if lease.Annotations == nil {
		lease.Annotations = map[string]string{}
	}
	lease.Annotations[AnnotationTerm] = strconv.FormatUint(term, 10)
}
