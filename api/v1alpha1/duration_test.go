package v1alpha1

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestDurationParseAndCheck(t *testing.T) {
	cases := []struct {
		in        string
		parse     time.Duration
		parseErr  string // substring; empty means Parse succeeds
		checkErr  string // substring; empty means Check succeeds
		checkOnly bool   // Parse succeeds, Check refuses
	}{
		{in: "90s", parse: 90 * time.Second},
		{in: "5m", parse: 5 * time.Minute},
		{in: "1h30m", parse: 90 * time.Minute},
		{in: "1h0m0s", parse: time.Hour},
		{in: "0", parse: 0},
		{in: "0s", parse: 0},
		{in: "1.5s", parse: 1500 * time.Millisecond},
		{in: ".5h", parse: 30 * time.Minute},
		{in: "250ms", parse: 250 * time.Millisecond},
		{in: "720h", parse: 720 * time.Hour},
		{in: "2592000s", parse: 720 * time.Hour},
		{in: "3d", parseErr: "not a duration", checkErr: "there is no unit for days"},
		{in: "60", parseErr: "missing unit", checkErr: "must be a duration"},
		{in: "", parseErr: "not a duration", checkErr: "must be a duration"},
		{in: "-5s", parseErr: "must not be negative", checkErr: "must be a duration"},
		{in: "721h", parse: 721 * time.Hour, checkErr: "at most 720h", checkOnly: true},
		{in: "+5s", parse: 5 * time.Second, checkErr: "must be a duration", checkOnly: true},
		{in: "1µs", parse: time.Microsecond, checkErr: "must be a duration", checkOnly: true},
		{in: "9999h", parse: 9999 * time.Hour, checkErr: "must be a duration", checkOnly: true},
		{in: "99999999999999999999h", parseErr: "not a duration", checkErr: "must be a duration"},
		{in: strings.Repeat("1s", 33), parse: 33 * time.Second, checkErr: "at most 64 characters", checkOnly: true},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			d := Duration(c.in)
			got, err := d.Parse()
			switch {
			case c.parseErr == "" && err != nil:
				t.Fatalf("Parse: %v", err)
			case c.parseErr == "" && got != c.parse:
				t.Fatalf("Parse = %v, want %v", got, c.parse)
			case c.parseErr != "" && (err == nil || !strings.Contains(err.Error(), c.parseErr)):
				t.Fatalf("Parse error %v, want it to say %q", err, c.parseErr)
			}
			got, err = d.Check()
			switch {
			case c.checkErr == "" && err != nil:
				t.Fatalf("Check: %v", err)
			case c.checkErr == "" && got != c.parse:
				t.Fatalf("Check = %v, want %v", got, c.parse)
			case c.checkErr != "" && (err == nil || !strings.Contains(err.Error(), c.checkErr)):
				t.Fatalf("Check error %v, want it to say %q", err, c.checkErr)
			}
			if c.checkOnly && c.parseErr != "" {
				t.Fatal("bad case: checkOnly with a parse error")
			}
		})
	}
}

// Every string the pattern admits parses without overflow: the per-unit
// digit limits keep the longest admitted string within int64 nanoseconds.
func TestDurationPatternCannotOverflow(t *testing.T) {
	for _, unit := range []struct {
		digits int
		unit   string
	}{{3, "h"}, {5, "m"}, {7, "s"}, {10, "ms"}, {13, "us"}, {16, "ns"}} {
		part := strings.Repeat("9", unit.digits) + "." + "9" + unit.unit
		s := strings.Repeat(part, maxDurationLength/len(part))
		if !durationRE.MatchString(s) {
			t.Fatalf("%q does not match the pattern", s)
		}
		if _, err := Duration(s).Parse(); err != nil {
			t.Errorf("%q: %v", s, err)
		}
		over := strings.Repeat("9", unit.digits+1) + unit.unit
		if durationRE.MatchString(over) {
			t.Errorf("%q matches the pattern; want the digit limit to refuse it", over)
		}
	}
}

func TestDurationOfRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{0, time.Nanosecond, 1500 * time.Millisecond, time.Minute, 90 * time.Minute, 720 * time.Hour} {
		got, err := DurationOf(d).Check()
		if err != nil || got != d {
			t.Errorf("DurationOf(%v).Check() = %v, %v", d, got, err)
		}
	}
}

func TestDurationDecodeNeverFails(t *testing.T) {
	cases := []struct {
		json string
		want *Duration
	}{
		{`{"unreachableGracePeriod":"90s"}`, ptrTo(Duration("90s"))},
		{`{"unreachableGracePeriod":"3d"}`, ptrTo(Duration("3d"))},
		{`{"unreachableGracePeriod":60}`, ptrTo(Duration("60"))},
		{`{"unreachableGracePeriod":{"seconds":5}}`, ptrTo(Duration(`{"seconds":5}`))},
		{`{"unreachableGracePeriod":true}`, ptrTo(Duration("true"))},
		{`{"unreachableGracePeriod":null}`, nil},
		{`{}`, nil},
	}
	for _, c := range cases {
		var f Failover
		if err := json.Unmarshal([]byte(c.json), &f); err != nil {
			t.Errorf("%s: %v", c.json, err)
			continue
		}
		got := f.UnreachableGracePeriod
		if (got == nil) != (c.want == nil) || (got != nil && *got != *c.want) {
			t.Errorf("%s: decoded %v, want %v", c.json, deref(got), deref(c.want))
		}
	}
	// A string value is written back exactly as it was read, so an update
	// of an object with a bad value leaves the value unchanged.
	in := `{"unreachableGracePeriod":"3d","unschedulableThreshold":"1h30m"}`
	var f Failover
	if err := json.Unmarshal([]byte(in), &f); err != nil {
		t.Fatal(err)
	}
	out, err := json.Marshal(f)
	if err != nil || string(out) != in {
		t.Fatalf("round trip: %s, %v; want %s", out, err, in)
	}
}

func ptrTo[T any](v T) *T { return &v }

func deref(d *Duration) string {
	if d == nil {
		return "<nil>"
	}
	return string(*d)
}
