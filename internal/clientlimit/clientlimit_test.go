package clientlimit

import (
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

func TestShared(t *testing.T) {
	cases := []struct {
		name        string
		qps         float32
		burst       int
		wantLimiter bool
	}{
		{"limit", 20, 30, true},
		{"burst below one becomes one", 5, 0, true},
		{"no qps leaves the defaults", 0, 10, false},
		{"negative qps leaves the defaults", -1, 0, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rc := &rest.Config{RateLimiter: flowcontrol.NewFakeAlwaysRateLimiter()}
			Shared(rc, c.qps, c.burst)
			if rc.QPS != c.qps || rc.Burst != c.burst {
				t.Errorf("QPS, Burst = %v, %v; want %v, %v", rc.QPS, rc.Burst, c.qps, c.burst)
			}
			if got := rc.RateLimiter != nil; got != c.wantLimiter {
				t.Fatalf("RateLimiter set = %v, want %v", got, c.wantLimiter)
			}
			if c.wantLimiter && rc.RateLimiter.QPS() != c.qps {
				t.Errorf("RateLimiter.QPS() = %v, want %v", rc.RateLimiter.QPS(), c.qps)
			}
		})
	}
}

// TestSharedNewBucketEachCall: two clusters configured apart do not share
// a bucket; copies of one configuration do.
func TestSharedNewBucketEachCall(t *testing.T) {
	a, b := &rest.Config{}, &rest.Config{}
	Shared(a, 20, 30)
	Shared(b, 20, 30)
	if a.RateLimiter == b.RateLimiter {
		t.Error("two configurations share one bucket")
	}
	if rest.CopyConfig(a).RateLimiter != a.RateLimiter {
		t.Error("a copy of the configuration has a bucket of its own")
	}
}

func TestApply(t *testing.T) {
	rc := &rest.Config{}
	Apply(rc, true, 20, 30)
	if rc.RateLimiter == nil || rc.RateLimiter.QPS() != 20 || rc.Burst != 30 {
		t.Fatalf("Apply on: RateLimiter %v, Burst %v; want a bucket of 20 qps, burst 30", rc.RateLimiter, rc.Burst)
	}
	Apply(rc, false, 20, 30)
	if rc.RateLimiter != nil || rc.QPS >= 0 {
		t.Errorf("Apply off: RateLimiter %v, QPS %v; want none and a negative QPS", rc.RateLimiter, rc.QPS)
	}
}
