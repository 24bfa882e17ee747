package node

import (
	"bytes"
	"io"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
)

// logWriter forwards hclog's lines to logr, so raft logs go where the rest
// of replicafed logs go.
type logWriter struct{ log logr.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(line) > 0 {
			w.log.V(2).Info(string(line))
		}
	}
	return len(p), nil
}

func newHCLogger(log logr.Logger, name string) hclog.Logger {
	var out io.Writer = logWriter{log: log.WithName(name)}
	level := hclog.Info
	if !log.V(2).Enabled() {
		level = hclog.Warn
	}
	return hclog.New(&hclog.LoggerOptions{Name: name, Output: out, Level: level, DisableTime: true})
}
