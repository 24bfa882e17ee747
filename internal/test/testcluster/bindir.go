package testcluster

import (
	"fmt"
	"os"
	"path/filepath"
)

// BinDirEnv overrides where the control-plane binaries are looked up.
const BinDirEnv = "REPLICAFED_BIN_DIR"

// Binaries that a full cluster needs, as built by `make tools`.
var requiredBinaries = []string{"etcd", "kube-apiserver"}

// FindBinDir returns the directory that holds the control-plane binaries:
// $REPLICAFED_BIN_DIR, or the bin/ directory at the root of the repository
// that contains the working directory.
func FindBinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		return d, nil
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the bin directory: %w", err)
	}
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "hack", "tools")); err == nil {
				return filepath.Join(dir, "bin"), nil
			}
		}
		if filepath.Dir(dir) == dir {
			return "", fmt.Errorf("no repository root with hack/tools above %s; set %s", wd, BinDirEnv)
		}
	}
}

func checkBinaries(dir string, names ...string) error {
	for _, n := range names {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			return fmt.Errorf("control-plane binary %s missing in %s (run `make tools`): %w", n, dir, err)
		}
	}
	return nil
}
