package node

import (
	"context"
	"errors"
	"testing"
	"time"
)

// pastDeadline is a context whose deadline has passed while its Err still
// says nil, as a context does between its deadline and its timer firing
// (a window that widens on a loaded machine).
type pastDeadline struct{ context.Context }

func (pastDeadline) Deadline() (time.Time, bool) { return time.Unix(1, 0), true }

// TestCallPastDeadlineIsAnError: a call whose deadline has passed fails
// with DeadlineExceeded even before ctx reports it; Apply used to read the
// nil response of such a call and panic.
func TestCallPastDeadlineIsAnError(t *testing.T) {
	n := &Node{}
	resp, err := n.call(pastDeadline{context.Background()}, "127.0.0.1:1", "r0", &rpcRequest{Op: "apply"})
	if resp != nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("call past its deadline: %v, %v; want no response and DeadlineExceeded", resp, err)
	}
}
