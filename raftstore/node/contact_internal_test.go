package node

import (
	"testing"
	"time"

	"github.com/replicafed/replicafed/config"
)

// TestContactMarginMatchesConfig: config refuses write deadlines by the
// margin the leader keeps back; both must agree.
func TestContactMarginMatchesConfig(t *testing.T) {
	for _, hb := range []time.Duration{5 * time.Millisecond, 100 * time.Millisecond, 300 * time.Millisecond, time.Second, 5 * time.Second} {
		if got, want := contactMargin(hb), config.WriteLeaseMargin(hb); got != want {
			t.Errorf("heartbeat %v: leader margin %v, config margin %v", hb, got, want)
		}
	}
}

func TestContactBound(t *testing.T) {
	start := time.Unix(1000, 0)
	follows := contactAnswer{Follower: true, Term: 7, LeaderID: "r0", Age: 30 * time.Millisecond, Heartbeat: time.Second}
	with := func(f func(*contactAnswer)) contactAnswer {
		a := follows
		f(&a)
		return a
	}
	cases := []struct {
		name   string
		answer contactAnswer
		want   time.Duration // after start
		ok     bool
	}{
		{"follows this leader: heartbeat less age and margin", follows, time.Second - 30*time.Millisecond - 50*time.Millisecond, true},
		{"its own heartbeat timeout decides", with(func(a *contactAnswer) { a.Heartbeat = 2 * time.Second }), 2*time.Second - 30*time.Millisecond - 100*time.Millisecond, true},
		{"small timeouts keep a 10ms margin", with(func(a *contactAnswer) { a.Heartbeat, a.Age = 100*time.Millisecond, 0 }), 90 * time.Millisecond, true},
		{"an old contact leaves a bound in the past", with(func(a *contactAnswer) { a.Age = 3 * time.Second }), -2*time.Second - 50*time.Millisecond, true},
		{"another term", with(func(a *contactAnswer) { a.Term = 8 }), 0, false},
		{"another leader", with(func(a *contactAnswer) { a.LeaderID = "r1" }), 0, false},
		{"no leader known", with(func(a *contactAnswer) { a.LeaderID = "" }), 0, false},
		{"a candidate", with(func(a *contactAnswer) { a.Follower = false }), 0, false},
		{"no heartbeat timeout", with(func(a *contactAnswer) { a.Heartbeat = 0 }), 0, false},
		{"a negative age", with(func(a *contactAnswer) { a.Age = -time.Millisecond }), 0, false},
		{"the zero answer of a voter that failed", contactAnswer{}, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.answer.bound(start, "r0", 7)
			if ok != tc.ok {
				t.Fatalf("bound ok = %v, want %v", ok, tc.ok)
			}
			if ok && !got.Equal(start.Add(tc.want)) {
				t.Fatalf("bound = start%+v, want start%+v", got.Sub(start), tc.want)
			}
		})
	}
}

func TestQuorumBound(t *testing.T) {
	at := func(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }
	cases := []struct {
		name   string
		bounds []time.Time
		quorum int
		want   time.Time
		ok     bool
	}{
		{"single voter: its own bound", nil, 1, at(950), true},
		{"three voters, none answered", nil, 2, time.Time{}, false},
		{"three voters, one answered", []time.Time{at(900)}, 2, at(900), true},
		{"three voters, both answered: the later bound suffices", []time.Time{at(700), at(900)}, 2, at(900), true},
		{"five voters, one answered", []time.Time{at(900)}, 3, time.Time{}, false},
		{"five voters: the second best of the others", []time.Time{at(600), at(950), at(800), at(700)}, 3, at(800), true},
		{"five voters, two answered: the earlier bound", []time.Time{at(950), at(600)}, 3, at(600), true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := quorumBound(tc.bounds, tc.quorum, at(950))
			if ok != tc.ok || !got.Equal(tc.want) {
				t.Fatalf("quorumBound = %v, %v; want %v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
