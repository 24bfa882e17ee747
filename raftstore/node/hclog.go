package node

import (
	"io"

	"github.com/go-logr/logr"
	"github.com/hashicorp/go-hclog"
)

// logrSink forwards hclog records to logr, keeping their severity: ERROR
// goes through log.Error and WARN is logged at the default verbosity, so
// raft's own trouble reports are seen without raising -v; INFO, DEBUG and
// TRACE map to V(1), V(2) and V(4).
type logrSink struct{ log logr.Logger }

func (s logrSink) Accept(_ string, level hclog.Level, msg string, args ...interface{}) {
	var err error
	kvs := make([]any, 0, len(args))
	for i := 0; i+1 < len(args); i += 2 {
		if e, ok := args[i+1].(error); ok && err == nil && (args[i] == "error" || args[i] == "err") {
			err = e
			continue
		}
		kvs = append(kvs, args[i], args[i+1])
	}
	switch {
	case level >= hclog.Error:
		s.log.Error(err, msg, kvs...)
		return
	case err != nil:
		kvs = append(kvs, "reason", err.Error())
	}
	s.log.V(logrLevel(level)).Info(msg, kvs...)
}

// logrLevel is the logr verbosity an hclog level (below ERROR) is logged at.
func logrLevel(l hclog.Level) int {
	switch {
	case l >= hclog.Warn:
		return 0
	case l == hclog.Info:
		return 1
	case l == hclog.Debug:
		return 2
	default:
		return 4
	}
}

// hclogLevel is the most verbose hclog level log shows, so raft skips
// formatting lines nobody sees.
func hclogLevel(log logr.Logger) hclog.Level {
	for _, l := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info} {
		if log.V(logrLevel(l)).Enabled() {
			return l
		}
	}
	return hclog.Warn
}

func newHCLogger(log logr.Logger, name string) hclog.Logger {
	log = log.WithName(name)
	l := hclog.NewInterceptLogger(&hclog.LoggerOptions{Name: name, Output: io.Discard, Level: hclogLevel(log), DisableTime: true})
	l.RegisterSink(logrSink{log: log})
	return l
}
