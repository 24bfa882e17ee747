// Package clientlimit sets a client configuration's rate limit as one token
// bucket that every client built from it shares, and lets requests marked
// with First take its tokens before the others.
//
// client-go builds a bucket per REST client when the configuration carries
// none, and controller-runtime builds a REST client per resource type (its
// event recorder another), so a limit set through QPS and Burst alone
// applies to each resource type apart: pods, MemberReplicaSets and events
// could each use the whole rate, and a member would see several times
// memberQPS. kube-controller-manager's controllers share one bucket per
// clientset; replicafed now does the same per member and for the hub.
package clientlimit

import (
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/utils/clock"
)

// Shared limits every client built from rc, or from a copy of it, to qps
// requests a second with bursts of burst, together. The bucket is made
// here, so each call makes a new one: call it once per cluster. Requests
// whose context is marked with First go ahead of the others. qps <= 0
// leaves client-go's defaults (and one bucket per REST client).
func Shared(rc *rest.Config, qps float32, burst int) {
	rc.QPS, rc.Burst, rc.RateLimiter = qps, burst, nil
	if qps > 0 {
		rc.RateLimiter = newPrioritized(flowcontrol.NewTokenBucketRateLimiter(qps, max(burst, 1)), clock.RealClock{})
	}
}

// Apply is Shared when on, and otherwise removes rc's client-side rate
// limit: the replica's member clients and the side-by-side bench's engine
// (controller.memberRateLimit) both set their limit through it.
func Apply(rc *rest.Config, on bool, qps float32, burst int) {
	if !on {
		rc.QPS, rc.Burst, rc.RateLimiter = -1, 0, nil
		return
	}
	Shared(rc, qps, burst)
}
