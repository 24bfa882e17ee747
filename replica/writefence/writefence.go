// Package writefence bounds the writes a replica sends to member clusters: a
// deadline on every mutating request, and pod writes refused once the raft
// write lease has run out. The replica and the side-by-side bench both use it.
package writefence

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/controller/engine"
)

// Option gives every mutating request to a member (POST, PUT,
// PATCH, DELETE) a deadline of d, counted from when the request leaves the
// client, after client-side rate limiting. config refuses d >= the raft
// leader lease, so a write the leader permitted ends before another leader
// can be elected after this one loses its quorum. Reads and watches are
// untouched. d <= 0 disables the deadline.
//
// permitted, when set, is asked again right before a pod write leaves: a
// process paused (SIGSTOP, a long GC) between its leadership check and the
// send, or while it waited in the client's rate limiter, resumes with a
// lease that has run out by its monotonic clock, and its stale creates and
// deletes are dropped here instead of landing after a newer leader acted.
func Option(d time.Duration, permitted func() bool) func(*rest.Config) error {
	return func(rc *rest.Config) error {
		if d <= 0 && permitted == nil {
			return nil
		}
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper {
			return &deadlineRT{next: rt, d: d, permitted: permitted}
		})
		return nil
	}
}

// ErrNotPermitted is returned for a pod write this replica may no longer
// send; the request never left.
var ErrNotPermitted = fmt.Errorf("this replica does not hold the leader's write lease: %w", engine.ErrNotSent)

type deadlineRT struct {
	next      http.RoundTripper
	d         time.Duration
	permitted func() bool
}

func (t *deadlineRT) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
		return t.next.RoundTrip(req)
	}
	if t.permitted != nil && isPodPath(req.URL.Path) && !t.permitted() {
		return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, ErrNotPermitted)
	}
	if t.d <= 0 {
		return t.next.RoundTrip(req)
	}
	ctx, cancel := context.WithTimeout(req.Context(), t.d)
	resp, err := t.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	// The deadline covers reading the body too; release it when done.
	resp.Body = &cancelBody{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
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
