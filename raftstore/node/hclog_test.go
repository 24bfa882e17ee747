package node

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"
)

func TestHCLogLevels(t *testing.T) {
	tests := []struct {
		verbosity int
		want      []string
		notWant   []string
	}{
		{verbosity: 0, want: []string{`"msg"="warned"`, `"msg"="failed" "error"="boom"`}, notWant: []string{"informed", "debugged", "traced"}},
		{verbosity: 1, want: []string{"warned", "failed", "informed"}, notWant: []string{"debugged", "traced"}},
		{verbosity: 4, want: []string{"warned", "failed", "informed", "debugged", "traced"}},
	}
	for _, tc := range tests {
		var lines []string
		log := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) }, funcr.Options{Verbosity: tc.verbosity})
		h := newHCLogger(log, "raft")
		h.Warn("warned", "peer", "a")
		h.Error("failed", "error", errors.New("boom"))
		h.Info("informed")
		h.Debug("debugged")
		h.Trace("traced")
		out := strings.Join(lines, "\n")
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("verbosity %d: %q missing from\n%s", tc.verbosity, w, out)
			}
		}
		for _, w := range tc.notWant {
			if strings.Contains(out, w) {
				t.Errorf("verbosity %d: %q logged:\n%s", tc.verbosity, w, out)
			}
		}
	}
}
