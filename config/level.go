package config

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxVerbosity is the highest numeric logging.level.
const MaxVerbosity = 10

// ParseLevel turns logging.level into a zapcore.Level number: debug -1,
// info 0, warn 1, error 2, and a verbosity N (0-10) gives -N so that logr
// V(N) messages are shown. It lives here rather than in the logging package
// so validation can use it.
func ParseLevel(s string) (int, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return -1, nil
	case "info":
		return 0, nil
	case "warn", "warning":
		return 1, nil
	case "error":
		return 2, nil
	}
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 0 || n > MaxVerbosity {
		return 0, fmt.Errorf("must be debug, info, warn, error or a verbosity 0-%d, got %q", MaxVerbosity, s)
	}
	return -n, nil
}

// Verbosity returns the highest logr V level that is shown (0 for warn and
// error), e.g. to set klog's -v to match.
func (l Logging) Verbosity() int {
	lvl, err := ParseLevel(l.Level)
	if err != nil || lvl > 0 {
		return 0
	}
	return -lvl
}
