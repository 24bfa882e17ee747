package dependencies

import (
	"strings"
	"testing"
)

func TestSplitRefusesNamesOutsideTheNamespace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		valid bool
	}{
		{"db", true},
		{"db.credentials", true},
		{"kube-system/db", false},
		{"../kube-system/secrets/db", false},
		{"..", false},
		{"db%2Fx", false},
		{"DB", false},
		{strings.Repeat("a", 254), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			valid, invalid := Split([]Ref{sec(tc.name)})
			if got := len(valid) == 1; got != tc.valid {
				t.Fatalf("valid = %v, want %v (invalid %v)", valid, tc.valid, invalid)
			}
			if !tc.valid && (len(invalid) != 1 || invalid[0].Ref != sec(tc.name) || !strings.Contains(invalid[0].Err.Error(), "own namespace")) {
				t.Fatalf("invalid = %+v", invalid)
			}
		})
	}
}

func TestSplitKeepsOrder(t *testing.T) {
	valid, invalid := Split([]Ref{cm("a"), sec("x/y"), cm("b"), sec("ns/z")})
	if len(valid) != 2 || valid[0] != cm("a") || valid[1] != cm("b") {
		t.Fatalf("valid = %v", valid)
	}
	if len(invalid) != 2 || invalid[0].Ref != sec("x/y") || invalid[1].Ref != sec("ns/z") {
		t.Fatalf("invalid = %v", invalid)
	}
}
