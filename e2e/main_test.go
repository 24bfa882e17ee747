// Package e2e tests replicafed end to end: a hub and three member control
// planes with kwok fake nodes, and three replicafed processes forming a raft
// cluster (see e2e/fleet). One fleet is shared by every test of the package,
// started on first use and stopped by TestMain; each test uses its own
// namespace and FederatedReplicaSet names and leaves the fleet healthy.
package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replicafed/replicafed/e2e/fleet"
)

// Member names of the shared fleet.
const (
	memberA = "member-a"
	memberB = "member-b"
	memberC = "member-c"
)

var allMembers = []string{memberA, memberB, memberC}

var (
	sharedOnce  sync.Once
	sharedFleet *fleet.Fleet
	sharedErr   error
)

// TestMain stops the shared fleet after every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if sharedFleet != nil {
		// No secret in any replica log line, after every test has run
		// (joins, rotations, refusals, failovers).
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		found, err := sharedFleet.SecretsInLogs(ctx)
		cancel()
		switch {
		case err != nil:
			fmt.Fprintf(os.Stderr, "FAIL: scanning replica logs for secrets: %v\n", err)
			code = 1
		case len(found) > 0:
			fmt.Fprintf(os.Stderr, "FAIL: secrets in replica logs:\n  %s\n", strings.Join(found, "\n  "))
			code = 1
		}
		sharedFleet.Stop()
	}
	os.Exit(code)
}

// getFleet returns the shared fleet, starting it on first use.
func getFleet(t *testing.T) *fleet.Fleet {
	t.Helper()
	if testing.Short() {
		t.Skip("e2e needs real control planes; skipped with -short")
	}
	sharedOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		start := time.Now()
		// Members are registered as kubeconfig Secrets, as an operator does,
		// so TestChaos can rotate them; replicafed reaches proxiedMember
		// through a fault proxy, which forwards untouched unless a chaos
		// round turns faults on.
		sharedFleet, sharedErr = fleet.New(ctx, fleet.Options{
			Members: allMembers, Log: t.Logf,
			SecretMembers: true, Proxied: []string{proxiedMember},
			// Members serve metrics.k8s.io and the replicas autoscale
			// (TestAutoscale), computing often so the test is short.
			Metrics: true,
			// memberA also serves custom metrics (TestAutoscalePodsMetric).
			CustomMetrics: []string{memberA},
			Config:        map[string]any{"autoscaling": map[string]any{"enabled": true, "syncPeriod": "3s", "memberTimeout": "2s"}},
		})
		if sharedErr == nil {
			t.Logf("fleet started in %s", time.Since(start).Round(time.Millisecond))
		}
	})
	if sharedErr != nil {
		t.Fatalf("starting fleet: %v", sharedErr)
	}
	return sharedFleet
}

// logf is t.Logf with a wall-clock prefix, for reading test logs next to
// replica logs.
func logf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
