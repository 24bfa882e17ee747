package rollout

import (
	"strings"
	"testing"
)

func TestGate(t *testing.T) {
	cases := []struct {
		name          string
		update, old   PodHealth
		want          Verdict
		msgContaining string
	}{
		{name: "no new pod yet", update: PodHealth{}, old: PodHealth{Pods: 6, Restarts: 40}, want: HealthPassed},
		{name: "healthy new pods", update: PodHealth{Pods: 2}, old: PodHealth{Pods: 4}, want: HealthPassed},
		{name: "a crash loop in the new revision only", update: PodHealth{Pods: 2, Restarts: 3, CrashLooping: 1}, old: PodHealth{Pods: 4},
			want: HealthFailed, msgContaining: "1 of 2 new pods are in CrashLoopBackOff"},
		{name: "crash loops no worse than the old revision's", update: PodHealth{Pods: 2, Restarts: 3, CrashLooping: 1}, old: PodHealth{Pods: 4, Restarts: 20, CrashLooping: 2},
			want: HealthPassed},
		{name: "crash loops worse than the old revision's", update: PodHealth{Pods: 2, Restarts: 3, CrashLooping: 2}, old: PodHealth{Pods: 4, Restarts: 20, CrashLooping: 2},
			want: HealthFailed, msgContaining: "2 of 2 new pods"},
		{name: "a crash loop with no old pods", update: PodHealth{Pods: 3, Restarts: 1, CrashLooping: 1}, want: HealthFailed},
		{name: "restarts within one more per pod", update: PodHealth{Pods: 2, Restarts: 4}, old: PodHealth{Pods: 4, Restarts: 4}, want: HealthPassed},
		{name: "restarts beyond one more per pod", update: PodHealth{Pods: 2, Restarts: 5}, old: PodHealth{Pods: 4, Restarts: 4},
			want: HealthFailed, msgContaining: "restarted 5 times over 2 pods"},
		{name: "old pods restart as much", update: PodHealth{Pods: 1, Restarts: 7}, old: PodHealth{Pods: 5, Restarts: 30}, want: HealthPassed},
		{name: "no old pods: one restart per pod allowed", update: PodHealth{Pods: 2, Restarts: 2}, want: HealthPassed},
		{name: "no old pods: more than one restart per pod", update: PodHealth{Pods: 2, Restarts: 3}, want: HealthFailed},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, msg := Gate(tc.update, tc.old)
			if got != tc.want {
				t.Fatalf("Gate = %v (%q), want %v", got, msg, tc.want)
			}
			if (got == HealthFailed) != (msg != "") {
				t.Errorf("message %q with verdict %v: a failure says why, a pass says nothing", msg, got)
			}
			if !strings.Contains(msg, tc.msgContaining) {
				t.Errorf("message %q lacks %q", msg, tc.msgContaining)
			}
		})
	}
}
