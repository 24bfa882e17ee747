package hub

import (
	"testing"
	"time"
)

func TestRequeueKeepsEarliest(t *testing.T) {
	base := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	// An ask is a wait (after) or, when at is set, a deadline.
	type ask struct {
		after time.Duration
		at    *time.Time
	}
	at := func(t time.Time) *time.Time { return &t }
	for _, tc := range []struct {
		name string
		asks []ask
		want time.Duration
	}{
		{name: "nothing asked", want: 0},
		{name: "one wait", asks: []ask{{after: 3 * time.Second}}, want: 3 * time.Second},
		{name: "earliest wait wins", asks: []ask{{after: 5 * time.Second}, {after: time.Second}, {after: 2 * time.Second}}, want: time.Second},
		{name: "zero wait asks nothing", asks: []ask{{after: 0}, {after: 4 * time.Second}}, want: 4 * time.Second},
		{name: "negative wait asks nothing", asks: []ask{{after: -time.Second}}, want: 0},
		{name: "deadline ahead", asks: []ask{{at: at(base.Add(7 * time.Second))}}, want: 7 * time.Second},
		{name: "deadline passed asks nothing", asks: []ask{{at: at(base.Add(-time.Second))}}, want: 0},
		{name: "deadline now asks nothing", asks: []ask{{at: at(base)}}, want: 0},
		{name: "zero deadline asks nothing", asks: []ask{{at: at(time.Time{})}, {after: 2 * time.Second}}, want: 2 * time.Second},
		{name: "deadline earlier than wait", asks: []ask{{after: 10 * time.Second}, {at: at(base.Add(3 * time.Second))}}, want: 3 * time.Second},
		{name: "wait earlier than deadline", asks: []ask{{at: at(base.Add(3 * time.Second))}, {after: time.Second}}, want: time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var q requeue
			for _, a := range tc.asks {
				if a.at != nil {
					q.at(*a.at, base)
				} else {
					q.after(a.after)
				}
			}
			if got := q.result().RequeueAfter; got != tc.want {
				t.Errorf("RequeueAfter = %v, want %v", got, tc.want)
			}
		})
	}
}
