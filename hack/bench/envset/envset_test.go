package envset

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPositiveInts(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    map[string]int
		wantErr string
	}{
		{name: "unset keeps defaults", env: nil, want: map[string]int{"A": 1, "B": 2}},
		{name: "set", env: map[string]string{"B": "7"}, want: map[string]int{"A": 1, "B": 7}},
		{name: "zero", env: map[string]string{"A": "0"}, wantErr: `A="0": want a positive integer`},
		{name: "not a number", env: map[string]string{"B": "1k"}, wantErr: `B="1k": want a positive integer`},
		{name: "first bad key in name order", env: map[string]string{"A": "x", "B": "y"}, wantErr: `A="x": want a positive integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := 1, 2
			err := PositiveInts(func(k string) string { return tt.env[k] }, map[string]*int{"A": &a, "B": &b})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, map[string]int{"A": a, "B": b}); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPositiveDurations(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		want    time.Duration
		wantErr string
	}{
		{name: "unset", want: time.Minute},
		{name: "set", env: map[string]string{"D": "90s"}, want: 90 * time.Second},
		{name: "negative", env: map[string]string{"D": "-1s"}, wantErr: `D="-1s": want a positive duration such as 30m`},
		{name: "no unit", env: map[string]string{"D": "30"}, wantErr: `D="30": want a positive duration such as 30m`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := time.Minute
			err := PositiveDurations(func(k string) string { return tt.env[k] }, map[string]*time.Duration{"D": &d})
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d != tt.want {
				t.Errorf("duration %s, want %s", d, tt.want)
			}
		})
	}
}

func TestMembers(t *testing.T) {
	if err := Members("N", MaxMembers); err != nil {
		t.Errorf("26 members refused: %v", err)
	}
	if err := Members("N", MaxMembers+1); err == nil || err.Error() != "N=27: at most 26 (members are named member-a to member-z)" {
		t.Errorf("27 members: error %v", err)
	}
}
