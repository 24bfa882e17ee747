// Package kind runs replicafed as a user installs it, on kind clusters built
// offline (hack/kind): the chart `helm install`ed into a three-node hub with
// the image `make image` built, members joined with `replicafed join`, and
// workloads running the project's own image in real containers. One
// installation is shared by every test, started on first use and deleted by
// TestMain; each test uses its own namespace and leaves it healthy.
//
// It runs with REPLICAFED_E2E_PROVIDER=kind (`make e2e-kind` sets it, with
// the node image and the replicafed image); otherwise every test skips.
package kind

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/replicafed/replicafed/e2e/fleet"
)

// Member names and the labels they join with.
const (
	memberA = "member-a"
	memberB = "member-b"
)

var memberLabels = map[string]map[string]string{
	memberA: {"region": "eu"},
	memberB: {"region": "us"},
}

var (
	sharedOnce sync.Once
	shared     *fleet.KindInstallation
	sharedErr  error
)

// TestMain deletes the shared installation after every test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

// install returns the shared installation, starting it on first use, or
// skips the test when the kind suite is not asked for.
func install(t *testing.T) *fleet.KindInstallation {
	t.Helper()
	skipUnlessKind(t)
	sharedOnce.Do(func() {
		// Three clusters, two at a time, and the chart: minutes on a
		// loaded 2-core machine.
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
		defer cancel()
		start := time.Now()
		shared, sharedErr = fleet.NewKindInstallation(ctx, fleet.KindInstallOptions{
			Members: []string{memberA, memberB}, MemberLabels: memberLabels, Log: t.Logf,
			// TestDependencies: the hub side of dependency propagation, as
			// an operator who uses it installs the chart.
			HelmSet: []string{"rbac.propagateDependencies=true"},
		})
		if sharedErr == nil {
			t.Logf("kind installation up in %s", time.Since(start).Round(time.Second))
		}
	})
	if sharedErr != nil {
		t.Fatalf("starting the kind installation: %v", sharedErr)
	}
	return shared
}

// skipUnlessKind skips the test unless the kind suite is asked for.
func skipUnlessKind(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("the kind suite needs Docker and kind clusters; skipped with -short")
	}
	if p := os.Getenv("REPLICAFED_E2E_PROVIDER"); p != "kind" {
		t.Skipf("the kind suite runs with REPLICAFED_E2E_PROVIDER=kind (make e2e-kind), not %q", p)
	}
}

// logf logs with the wall time, for reading a slow run's log.
func logf(t *testing.T, format string, args ...any) {
	t.Helper()
	t.Logf("%s %s", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}
