// Package health tracks whether replicafed can reach each member cluster. A
// prober asks every member's /readyz at an interval; consecutive failures and
// successes past their thresholds flip the member between Healthy and
// Unreachable, and the time of the flip is what failover grace periods are
// measured from.
package health

import (
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Thresholds say how many consecutive probe results change a member's health.
type Thresholds struct {
	// Failure is the number of consecutive failed probes that make a member
	// Unreachable.
	Failure int
	// Success is the number of consecutive good probes that make it Healthy.
	Success int
}

// State is one member's health and since when it has held.
type State struct {
	// Health is the current verdict.
	Health v1alpha1.ClusterHealth
	// Since is when Health last changed (or the first probe, for Unknown).
	Since time.Time
	// LastProbe is when the latest probe finished.
	LastProbe time.Time
	// LastError is the latest failed probe's error text.
	LastError string
	// LastSuccess is when the latest successful probe finished (zero if none).
	LastSuccess time.Time

	failures, successes int
}

// Observe folds one probe result into the state. It is pure: now is the probe's
// completion time.
func (s State) Observe(err error, now time.Time, th Thresholds) State {
	if s.Health == "" {
		s.Health = v1alpha1.ClusterHealthUnknown
		s.Since = now
	}
	s.LastProbe = now
	if err != nil {
		s.LastError = err.Error()
		s.failures++
		s.successes = 0
		s.flip(v1alpha1.ClusterUnreachable, s.failures, th.Failure, now)
		return s
	}
	s.LastError = ""
	s.LastSuccess = now
	s.successes++
	s.failures = 0
	s.flip(v1alpha1.ClusterHealthy, s.successes, th.Success, now)
	return s
}

// flip moves the state to h at now once run consecutive results reach
// threshold (at least 1), unless it already holds h.
func (s *State) flip(h v1alpha1.ClusterHealth, run, threshold int, now time.Time) {
	if s.Health != h && run >= max(threshold, 1) {
		s.Health = h
		s.Since = now
	}
}

// UnreachableFor returns how long the member has been unreachable at now, or
// zero when it is not unreachable.
func (s State) UnreachableFor(now time.Time) time.Duration {
	if s.Health != v1alpha1.ClusterUnreachable {
		return 0
	}
	return now.Sub(s.Since)
}
