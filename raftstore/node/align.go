package node

import "time"

// Periodic work of the replicas is aligned to a shared basis (issue 27):
// each replica's owner lease renewals, and its observation flushes, fall
// due at multiples of their interval since the Unix epoch, so the
// replicas' commands reach the leader together and it commits them in
// one entry (group commit, and backgroundLinger for those that arrive a
// moment apart). Only the schedule reads the wall clock; every wait is
// measured on the monotonic clock, and a lease still runs from each
// renewal's own send. A replica whose wall clock is off loses the
// alignment, nothing else.

// alignedDue returns when the periodic action that last went at last is
// due next: the multiple of interval nearest last+interval, which lies in
// (last + interval/2, last + 3*interval/2]. The result keeps last's
// monotonic reading, so the wait for it is monotonic too.
func alignedDue(last time.Time, interval time.Duration) time.Time {
	base := last.Add(interval)
	off := phase(base, interval)
	if off < interval/2 {
		return base.Add(-off)
	}
	return base.Add(interval - off)
}

// phase is how far t is past the latest multiple of interval since the
// Unix epoch.
func phase(t time.Time, interval time.Duration) time.Duration {
	off := time.Duration(t.UnixNano() % int64(interval))
	if off < 0 {
		off += interval
	}
	return off
}

// UntilAligned returns how long after now the next multiple of interval
// since the Unix epoch comes (interval itself when now is one): a
// replica's periodic work started then falls due with the other
// replicas'.
func UntilAligned(now time.Time, interval time.Duration) time.Duration {
	if interval <= 0 {
		return 0
	}
	return interval - phase(now, interval)
}
