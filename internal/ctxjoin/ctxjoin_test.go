package ctxjoin

import (
	"context"
	"errors"
	"testing"
)

func TestJoin(t *testing.T) {
	errLost := errors.New("lost")
	tests := []struct {
		name      string
		cancelReq bool
		cancelOth bool
		wantCause error
	}{
		{name: "other ends", cancelOth: true, wantCause: errLost},
		{name: "request ends", cancelReq: true, wantCause: context.Canceled},
		{name: "neither", wantCause: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, cancelReq := context.WithCancel(context.Background())
			defer cancelReq()
			oth, cancelOth := context.WithCancelCause(context.Background())
			defer cancelOth(nil)
			ctx, cancel := Join(req, oth)
			defer cancel()
			if tc.cancelReq {
				cancelReq()
			}
			if tc.cancelOth {
				cancelOth(errLost)
			}
			if tc.wantCause == nil {
				if ctx.Err() != nil {
					t.Fatalf("joined context ended: %v", context.Cause(ctx))
				}
				return
			}
			<-ctx.Done()
			if !errors.Is(context.Cause(ctx), tc.wantCause) {
				t.Fatalf("cause %v, want %v", context.Cause(ctx), tc.wantCause)
			}
		})
	}
}
