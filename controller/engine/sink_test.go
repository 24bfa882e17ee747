package engine

import (
	"context"

	"github.com/replicafed/replicafed/internal/fedref"
)

// StatusSinkFunc adapts a function to StatusSink; only tests need one.
type StatusSinkFunc func(ctx context.Context, key fedref.MemberObject, st MemberStatus)

// Report implements StatusSink.
func (f StatusSinkFunc) Report(ctx context.Context, key fedref.MemberObject, st MemberStatus) {
	f(ctx, key, st)
}
