package test

import (
	"os/exec"
	"strings"
	"testing"
)

// The replicafed binary links none of the test support packages.
func TestProductDoesNotImportTestSupport(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/replicafed/replicafed/cmd/replicafed").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) < 50 {
		t.Fatalf("go list -deps named only %d packages; expected the binary's whole graph", len(deps))
	}
	for _, p := range deps {
		if strings.HasPrefix(p, "github.com/replicafed/replicafed/internal/test/") {
			t.Errorf("cmd/replicafed depends on test support package %s", p)
		}
	}
}
