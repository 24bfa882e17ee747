package expectations

import (
	"fmt"
	"testing"
	"time"

	tu "github.com/replicafed/replicafed/internal/test/rafttest"
)

// gateState is what the gate's tests look at.
type gateState struct {
	inside, reservers, waiting, forced int
	flushing                           bool
}

func (g *flushGate) state() gateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return gateState{inside: g.inside, reservers: g.reservers, waiting: g.waiting, forced: g.forced, flushing: g.flushing}
}

// waitState polls until the gate is in want (bounded generously: the
// goroutines run on a loaded machine).
func waitState(t *testing.T, g *flushGate, want gateState) {
	t.Helper()
	tu.Eventually(t, 30*time.Second, func() error {
		if got := g.state(); got != want {
			return fmt.Errorf("gate is %+v, want %+v", got, want)
		}
		return nil
	})
}

// async runs f and returns a channel closed when it returns.
func async(f func()) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	return done
}

func returned(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// holdsOutUntilUnlocked checks that the caller whose enter is entered stays
// out while the flush that has the gate runs, and comes in once it ends.
func holdsOutUntilUnlocked(t *testing.T, g *flushGate, entered <-chan struct{}) {
	t.Helper()
	waitState(t, g, gateState{flushing: true})
	if returned(entered) {
		t.Fatal("a caller entered while the flush ran")
	}
	g.unlock()
	<-entered
	waitState(t, g, gateState{inside: 1})
}

func TestYieldingFlushRunsWhenFree(t *testing.T) {
	g := newFlushGate()
	if !g.lockYielding() {
		t.Fatal("a yielding flush gave up with no one inside")
	}
	waitState(t, g, gateState{flushing: true})
	g.unlock()
	waitState(t, g, gateState{})
}

func TestYieldingFlushGivesWayToARound(t *testing.T) {
	g := newFlushGate()
	g.enter()
	g.joinRound()
	if g.lockYielding() {
		t.Fatal("a yielding flush ran while a reservation lingered in a round")
	}
	// Another reservation joins the round at once.
	g.enter()
	g.joinRound()
	waitState(t, g, gateState{inside: 2, reservers: 2})
}

// The round split of TestFlushLeavesObservationsToRounds: a periodic flush
// that started to wait just before a reservation joined its round must
// not hold the next reservation out until the round ends.
func TestWaitingYieldingFlushGivesWayWhenARoundStarts(t *testing.T) {
	g := newFlushGate()
	g.enter() // a reservation, not yet in its round
	var ran bool
	flushed := async(func() { ran = g.lockYielding() })
	waitState(t, g, gateState{inside: 1, waiting: 1})
	g.joinRound()
	<-flushed
	if ran {
		t.Fatal("the flush ran while a reservation was inside")
	}
	entered := async(g.enter)
	<-entered
	waitState(t, g, gateState{inside: 2, reservers: 1})
}

// A yielding flush waiting for a short command holds later callers out, so
// a stream of short commands cannot starve it.
func TestYieldingFlushWaitsForShortCommands(t *testing.T) {
	g := newFlushGate()
	g.enter() // a short command (an ExpectDeletions)
	var ran bool
	flushed := async(func() { ran = g.lockYielding() })
	waitState(t, g, gateState{inside: 1, waiting: 1})
	entered := async(g.enter)
	g.leave()
	<-flushed
	if !ran {
		t.Fatal("the flush gave up with no round under way")
	}
	holdsOutUntilUnlocked(t, g, entered)
}

// A forced flush (a handover) waits for the round and holds every later
// caller out, reservations too, until it has run.
func TestForcedFlushWaitsForTheRound(t *testing.T) {
	g := newFlushGate()
	g.enter()
	g.joinRound()
	flushed := async(g.lockForced)
	waitState(t, g, gateState{inside: 1, reservers: 1, forced: 1})
	entered := async(g.enter)
	g.leaveRound()
	g.leave()
	<-flushed
	holdsOutUntilUnlocked(t, g, entered)
}
