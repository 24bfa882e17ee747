package server

import (
	"context"
	"io"
	"net/http"
	"time"

	"k8s.io/client-go/rest"
)

// memberWriteDeadline gives every mutating request to a member (POST, PUT,
// PATCH, DELETE) a deadline of d, counted from when the request leaves the
// client, after client-side rate limiting. config refuses d >= the raft
// leader lease, so a write the leader permitted ends before another leader
// can be elected after this one loses its quorum. Reads and watches are
// untouched. d <= 0 disables the deadline.
func memberWriteDeadline(d time.Duration) func(*rest.Config) error {
	return func(rc *rest.Config) error {
		if d <= 0 {
			return nil
		}
		rc.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &deadlineRT{next: rt, d: d} })
		return nil
	}
}

type deadlineRT struct {
	next http.RoundTripper
	d    time.Duration
}

func (t *deadlineRT) RoundTrip(req *http.Request) (*http.Response, error) {
	switch req.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
	default:
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
