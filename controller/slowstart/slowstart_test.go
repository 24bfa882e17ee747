package slowstart

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

func TestRun(t *testing.T) {
	cases := []struct {
		name      string
		count     int
		okLimit   int64 // calls beyond this many successes fail; -1 = never fail
		wantCalls int64
		wantOK    int
		wantErr   bool
	}{
		{name: "all fail", count: 10, okLimit: 0, wantCalls: 1, wantOK: 0, wantErr: true},
		{name: "all succeed", count: 10, okLimit: -1, wantCalls: 10, wantOK: 10},
		{name: "limit 5", count: 10, okLimit: 5, wantCalls: 7, wantOK: 5, wantErr: true},
		{name: "quota 10 of 100", count: 100, okLimit: 10, wantCalls: 15, wantOK: 10, wantErr: true},
		{name: "burst 500", count: 500, okLimit: -1, wantCalls: 500, wantOK: 500},
		{name: "zero", count: 0, okLimit: -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var calls, ok atomic.Int64
			var mu sync.Mutex
			seen := map[int]bool{}
			n, err := Run(c.count, 1, func(i int) error {
				mu.Lock()
				if seen[i] {
					t.Errorf("index %d called twice", i)
				}
				seen[i] = true
				mu.Unlock()
				calls.Add(1)
				if c.okLimit >= 0 && ok.Add(1) > c.okLimit {
					return errors.New("quota")
				}
				return nil
			})
			if calls.Load() != c.wantCalls || n != c.wantOK || (err != nil) != c.wantErr {
				t.Fatalf("calls=%d ok=%d err=%v; want %d %d %v", calls.Load(), n, err, c.wantCalls, c.wantOK, c.wantErr)
			}
			// Indices used are exactly 0..calls-1.
			for i := 0; i < int(c.wantCalls); i++ {
				if !seen[i] {
					t.Fatalf("index %d not used", i)
				}
			}
		})
	}
}

func TestBatchSizes(t *testing.T) {
	var mu sync.Mutex
	var order []int
	// Sizes are observable through the index ranges: each batch starts where
	// the previous one ended, so the first index of each batch reveals them.
	_, _ = Run(500, 1, func(i int) error { mu.Lock(); order = append(order, i); mu.Unlock(); return nil })
	want := []int{1, 2, 4, 8, 16, 32, 64, 128, 245}
	start := 0
	for _, size := range want {
		got := map[int]bool{}
		for _, i := range order[start : start+size] {
			got[i] = true
		}
		for i := start; i < start+size; i++ {
			if !got[i] {
				t.Fatalf("batch starting at %d of size %d lacks index %d", start, size, i)
			}
		}
		start += size
	}
	if start != len(order) {
		t.Fatalf("covered %d of %d calls", start, len(order))
	}
}
