package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"strconv"
	"strings"
	"testing"

	"k8s.io/klog/v2"

	"github.com/replicafed/replicafed/config"
)

// TestVerbosity logs at V(0), V(1) and V(2) and checks which lines appear
// for each configured level.
func TestVerbosity(t *testing.T) {
	tests := []struct {
		level string
		want  []string // messages expected, in order
	}{
		{"info", []string{"v0", "failed"}},
		{"debug", []string{"v0", "v1", "failed"}},
		{"2", []string{"v0", "v1", "v2", "failed"}},
		{"0", []string{"v0", "failed"}},
		{"error", []string{"failed"}},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var buf bytes.Buffer
			log, err := NewWithWriter(config.Logging{Level: tt.level, Format: config.FormatJSON}, &buf)
			if err != nil {
				t.Fatal(err)
			}
			log.Info("v0")
			log.V(1).Info("v1")
			log.V(2).Info("v2")
			log.Error(errors.New("boom"), "failed")

			var got []string
			for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
				if line == "" {
					continue
				}
				var entry map[string]any
				if err := json.Unmarshal([]byte(line), &entry); err != nil {
					t.Fatalf("line %q is not JSON: %v", line, err)
				}
				got = append(got, entry["msg"].(string))
				if entry["msg"] == "v2" && entry["v"] != float64(2) {
					t.Errorf("V(2) line has v=%v, want 2: %s", entry["v"], line)
				}
				if entry["msg"] == "failed" && entry["error"] != "boom" {
					t.Errorf("error line lacks error=boom: %s", line)
				}
			}
			if strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("level %s logged %v, want %v", tt.level, got, tt.want)
			}
		})
	}
}

func TestConsoleFormat(t *testing.T) {
	for _, cfg := range []config.Logging{
		{Level: "info", Format: config.FormatConsole},
		{Level: "info", Format: config.FormatJSON, Development: true},
	} {
		var buf bytes.Buffer
		log, err := NewWithWriter(cfg, &buf)
		if err != nil {
			t.Fatal(err)
		}
		log.Info("hello", "cluster", "m1")
		out := buf.String()
		if json.Valid([]byte(strings.TrimSpace(out))) || !strings.Contains(out, "hello") || !strings.Contains(out, "INFO") {
			t.Errorf("%+v: want a console line with INFO and hello, got %q", cfg, out)
		}
	}
}

func TestBadLevelRefused(t *testing.T) {
	_, err := NewWithWriter(config.Logging{Level: "loud"}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "logging.level") {
		t.Fatalf("error = %v, want one naming logging.level", err)
	}
}

func TestKlogRouted(t *testing.T) {
	var buf bytes.Buffer
	log, err := NewWithWriter(config.Logging{Level: "2", Format: config.FormatJSON}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	if err := routeKlog(log, 2); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		klog.ClearLogger()
		_ = routeKlogVerbosity(0)
	})
	klog.V(2).InfoS("from klog v2")
	klog.V(3).InfoS("from klog v3")
	klog.Flush()
	out := buf.String()
	if !strings.Contains(out, "from klog v2") || strings.Contains(out, "from klog v3") {
		t.Errorf("klog output = %q, want the V(2) line only", out)
	}
}

// routeKlogVerbosity resets klog's -v after the test.
func routeKlogVerbosity(v int) error {
	var fs flag.FlagSet
	klog.InitFlags(&fs)
	return fs.Set("v", strconv.Itoa(v))
}
