// Command memberrbac writes the member ClusterRole manifests and the
// replicafed-member chart's ClusterRole template and CRD from
// federation/memberaccess and api/crds. `make generate` runs it from the
// repository root.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/replicafed/replicafed/federation/memberaccess"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "memberrbac:", err)
		os.Exit(1)
	}
}

func run() error {
	files, err := memberaccess.GeneratedFiles()
	if err != nil {
		return err
	}
	for path, data := range files {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return fmt.Errorf("creating directory for %s: %w", path, err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}
