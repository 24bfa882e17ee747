package version

import (
	"runtime/debug"
	"testing"
)

func TestResolve(t *testing.T) {
	withVCS := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "abc123"}}}
	tagged := &debug.BuildInfo{GoVersion: "go1.26.1", Main: debug.Module{Version: "v0.3.0"}}
	for _, tc := range []struct {
		name            string
		version, commit string
		bi              *debug.BuildInfo
		want            Info
	}{
		{"stamped wins", "0.2.0", "deadbeef", withVCS, Info{Version: "0.2.0", Commit: "deadbeef", GoVersion: "go1.26.1"}},
		{"vcs revision fills the commit", "0.2.0", "", withVCS, Info{Version: "0.2.0", Commit: "abc123", GoVersion: "go1.26.1"}},
		{"module version fills the version", "", "", tagged, Info{Version: "v0.3.0", Commit: "unknown", GoVersion: "go1.26.1"}},
		{"devel build", "", "", withVCS, Info{Version: "devel", Commit: "abc123", GoVersion: "go1.26.1"}},
		{"no build info", "", "", nil, Info{Version: "devel", Commit: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := resolve(tc.version, tc.commit, func() (*debug.BuildInfo, bool) { return tc.bi, tc.bi != nil })
			if tc.want.GoVersion == "" {
				tc.want.GoVersion = got.GoVersion // runtime.Version()
			}
			got.Platform = ""
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "0.2.0", Commit: "abc", GoVersion: "go1.26.1", Platform: "linux/arm64"}.String()
	if want := "replicafed 0.2.0 (commit abc, go1.26.1, linux/arm64)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
