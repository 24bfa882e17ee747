package hub

import (
	"fmt"
	"testing"
	"time"
)

func TestStatusPacer(t *testing.T) {
	t0 := now
	sec := time.Second
	t.Run("first write and writes after the interval go at once", func(t *testing.T) {
		var p statusPacer
		if w := p.wait("a", t0, false, sec, 0, 20); w != 0 {
			t.Fatalf("first write waits %s", w)
		}
		p.written("a", t0)
		if w := p.wait("a", t0.Add(sec), false, sec, 0, 20); w != 0 {
			t.Fatalf("write after the interval waits %s", w)
		}
	})
	t.Run("within the interval a change waits for its end", func(t *testing.T) {
		var p statusPacer
		p.written("a", t0)
		if w := p.wait("a", t0.Add(300*time.Millisecond), false, sec, 0, 20); w != 700*time.Millisecond {
			t.Fatalf("wait = %s, want 700ms", w)
		}
	})
	t.Run("many objects waiting share the budget", func(t *testing.T) {
		var p statusPacer
		// 100 objects wrote at t0 and changed again right after.
		for i := range 100 {
			p.written(fmt.Sprint(i), t0)
		}
		var last time.Duration
		for i := range 100 {
			last = p.wait(fmt.Sprint(i), t0.Add(10*time.Millisecond), false, sec, 0, 20)
		}
		// 100 waiting at 20 writes/s: each writes every 5 s.
		if want := 5*time.Second - 10*time.Millisecond; last != want {
			t.Fatalf("wait with 100 objects waiting = %s, want %s", last, want)
		}
		// A significant change of one of them only keeps the minimum interval.
		if w := p.wait("7", t0.Add(2*sec), true, sec, 0, 20); w != 0 {
			t.Fatalf("significant change waits %s", w)
		}
		// Once written or settled, objects stop counting against the budget.
		for i := range 99 {
			p.settled(fmt.Sprint(i))
		}
		if w := p.wait("99", t0.Add(2*sec), false, sec, 0, 20); w != 0 {
			t.Fatalf("alone again, a change 2s after the last write waits %s", w)
		}
	})
	t.Run("no budget means the minimum interval only", func(t *testing.T) {
		var p statusPacer
		for i := range 100 {
			p.written(fmt.Sprint(i), t0)
			p.wait(fmt.Sprint(i), t0, false, sec, 0, 0)
		}
		if w := p.wait("5", t0.Add(sec), false, sec, 0, 0); w != 0 {
			t.Fatalf("wait = %s, want 0", w)
		}
	})
	t.Run("forget", func(t *testing.T) {
		var p statusPacer
		p.written("a", t0)
		p.forget("a")
		if w := p.wait("a", t0, false, sec, 0, 20); w != 0 {
			t.Fatalf("a forgotten object waits %s", w)
		}
	})
	t.Run("count-only changes wait for the hold from when they first waited", func(t *testing.T) {
		var p statusPacer
		p.written("a", t0)
		hold := 5 * sec
		// First count-only change 2s after the write: held until 5s after it.
		if w := p.wait("a", t0.Add(2*sec), false, sec, hold, 20); w != hold {
			t.Fatalf("first count-only change waits %s, want %s", w, hold)
		}
		if w := p.wait("a", t0.Add(4*sec), false, sec, hold, 20); w != 3*sec {
			t.Fatalf("a later look waits %s, want 3s", w)
		}
		// A significant change is not held.
		if w := p.wait("a", t0.Add(4*sec), true, sec, hold, 20); w != 0 {
			t.Fatalf("significant change waits %s", w)
		}
		if w := p.wait("a", t0.Add(7*sec), false, sec, hold, 20); w != 0 {
			t.Fatalf("after the hold the change waits %s", w)
		}
		// A write starts a new hold for the next change.
		p.written("a", t0.Add(7*sec))
		if w := p.wait("a", t0.Add(8*sec), false, sec, hold, 20); w != hold {
			t.Fatalf("after a write, the next change waits %s, want %s", w, hold)
		}
		// A status that matched what the hub holds ends the pending change.
		p.settled("a")
		if w := p.wait("a", t0.Add(12*sec), false, sec, hold, 20); w != hold {
			t.Fatalf("after settling, a new change waits %s, want %s", w, hold)
		}
	})
	t.Run("no hold for an object that never wrote keeps the first write at once", func(t *testing.T) {
		var p statusPacer
		if w := p.wait("b", t0, true, sec, 5*sec, 20); w != 0 {
			t.Fatalf("first (significant) write waits %s", w)
		}
	})
}
