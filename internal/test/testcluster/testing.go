package testcluster

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// startTimeout bounds starting one cluster on a loaded machine.
const startTimeout = 3 * time.Minute

// Start starts a cluster for a test and stops it in t.Cleanup. When the test
// fails, the tail of every component's log is written to the test log.
// Set REPLICAFED_KEEP_CLUSTERS=1 to keep the directories for inspection.
// With -short the test is skipped, so `make test-short` needs no binaries.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	skipShort(t)
	opts = keepFromEnv(opts)
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	c, err := New(ctx, opts)
	if err != nil {
		t.Fatalf("starting test cluster %q: %v", opts.Name, err)
	}
	t.Cleanup(func() {
		logOnFailure(t, c)
		c.Stop()
	})
	return c
}

// Shared is one cluster for the tests of a package that need none of their
// own, each working in a namespace of its own (see Namespace). A cluster of
// its own costs a test several seconds: starting etcd and kube-apiserver, the
// new CRDs' watch caches, and the API server holding the first create of a
// CRD Established less than 2 s before. Set Options before the first test
// asks for the cluster, and call Stop from TestMain after m.Run.
type Shared struct {
	// Options start the cluster on first use.
	Options Options

	once sync.Once
	c    *Cluster
	err  error
}

// Cluster starts the shared cluster on first use and returns it. A failing
// test gets the tail of its component logs, as with Start; with -short the
// test is skipped.
func (s *Shared) Cluster(t testing.TB) *Cluster {
	t.Helper()
	skipShort(t)
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		s.c, s.err = New(ctx, keepFromEnv(s.Options))
	})
	if s.err != nil {
		t.Fatalf("starting the shared test cluster %q: %v", s.Options.Name, s.err)
	}
	t.Cleanup(func() { logOnFailure(t, s.c) })
	return s.c
}

// Stop stops the shared cluster if a test started it.
func (s *Shared) Stop() {
	if s.c != nil {
		s.c.Stop()
	}
}

var (
	notName = regexp.MustCompile(`[^a-z0-9]+`)
	nsSeq   atomic.Int64
)

// Namespace names a namespace after the test, readable in a shared cluster's
// logs; a sequence number keeps it unique under -count.
func Namespace(t testing.TB) string {
	seq := fmt.Sprintf("-%d", nsSeq.Add(1))
	ns := strings.Trim(notName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(ns) > 63-len(seq) {
		ns = strings.TrimRight(ns[:63-len(seq)], "-")
	}
	return ns + seq
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
}

func keepFromEnv(opts Options) Options {
	if os.Getenv("REPLICAFED_KEEP_CLUSTERS") == "1" {
		opts.KeepDir = true
	}
	return opts
}

// logOnFailure writes the tail of the cluster's component logs to a failed
// test's log.
func logOnFailure(t testing.TB, c *Cluster) {
	if !t.Failed() {
		return
	}
	t.Logf("test failed; cluster %s logs:\n%s", c.Name, c.Logs(3000))
	if c.opts.KeepDir {
		t.Logf("cluster %s kept in %s", c.Name, c.Dir)
	}
}
