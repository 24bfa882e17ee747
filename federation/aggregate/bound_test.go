package aggregate

import (
	"fmt"
	"math"
	"strings"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestTruncate(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want string
	}{
		{"short kept", "abc", 10, "abc"},
		{"exact kept", "abcdefghij", 10, "abcdefghij"},
		{"cut with marker", strings.Repeat("a", 30), 20, "aaaaaa" + TruncatedMarker},
		{"marker alone when max is tiny", strings.Repeat("a", 30), 5, TruncatedMarker[:5]},
		// "é" is two bytes: a cut inside it moves back to its start.
		{"cut at a character boundary", strings.Repeat("é", 20), len(TruncatedMarker) + 5, "éé" + TruncatedMarker},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Truncate(tc.in, tc.max)
			if got != tc.want {
				t.Fatalf("Truncate = %q, want %q", got, tc.want)
			}
			if len(got) > tc.max || !utf8.ValidString(got) {
				t.Fatalf("Truncate = %q: %d bytes (max %d), valid UTF-8 %v", got, len(got), tc.max, utf8.ValidString(got))
			}
		})
	}
}

func TestJoinBounded(t *testing.T) {
	for _, tc := range []struct {
		name   string
		prefix string
		parts  []string
		max    int
		want   string
	}{
		{"all fit", "x: ", []string{"a", "b"}, 100, "x: a, b"},
		{"rest counted", "", []string{"aaaa", "bbbb", "cccc", "dddd"}, 20, "aaaa, bbbb, +2 more"},
		{"first part too long", "", []string{strings.Repeat("a", 50), "b"}, 20, "+2 more"},
		{"none", "p", nil, 10, "p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := joinBounded(tc.prefix, tc.parts, ", ", tc.max)
			if got != tc.want {
				t.Fatalf("joinBounded = %q, want %q", got, tc.want)
			}
			if len(got) > tc.max {
				t.Fatalf("joinBounded = %d bytes, max %d", len(got), tc.max)
			}
		})
	}
}

func TestClamp32(t *testing.T) {
	for _, tc := range []struct {
		in   int64
		want int32
	}{
		{0, 0}, {5, 5}, {math.MaxInt32, math.MaxInt32}, {math.MaxInt32 + 1, math.MaxInt32},
		{3 * math.MaxInt32, math.MaxInt32}, {math.MinInt32 - 1, math.MinInt32},
	} {
		if got := clamp32(tc.in); got != tc.want {
			t.Errorf("clamp32(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// checkBounded fails when any text or list in st is over the bounds the
// schema sets.
func checkBounded(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
	t.Helper()
	if len(st.Clusters) > MaxClusters {
		t.Errorf("%d cluster rows, max %d", len(st.Clusters), MaxClusters)
	}
	for _, r := range st.Clusters {
		if len(r.Message) > MaxMessage {
			t.Errorf("row %s: message of %d bytes", r.Name, len(r.Message))
		}
	}
	for _, c := range st.Conditions {
		if len(c.Message) > MaxConditionMessage || !utf8.ValidString(c.Message) {
			t.Errorf("condition %s: message of %d bytes (valid UTF-8 %v)", c.Type, len(c.Message), utf8.ValidString(c.Message))
		}
	}
}

func TestComputeBoundsMemberText(t *testing.T) {
	huge := strings.Repeat("x", 100<<10) // 100 KiB from one member
	many := make([]Member, 3000)
	for i := range many {
		many[i] = Member{Name: fmt.Sprintf("member-cluster-with-a-rather-long-name-%04d", i), Health: v1alpha1.ClusterUnreachable, Message: huge, Problem: huge,
			Report: &Report{Replicas: 1, Failure: huge, Unschedulable: 1, Time: t0}}
		if i%2 == 0 {
			many[i].Target = 1
		}
	}
	cases := []struct {
		name    string
		in      Input
		check   func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus)
		members int
	}{
		{"one member with a 100 KiB failure", Input{Desired: 1, Now: t0, Members: []Member{
			{Name: "a", Target: 1, Message: huge, Report: &Report{Replicas: 0, Failure: huge, FailureReason: "FailedCreate", Time: t0}},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			c := cond(st, v1alpha1.ConditionReplicaFailure)
			if c == nil || !strings.HasPrefix(c.Message, "a: xxx") || !strings.HasSuffix(c.Message, TruncatedMarker) {
				t.Fatalf("ReplicaFailure = %.80q...", c.Message)
			}
			if !strings.HasSuffix(st.Clusters[0].Message, TruncatedMarker) {
				t.Fatalf("row message not marked as cut")
			}
		}, 1},
		{"a 100 KiB problem and plan failure", Input{Desired: 1, Now: t0, PlanFailure: &PlanFailure{Reason: "PlanFailed", Message: huge},
			SpreadUnsatisfied: []string{huge, huge}, Members: []Member{{Name: "a", Target: 1, Problem: huge}}},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if c := cond(st, v1alpha1.ConditionPlanned); c == nil || len(c.Message) != MaxMessage {
					t.Fatalf("Planned message: %d bytes, want %d", len(c.Message), MaxMessage)
				}
				if c := cond(st, v1alpha1.ConditionSpreadUnsatisfied); c == nil || !strings.Contains(c.Message, TruncatedMarker+"; ") {
					t.Fatalf("SpreadUnsatisfied should hold both cut messages")
				}
			}, 1},
		{"3000 members, every one long", Input{Desired: 1500, Now: t0, Members: many},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if len(st.Clusters) != MaxClusters {
					t.Fatalf("%d rows, want %d", len(st.Clusters), MaxClusters)
				}
				for i, r := range st.Clusters {
					if r.Target == 0 && r.Replicas == 0 {
						t.Fatalf("idle row %s kept", r.Name)
					}
					if i > 0 && st.Clusters[i-1].Name >= r.Name {
						t.Fatalf("rows not in name order at %d", i)
					}
				}
				// Sums and counts still cover every member.
				if st.Replicas != 3000 || st.ClusterCount != 1500 || st.UnschedulableReplicas != 3000 {
					t.Fatalf("replicas %d, clusterCount %d, unschedulable %d", st.Replicas, st.ClusterCount, st.UnschedulableReplicas)
				}
				if c := cond(st, v1alpha1.ConditionClusterUnavailable); c == nil || !strings.Contains(c.Message, " more") {
					t.Fatalf("ClusterUnavailable should count the members left out")
				}
			}, 3000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st := Compute(tc.in)
			checkBounded(t, st)
			tc.check(t, st)
		})
	}
}

func TestComputeSumsDoNotWrap(t *testing.T) {
	big := int32(math.MaxInt32 - 1)
	st := Compute(Input{Desired: math.MaxInt32, Now: t0, Members: []Member{
		{Name: "a", Target: big, Report: &Report{Replicas: big, FullyLabeled: big, Ready: big, Available: big, Terminating: &big, Unschedulable: big, Time: t0}},
		{Name: "b", Target: big, Report: &Report{Replicas: big, FullyLabeled: big, Ready: big, Available: big, Terminating: &big, Unschedulable: big, Time: t0}},
	}})
	for name, v := range map[string]int32{
		"replicas": st.Replicas, "fullyLabeled": st.FullyLabeledReplicas, "ready": st.ReadyReplicas,
		"available": st.AvailableReplicas, "terminating": *st.TerminatingReplicas, "unschedulable": st.UnschedulableReplicas,
	} {
		if v != math.MaxInt32 {
			t.Errorf("%s = %d, want saturated %d", name, v, int32(math.MaxInt32))
		}
	}
	// The true sum is above the desired count: not Ready on a clamped value.
	if c := cond(st, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("Ready = %+v, want False (the members run more than desired)", c)
	}
}
