// Package faultproxy is a fault-injecting HTTPS reverse proxy for tests: it
// stands between replicafed and a member's kube-apiserver and, while faults
// are set, delays every request and fails a fraction of them with 500, 429
// (with Retry-After) or a timeout.
//
// A timeout holds the request and then drops the stream without a response.
// A mutating request (POST, PUT, PATCH, DELETE) that draws a timeout is
// forwarded first and only its response is lost, so the caller cannot tell
// whether it took effect: the ambiguous outcome a real network produces, and
// the one that exposes non-idempotent retries.
//
// The proxy is bounded so that a test cannot turn it into something else: it
// listens on loopback only, forwards to a loopback upstream only, holds a
// timed-out request for at most MaxTimeoutHold, adds at most MaxLatency, and
// holds at most MaxHeld requests at once (further timeout draws fail with
// 500 instead).
package faultproxy
