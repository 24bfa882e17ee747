// Package ctxjoin joins two contexts: a request's and a permission's.
package ctxjoin

import (
	"context"
	"fmt"
)

// Join returns a child of ctx that is also cancelled when other ends, with
// a cause that wraps other's cause, so a write cut short because leadership
// ended says so. The returned cancel must be called to release other's hook.
func Join(ctx, other context.Context) (context.Context, context.CancelFunc) {
	child, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(other, func() { cancel(fmt.Errorf("permission ended: %w", context.Cause(other))) })
	return child, func() { stop(); cancel(nil) }
}
