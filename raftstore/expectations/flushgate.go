package expectations

import "sync"

// flushGate orders flushes of observations against the commands that
// touch a key's reservations: a flush runs alone, the others run beside
// each other, so a reservation never races a batch that settles the same
// key.
//
// It differs from a sync.RWMutex in one way that matters: a reservation
// may stay inside for a whole round's linger, and a periodic flush that
// queued behind it would, as a waiting writer does, hold every later
// reservation out until the round ended, splitting the round in two. A
// yielding flush (the periodic one) therefore gives up as soon as a caller
// inside joins a round (the round takes the pending observations along);
// callers arriving while it waits for the short commands wait for it, at
// most one short command and one flush. A forced flush (a handover, a stop) queues like
// a writer and holds everyone out until it has run.
type flushGate struct {
	mu      sync.Mutex
	changed sync.Cond
	// inside counts the callers inside; reservers those of them in a
	// round of reservations.
	inside, reservers int
	flushing          bool
	// waiting counts yielding flushes waiting, forced the forced ones.
	waiting, forced int
}

func newFlushGate() *flushGate {
	g := &flushGate{}
	g.changed.L = &g.mu
	return g
}

// enter lets a caller in beside others once no flush runs or waits.
func (g *flushGate) enter() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for g.flushing || g.forced > 0 || g.waiting > 0 {
		g.changed.Wait()
	}
	g.inside++
}

// leave lets a caller out.
func (g *flushGate) leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.inside--
	g.changed.Broadcast()
}

// joinRound marks a caller inside as waiting in a round of reservations
// (until leaveRound): a yielding flush waiting meanwhile gives up.
func (g *flushGate) joinRound() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reservers++
	g.changed.Broadcast()
}

// leaveRound ends joinRound.
func (g *flushGate) leaveRound() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.reservers--
	g.changed.Broadcast()
}

// lockYielding takes the gate for a periodic flush, or reports false when
// a caller inside is in a round of reservations or joins one while it
// waits.
func (g *flushGate) lockYielding() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.waiting++
	defer func() {
		g.waiting--
		g.changed.Broadcast()
	}()
	for {
		if g.reservers > 0 {
			return false
		}
		if !g.flushing && g.inside == 0 && g.forced == 0 {
			g.flushing = true
			return true
		}
		g.changed.Wait()
	}
}

// lockForced takes the gate for a flush that must run: it waits for
// everyone inside and lets no one else in meanwhile.
func (g *flushGate) lockForced() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.forced++
	for g.flushing || g.inside > 0 {
		g.changed.Wait()
	}
	g.forced--
	g.flushing = true
}

// unlock ends a flush.
func (g *flushGate) unlock() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.flushing = false
	g.changed.Broadcast()
}
