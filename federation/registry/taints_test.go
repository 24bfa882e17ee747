package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestParseTaints(t *testing.T) {
	cases := []struct {
		name      string
		value     string
		wantKeys  []string
		wantError string
	}{
		{name: "no annotation"},
		{name: "two taints", value: `[{"key":"maintenance","effect":"NoExecute","timeAdded":"2026-05-01T10:00:00Z"},{"key":"spot","value":"true","effect":"NoSchedule"}]`,
			wantKeys: []string{"maintenance", "spot"}},
		{name: "not JSON", value: `maintenance:NoExecute`, wantKeys: []string{TaintInvalid}, wantError: "not a valid list"},
		{name: "missing key", value: `[{"effect":"NoSchedule"}]`, wantKeys: []string{TaintInvalid}, wantError: "no key"},
		{name: "unknown effect", value: `[{"key":"k","effect":"PreferNoSchedule"}]`, wantKeys: []string{TaintInvalid}, wantError: "PreferNoSchedule"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, errText := ParseTaints(tc.value)
			if (errText != "") != (tc.wantError != "") || !strings.Contains(errText, tc.wantError) {
				t.Fatalf("error = %q, want one containing %q", errText, tc.wantError)
			}
			if len(got) != len(tc.wantKeys) {
				t.Fatalf("taints = %+v, want keys %v", got, tc.wantKeys)
			}
			for i := range got {
				if got[i].Key != tc.wantKeys[i] {
					t.Errorf("taint %d key = %q, want %q", i, got[i].Key, tc.wantKeys[i])
				}
			}
			if tc.wantError != "" && got[0].Effect != v1alpha1.TaintNoSchedule {
				t.Errorf("invalid annotation gives effect %q, want NoSchedule", got[0].Effect)
			}
		})
	}
	got, _ := ParseTaints(`[{"key":"m","effect":"NoExecute","timeAdded":"2026-05-01T10:00:00Z"}]`)
	if want := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC); got[0].TimeAdded == nil || !got[0].TimeAdded.Time.Equal(want) {
		t.Errorf("timeAdded = %v, want %v", got[0].TimeAdded, want)
	}
}
