// Package version holds replicafed's build identity. Release builds stamp
// Version and Commit with -ldflags (see `make build` and `make image`):
//
//	-X github.com/replicafed/replicafed/internal/version.Version=0.2.0
//	-X github.com/replicafed/replicafed/internal/version.Commit=<git sha>
//
// An unstamped build (go run, go test) falls back to what the Go toolchain
// recorded in the binary, so the values are never empty.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Stamped by the linker; see the package comment.
var (
	// Version is the release version, e.g. 0.2.0.
	Version = ""
	// Commit is the git commit the binary was built from.
	Commit = ""
)

// Info is the identity of this binary.
type Info struct {
	// Version is the stamped release version, or "devel".
	Version string `json:"version"`
	// Commit is the stamped commit, the VCS revision the toolchain recorded,
	// or "unknown".
	Commit string `json:"commit"`
	// GoVersion is the toolchain that built the binary.
	GoVersion string `json:"goVersion"`
	// Platform is GOOS/GOARCH.
	Platform string `json:"platform"`
}

// Get returns this binary's build identity.
func Get() Info {
	return resolve(Version, Commit, readBuildInfo)
}

func readBuildInfo() (*debug.BuildInfo, bool) { return debug.ReadBuildInfo() }

// resolve fills unstamped values from the toolchain's build information.
func resolve(version, commit string, read func() (*debug.BuildInfo, bool)) Info {
	info := Info{Version: version, Commit: commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := read(); ok {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		if info.Commit == "" {
			for _, s := range bi.Settings {
				if s.Key == "vcs.revision" {
					info.Commit = s.Value
				}
			}
		}
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}

// String is the one-line form printed by `replicafed version`.
func (i Info) String() string {
	return fmt.Sprintf("replicafed %s (commit %s, %s, %s)", i.Version, i.Commit, i.GoVersion, i.Platform)
}
