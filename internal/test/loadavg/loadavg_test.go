package loadavg

import (
	"os"
	"strings"
	"testing"
)

func TestRead(t *testing.T) {
	got := Read()
	if _, err := os.Stat("/proc/loadavg"); err != nil {
		if got != "unknown" {
			t.Fatalf("Read() = %q without /proc/loadavg, want unknown", got)
		}
		return
	}
	if f := strings.Fields(got); len(f) != 3 {
		t.Fatalf("Read() = %q, want three averages", got)
	}
}
