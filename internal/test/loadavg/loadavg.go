// Package loadavg reads the machine's load average, which benchmark and
// chaos reports print beside their figures: on a shared machine the figures
// mean little without it.
package loadavg

import (
	"os"
	"strings"
)

// Read returns the 1, 5 and 15 minute load averages as /proc/loadavg gives
// them ("0.52 0.61 0.70"), or "unknown" where there is no such file.
func Read() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
