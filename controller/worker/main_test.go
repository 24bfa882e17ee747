package worker_test

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

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/internal/testcluster"
)

// shared is the member control plane the integration tests without special
// nodes share, each in a namespace of its own. A control plane of its own
// cost a test about 6 s: 3 s to start, 1 s until the new CRD's watch cache
// serves lists, and 2 s the API server holds the first create of a CRD that
// was Established less than 2 s before.
var shared struct {
	once sync.Once
	c    *testcluster.Cluster
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.Stop()
	}
	os.Exit(code)
}

// sharedCluster starts the package's shared member cluster on first use. A
// failing test gets the tail of its component logs, as with
// testcluster.Start.
func sharedCluster(t testing.TB) *testcluster.Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane; skipped with -short")
	}
	shared.once.Do(func() {
		member, err := crds.Member()
		if err != nil {
			shared.err = err
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.c, shared.err = testcluster.New(ctx, testcluster.Options{Name: member0(), CRDs: member})
	})
	if shared.err != nil {
		t.Fatalf("starting the shared test cluster: %v", shared.err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test failed; shared cluster %s logs:\n%s", shared.c.Name, shared.c.Logs(3000))
		}
	})
	return shared.c
}

var (
	notName = regexp.MustCompile(`[^a-z0-9]+`)
	nsSeq   atomic.Int64
)

// testNamespace names a namespace after the test, readable in the shared
// cluster's logs; the sequence number keeps it unique under -count.
func testNamespace(t testing.TB) string {
	seq := fmt.Sprintf("-%d", nsSeq.Add(1))
	ns := strings.Trim(notName.ReplaceAllString(strings.ToLower(t.Name()), "-"), "-")
	if len(ns) > 63-len(seq) {
		ns = strings.TrimRight(ns[:63-len(seq)], "-")
	}
	return ns + seq
}
