package testcluster

import (
	"context"
	"os"
	"testing"
	"time"
)

// Start starts a cluster for a test and stops it in t.Cleanup. When the test
// fails, the tail of every component's log is written to the test log.
// Set REPLICAFED_KEEP_CLUSTERS=1 to keep the directories for inspection.
// With -short the test is skipped, so `make test-short` needs no binaries.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	if os.Getenv("REPLICAFED_KEEP_CLUSTERS") == "1" {
		opts.KeepDir = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("starting test cluster %q: %v", opts.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test failed; cluster %s logs:\n%s", c.Name, c.Logs(3000))
			if opts.KeepDir {
				t.Logf("cluster %s kept in %s", c.Name, c.Dir)
			}
		}
		c.Stop()
	})
	return c
}
