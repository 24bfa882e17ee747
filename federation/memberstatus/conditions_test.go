package memberstatus

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStampConditions(t *testing.T) {
	earlier := metav1.NewTime(now.Add(-time.Hour))
	stamped := metav1.NewTime(now.Truncate(time.Second))
	refused := func(status metav1.ConditionStatus, at metav1.Time) metav1.Condition {
		return metav1.Condition{Type: "CredentialsRefused", Status: status, Reason: "ExecNotAllowed", Message: "users[u].exec is not allowed", LastTransitionTime: at}
	}
	tests := []struct {
		name     string
		want     []metav1.Condition
		recorded []metav1.Condition
		out      []metav1.Condition
	}{
		{name: "none wanted is nil, so an empty status reads back equal"},
		{name: "new condition is stamped now",
			want: []metav1.Condition{refused(metav1.ConditionTrue, metav1.Time{})},
			out:  []metav1.Condition{refused(metav1.ConditionTrue, stamped)}},
		{name: "unchanged status keeps its transition time",
			want:     []metav1.Condition{refused(metav1.ConditionTrue, metav1.Time{})},
			recorded: []metav1.Condition{refused(metav1.ConditionTrue, earlier)},
			out:      []metav1.Condition{refused(metav1.ConditionTrue, earlier)}},
		{name: "changed status is stamped now",
			want:     []metav1.Condition{refused(metav1.ConditionFalse, metav1.Time{})},
			recorded: []metav1.Condition{refused(metav1.ConditionTrue, earlier)},
			out:      []metav1.Condition{refused(metav1.ConditionFalse, stamped)}},
		{name: "a condition no longer wanted is dropped",
			recorded: []metav1.Condition{refused(metav1.ConditionTrue, earlier)}},
		{name: "missing reason becomes the type",
			want: []metav1.Condition{{Type: "NameConflict", Status: metav1.ConditionTrue, Message: "m"}},
			out:  []metav1.Condition{{Type: "NameConflict", Status: metav1.ConditionTrue, Reason: "NameConflict", Message: "m", LastTransitionTime: stamped}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := stampConditions(tc.want, tc.recorded, now)
			if diff := cmp.Diff(tc.out, got); diff != "" {
				t.Errorf("conditions (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStampConditionsBoundsMessages(t *testing.T) {
	got := stampConditions([]metav1.Condition{{Type: "CredentialsRefused", Status: metav1.ConditionTrue, Reason: "R", Message: strings.Repeat("x", 100<<10)}}, nil, now)
	if n := len(got[0].Message); n > 1024 {
		t.Fatalf("message of %d bytes reaches the status; the CRD bound is 1024", n)
	}
}
