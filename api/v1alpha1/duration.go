package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"time"
)

// MaxFailoverDuration is the longest failover duration the schema admits:
// long enough to mean "practically never", far from any overflow.
const MaxFailoverDuration = 720 * time.Hour

// DurationPattern is the syntax the schema admits for a Duration: Go's
// duration syntax without a sign and without the non-ASCII µs, with each
// part's integer digits limited per unit so that no admitted string can
// overflow int64 nanoseconds (the CEL rule on the type then compares it
// without an evaluation error). The +kubebuilder marker on Duration repeats
// it ([.] instead of \. so it needs no escape in a CEL string);
// TestDurationPatternInCRD checks that they agree.
const DurationPattern = `^(0|(([0-9]{1,3}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,10}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,13}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,16}([.][0-9]*)?|[.][0-9]+)ns)+)$`

// maxDurationLength bounds the text of a Duration (MaxLength on the type).
const maxDurationLength = 64

var durationRE = regexp.MustCompile(DurationPattern)

// Duration is a length of time written as Go writes durations: "90s", "5m",
// "1h30m" (units h, m, s, ms, us, ns; no days). It is a string on the wire
// and in Go, and decoding it never fails, whatever the stored value: an
// object stored under an older or more permissive schema still decodes, so
// one bad object cannot break a typed informer or list; Parse and
// FederatedReplicaSetSpec.Validate report what is wrong with it.
// +kubebuilder:validation:Type=string
// +kubebuilder:validation:MaxLength=64
// +kubebuilder:validation:XValidation:rule="self.matches('^(0|(([0-9]{1,3}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,10}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,13}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,16}([.][0-9]*)?|[.][0-9]+)ns)+)$')",message="must be a duration such as 90s, 5m or 1h30m: numbers each followed by a unit h, m, s, ms, us or ns (there is no unit for days: 3d is 72h)"
// +kubebuilder:validation:XValidation:rule="!self.matches('^(0|(([0-9]{1,3}([.][0-9]*)?|[.][0-9]+)h|([0-9]{1,5}([.][0-9]*)?|[.][0-9]+)m|([0-9]{1,7}([.][0-9]*)?|[.][0-9]+)s|([0-9]{1,10}([.][0-9]*)?|[.][0-9]+)ms|([0-9]{1,13}([.][0-9]*)?|[.][0-9]+)us|([0-9]{1,16}([.][0-9]*)?|[.][0-9]+)ns)+)$') || duration(self) <= duration('720h')",message="must be at most 720h (30 days)"
type Duration string

// DurationOf returns d as a Duration, written as time.Duration.String does.
func DurationOf(d time.Duration) *Duration {
	s := Duration(d.String())
	return &s
}

// Parse returns the length of time d stands for. It accepts what Go's
// time.ParseDuration accepts except negative values; the schema's narrower
// syntax and its maximum are checked by Check.
func (d Duration) Parse() (time.Duration, error) {
	v, err := time.ParseDuration(string(d))
	if err != nil {
		return 0, fmt.Errorf("not a duration such as 90s, 5m or 1h30m: %w", err)
	}
	if v < 0 {
		return 0, errors.New("must not be negative")
	}
	return v, nil
}

// Check parses d as the schema admits it: the syntax of DurationPattern, at
// most maxDurationLength characters and at most MaxFailoverDuration.
func (d Duration) Check() (time.Duration, error) {
	if len(d) > maxDurationLength {
		return 0, fmt.Errorf("must be at most %d characters", maxDurationLength)
	}
	if !durationRE.MatchString(string(d)) {
		return 0, errors.New("must be a duration such as 90s, 5m or 1h30m: numbers each followed by a unit h, m, s, ms, us or ns (there is no unit for days: 3d is 72h)")
	}
	v, err := d.Parse()
	if err != nil {
		return 0, err
	}
	if v > MaxFailoverDuration {
		return 0, fmt.Errorf("must be at most %s (30 days)", "720h")
	}
	return v, nil
}

// UnmarshalJSON keeps any JSON value: a string as it is, anything else
// (a number, say, from a schema that did not type the field) as its JSON
// text, which Parse then refuses. It never returns an error, so a bad value
// stays on its own object.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*d = Duration(s)
		return nil
	}
	*d = Duration(bytes.TrimSpace(b))
	return nil
}
