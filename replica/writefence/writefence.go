// Package writefence bounds the writes a replica sends to member clusters: a
// deadline on every mutating request, and pod writes refused once the raft
// write lease (or, with sharding, the member's owner lease) has run out. The replica and the side-by-side bench both use it.
package writefence

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/controller/engine"
)

// DefaultMaxInFlight is how many mutating requests Option lets be in
// flight to one member at a time.
const DefaultMaxInFlight = 64

// Option gives every mutating request to a member (POST, PUT,
// PATCH, DELETE) a deadline of d for its answer, counted from when the
// request leaves the client, after client-side rate limiting. The
// leader's write lease permits a write only if it lasts until the
// deadline ends (raftstore/node, Node.WriteLease), so a write the leader
// permitted ends before another leader can be elected.
// Once the answer's status line is in, the write has happened and the body
// is read under the caller's context only. Reads and watches are
// untouched. d <= 0 disables the deadline.
//
// permitted, when set, is asked again right before a pod write leaves (the
// leader's write lease, or with sharding the member's owner lease: one
// Option per member then, see registry.Options.RESTOptionsFor): a
// process paused (SIGSTOP, a long GC) between its leadership check and the
// send, or while it waited in the client's rate limiter, resumes with a
// lease that has run out by its monotonic clock, and its stale creates and
// deletes are dropped here instead of landing after a newer leader acted.
//
// At most DefaultMaxInFlight mutating requests are in flight at once; see
// Bounded.
func Option(d time.Duration, permitted func() bool) func(*rest.Config) error {
	return Bounded(d, permitted, DefaultMaxInFlight)
}

// Bounded is Option with at most maxInFlight mutating requests in flight
// at once (<= 0: no bound). A request waits for a slot before permitted is
// asked and before its deadline starts, so the fence is the same: the
// lease is checked right before the request leaves and the request is
// bounded by d from then on. Without the bound, a slow-start batch of
// hundreds of creates sent at once queues in the API server (and for
// HTTP/2 streams), the deadline ends creates that were only waiting there,
// and each such timeout leaves an unknown outcome: the sync's batch ends,
// the name is held and the create is sent again later. A request still
// waiting for a slot when its context ends was never sent (ErrNotSent).
func Bounded(d time.Duration, permitted func() bool, maxInFlight int) func(*rest.Config) error {
	var check func(context.Context) bool
	if permitted != nil {
		check = func(context.Context) bool { return permitted() }
	}
	return BoundedContext(d, check, maxInFlight)
}

// BoundedContext is Bounded whose check sees the request's context: with
// sharding, a sync's pod write carries the sync's member ownership fence
// there (controller/expectations.FenceFrom), and the check compares it
// with the lease the replica holds now.
func BoundedContext(d time.Duration, permitted func(ctx context.Context) bool, maxInFlight int) func(*rest.Config) error {
	return Renewed(d, permitted, Renewal{}, maxInFlight)
}

// Renewal lets a mutating request still unanswered at its deadline run on
// while the lease that let it leave still covers it, instead of being cut
// and sent again: under load a member API server answers some creates
// later than the deadline, and each cut one left an unknown outcome (a
// held name, a retry, a 409, an event and a stopped slow-start batch).
type Renewal struct {
	// Covers reports, without waiting for a renewal, whether the request
	// whose context it is given may stay in flight for another Step from
	// now: the same lease check as permitted, for a write already sent.
	// nil: no request outlives its first deadline.
	Covers func(ctx context.Context) bool
	// Step is how much longer each renewal lets a request run (<= 0: the
	// deadline). Shorter than the deadline, it asks less of the lease: a
	// loaded leader whose contact rounds run late often holds a lease that
	// covers a few hundred milliseconds but not a whole new deadline.
	Step time.Duration
	// Max bounds a request's whole time in flight, renewals included, so a
	// member that never answers frees its write slots. A Max not above the
	// deadline turns renewal off.
	Max time.Duration
}

// RenewalStep is how much longer each renewal lets a member write in
// flight run: a quarter of its deadline (162 ms at the default), which a
// loaded leader's lease still covers between contact rounds (every quarter
// raft.leaderLeaseTimeout) when a whole new deadline may not be; a renewal
// need ask the lease only for the time it grants.
func RenewalStep(deadline time.Duration) time.Duration { return deadline / 4 }

// Renewed is BoundedContext whose requests' deadlines are renewed by r: at
// its deadline a request still unanswered gets another r.Step if r.Covers
// holds then and the request stays within r.Max, and so on at the end of
// each step; otherwise it is cut there, as without renewal. At every
// instant the request is in flight the lease was seen to cover it, which
// is what the first check promised (a write the leader permitted ends
// before another leader can be elected), only checked again instead of
// ended.
func Renewed(d time.Duration, permitted func(ctx context.Context) bool, r Renewal, maxInFlight int) func(*rest.Config) error {
	return func(rc *rest.Config) error {
		if d <= 0 && permitted == nil && maxInFlight <= 0 {
			return nil
		}
		if r.Max <= d {
			r = Renewal{}
		}
		if r.Step <= 0 {
			r.Step = d
		}
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			t := &deadlineRT{next: rt, d: d, permitted: permitted, renewal: r}
			if maxInFlight > 0 {
				t.slots = make(chan struct{}, maxInFlight)
			}
			return t
		})
		return nil
	}
}

// ErrNotPermitted is returned for a pod write this replica may no longer
// send; the request never left. permitted may be the raft leader's write
// lease or, with sharding, the member's owner lease, so the message names
// neither alone.
var ErrNotPermitted = fmt.Errorf("this replica may not write to this member now (write lease or member ownership): %w", engine.ErrNotSent)

type deadlineRT struct {
	next      http.RoundTripper
	d         time.Duration
	permitted func(ctx context.Context) bool
	renewal   Renewal
	// slots holds one token per mutating request in flight; nil: no bound.
	slots chan struct{}
}

func (t *deadlineRT) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return t.next.RoundTrip(req)
	}
	release, err := t.acquire(req)
	if err != nil {
		return nil, err
	}
	if t.permitted != nil && isPodPath(req.URL.Path) && !t.permitted(req.Context()) {
		release()
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrNotPermitted)
	}
	if t.d <= 0 {
		resp, err := t.next.RoundTrip(req)
		if err != nil {
			release()
			return nil, err
		}
		resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: release}
		return resp, nil
	}
	// The deadline runs until the answer's status line: once it is in, the
	// member has made the write (kube-apiserver answers after storage), so
	// the body is read under the caller's context alone. Cutting the body
	// off at the deadline fenced nothing and turned a known outcome into an
	// unknown one (under load, most of the deadline errors seen).
	ctx, cancel := context.WithCancel(req.Context())
	dl := t.watch(req.Context(), cancel)
	done := func() { dl.stop(); cancel(); release() }
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		done()
		if renewals, ok := dl.expired(); ok {
			err = fmt.Errorf("%s %s: no answer within the member write deadline of %v (renewed %d times): %w (%w)", req.Method, req.URL.Path, t.d, renewals, context.DeadlineExceeded, err)
		}
		return nil, err
	}
	dl.stop()
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: done}
	return resp, nil
}

// deadline cuts one request at its deadline unless the renewal covers
// another step, and at the end of each step likewise.
type deadline struct {
	t      *deadlineRT
	ctx    context.Context // the request's, for the renewal check
	cancel context.CancelFunc
	end    time.Time // sent plus the renewal's Max

	mu       sync.Mutex
	timer    *time.Timer
	stopped  bool
	cut      bool
	renewals int
}

// watch starts the deadline of a request sent now.
func (t *deadlineRT) watch(ctx context.Context, cancel context.CancelFunc) *deadline {
	dl := &deadline{t: t, ctx: ctx, cancel: cancel, end: time.Now().Add(t.renewal.Max)}
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.timer = time.AfterFunc(t.d, dl.fire)
	return dl
}

// fire runs at each deadline of a request still in flight.
func (dl *deadline) fire() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.stopped {
		return
	}
	r := dl.t.renewal
	if r.Covers != nil && !time.Now().Add(r.Step).After(dl.end) && r.Covers(dl.ctx) {
		dl.renewals++
		dl.timer.Reset(r.Step)
		return
	}
	dl.cut = true
	dl.cancel()
}

// stop ends the watch once the answer is in (or the request failed).
func (dl *deadline) stop() {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	dl.stopped = true
	dl.timer.Stop()
}

// expired reports whether the request was cut at a deadline, and after how
// many renewals.
func (dl *deadline) expired() (renewals int, cut bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return dl.renewals, dl.cut
}

// acquire waits for a slot for req and returns its release (idempotent).
// A request whose context ends first was never sent.
func (t *deadlineRT) acquire(req *http.Request) (release func(), err error) {
	if t.slots == nil {
		return func() {}, nil
	}
	select {
	case t.slots <- struct{}{}:
		return sync.OnceFunc(func() { <-t.slots }), nil
	case <-req.Context().Done():
		return nil, fmt.Errorf("%s %s: waiting for one of %d member write slots: %w (%w)",
			req.Method, req.URL.Path, cap(t.slots), engine.ErrNotSent, context.Cause(req.Context()))
	}
}

// isPodPath reports whether path names the pods of a namespace or one pod
// (not a subresource): the writes the member engine makes under its lease.
func isPodPath(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// api/v1/namespaces/NS/pods[/NAME]
	if len(parts) < 5 || parts[0] != "api" || parts[2] != "namespaces" || parts[4] != "pods" {
		return false
	}
	return len(parts) <= 6
}

// WrappedRoundTripper lets client-go find the transport underneath.
func (t *deadlineRT) WrappedRoundTripper() http.RoundTripper { return t.next }

type cancelBody struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
