package hub

import (
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// requeue keeps the earliest of the times a pass wants to come back: each
// phase adds its own reason (a status write paced for later, a grace period
// running out, facts still awaited) without knowing the others'.
type requeue struct {
	// in is the earliest wait added so far; zero means none.
	in time.Duration
}

// after asks to come back in d; zero or negative asks nothing.
func (q *requeue) after(d time.Duration) {
	if d > 0 && (q.in == 0 || d < q.in) {
		q.in = d
	}
}

// at asks to come back at t as seen at now; a zero t, or one not after
// now, asks nothing (what it waited for has already happened and this pass
// has seen it).
func (q *requeue) at(t, now time.Time) {
	if !t.IsZero() {
		q.after(t.Sub(now))
	}
}

// result is the ctrl.Result that comes back at the earliest time asked.
func (q requeue) result() ctrl.Result {
	return ctrl.Result{RequeueAfter: q.in}
}
