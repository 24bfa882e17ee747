package worker_test

import (
	"fmt"
	"os"
	"testing"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// shared is the member control plane the integration tests without special
// nodes share, each in a namespace of its own.
var shared = &testcluster.Shared{}

func TestMain(m *testing.M) {
	member, err := crds.Member()
	if err != nil {
		fmt.Fprintf(os.Stderr, "loading the member CRDs: %v\n", err)
		os.Exit(1)
	}
	shared.Options = testcluster.Options{Name: member0(), CRDs: member}
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}
