package node

import (
	"testing"
	"time"
)

func TestAlignedDue(t *testing.T) {
	const i = 3 * time.Second
	at := func(ms int64) time.Time { return time.UnixMilli(ms) }
	for _, tc := range []struct {
		name       string
		last, want time.Time
	}{
		{name: "on the basis", last: at(3000), want: at(6000)},
		{name: "just after a tick", last: at(3100), want: at(6000)},
		{name: "just before the middle", last: at(4400), want: at(6000)},
		{name: "at the middle", last: at(4500), want: at(9000)},
		{name: "late in the interval", last: at(5900), want: at(9000)},
		{name: "before the epoch", last: at(-2900), want: at(0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := alignedDue(tc.last, i)
			if !got.Equal(tc.want) {
				t.Fatalf("alignedDue(%v) = %v, want %v", tc.last.UnixMilli(), got.UnixMilli(), tc.want.UnixMilli())
			}
			if gap := got.Sub(tc.last); gap <= i/2 || gap > 3*i/2 {
				t.Fatalf("gap %v outside (interval/2, 3*interval/2]", gap)
			}
		})
	}
}

func TestUntilAligned(t *testing.T) {
	const i = 200 * time.Millisecond
	for _, tc := range []struct {
		now  int64 // ms
		want time.Duration
	}{
		{now: 1000, want: i},
		{now: 1001, want: 199 * time.Millisecond},
		{now: 1199, want: time.Millisecond},
		{now: -50, want: 50 * time.Millisecond},
	} {
		if got := UntilAligned(time.UnixMilli(tc.now), i); got != tc.want {
			t.Errorf("UntilAligned(%d ms) = %v, want %v", tc.now, got, tc.want)
		}
	}
	if got := UntilAligned(time.UnixMilli(5), 0); got != 0 {
		t.Errorf("UntilAligned with no interval = %v, want 0", got)
	}
}
