package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	"github.com/replicafed/replicafed/internal/version"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestBadConfigExitsWithOneLine(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		key  string
	}{
		{"bad flag value", []string{"--raft-heartbeat-timeout=-1s"}, nil, `raft.heartbeatTimeout: must be > 0, got "-1s"`},
		{"bad env value", nil, map[string]string{"REPLICAFED_FAILOVER_MOVE_BACK": "Later"}, "failover.moveBack"},
		{"missing file", []string{"--config=/no/such/config.yaml"}, nil, "/no/such/config.yaml"},
		{"several problems", []string{"--controller-workers=0", "--log-format=xml"}, nil, "controller.workers"},
		{"unknown flag", []string{"--bogus"}, nil, "unknown flag: --bogus"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			code := execute(context.Background(), tt.args, env(tt.env), io.Discard, &stderr)
			if code != exitConfig {
				t.Errorf("exit code %d, want %d", code, exitConfig)
			}
			// pflag prints usage after a flag error; our reason is the last line.
			lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
			last := lines[len(lines)-1]
			if !strings.HasPrefix(last, "replicafed: invalid configuration: ") || !strings.Contains(last, tt.key) {
				t.Errorf("last stderr line %q, want the reason naming %q", last, tt.key)
			}
		})
	}
}

// A valid configuration (here without certificates, so raft.tls.insecure)
// gets past validation into the run; without a
// reachable hub (no kubeconfig, not in a cluster) the run fails with exit code
// 1, not the configuration code 2. The full run is exercised by the e2e suite.
func TestValidConfigWithoutHubFailsToRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr bytes.Buffer
	code := execute(ctx, []string{"--log-level=error", "--raft-data-dir=" + t.TempDir(), "--raft-tls-insecure"}, env(map[string]string{"POD_NAME": "replicafed-0"}), io.Discard, &stderr)
	if code != exitFailed {
		t.Fatalf("exit code %d, want %d; stderr: %s", code, exitFailed, stderr.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("configuration error printed for a valid configuration: %s", stderr.String())
	}
}

func TestHelpExitsZero(t *testing.T) {
	var stderr bytes.Buffer
	if code := execute(context.Background(), []string{"--help"}, env(nil), io.Discard, &stderr); code != exitOK {
		t.Fatalf("exit code %d, want 0", code)
	}
	if !strings.Contains(stderr.String(), "--raft-bind-address") {
		t.Errorf("help lacks --raft-bind-address: %s", stderr.String())
	}
}

func TestVersion(t *testing.T) {
	var stdout, stderr bytes.Buffer
	// The environment would fail a config load; version must not read it.
	bad := env(map[string]string{"REPLICAFED_CONTROLLER_WORKERS": "many"})
	if code := execute(context.Background(), []string{"version"}, bad, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit code %d, want 0; stderr: %s", code, stderr.String())
	}
	if got, want := strings.TrimSpace(stdout.String()), version.Get().String(); got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if code := execute(context.Background(), []string{"version", "--json"}, bad, &stdout, &stderr); code != exitConfig {
		t.Errorf("version with arguments: exit code %d, want %d", code, exitConfig)
	}
}
