package main

import (
	"strings"
	"testing"
)

func series(n int, f func(i int) sample) []sample {
	ss := make([]sample, n)
	for i := range ss {
		ss[i] = f(i)
	}
	return ss
}

func TestJudge(t *testing.T) {
	const mib = 1 << 20
	steady := func(i int) sample {
		// Heap and the log since the snapshot saw-tooth; goroutines wobble.
		// 300 entries a minute, a snapshot every other minute.
		return sample{at: float64(i * 60), heap: float64(100+10*(i%3)) * mib, goroutines: float64(400 + i%4),
			lastIndex: float64(20000 + 300*i), snapIndex: float64(20000 + 300*i - 1200*(i%2)), boltBytes: 40 * mib}
	}
	tests := []struct {
		name    string
		ss      []sample
		ok      bool
		growing string
	}{
		{"steady", series(30, steady), true, ""},
		{"heap leaks", series(30, func(i int) sample { s := steady(i); s.heap = float64(100+5*i) * mib; return s }), false, "heap in use"},
		{"goroutines leak", series(30, func(i int) sample { s := steady(i); s.goroutines = float64(400 + 3*i); return s }), false, "goroutines"},
		{"never snapshots", series(30, func(i int) sample { s := steady(i); s.snapIndex = 0; return s }), false, "raft entries since snapshot"},
		{"snapshots only at the start", series(30, func(i int) sample {
			s := steady(i)
			s.snapIndex = min(s.snapIndex, 22000)
			return s
		}), false, "raft entries since snapshot"},
		{"log store grows", series(30, func(i int) sample { s := steady(i); s.boltBytes = float64(40+2*i) * mib; return s }), false, "raft log store on disk"},
		{"too few samples", series(5, steady), false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			lines, ok := judge("r0", tc.ss, raftRule{threshold: 1024, interval: 60})
			if ok != tc.ok {
				t.Fatalf("judge ok = %v, want %v:\n%s", ok, tc.ok, strings.Join(lines, "\n"))
			}
			for _, l := range lines {
				growing := strings.HasSuffix(l, "GROWING")
				if want := tc.growing != "" && strings.Contains(l, " "+tc.growing+" "); growing != want {
					t.Errorf("line %q: growing %v, want %v", l, growing, want)
				}
			}
		})
	}
}
