package rollout

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStep(t *testing.T) {
	const o, n = "old", "new"
	in := func(replicas, surge, unavailable int32, ms ...*mb) Input {
		return Input{Replicas: replicas, MaxSurge: surge, MaxUnavailable: unavailable, UpdateRevision: n, StableRevision: o,
			Order: []string{"older", o, n}, Members: members(ms...)}
	}
	cases := []struct {
		name    string
		in      Input
		want    targets
		settled bool
	}{
		{
			name: "surge only: one new pod, no old pod leaves before it is Available",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 4, 4, 4)),
			want: targets{"a": {o: 4, n: 1}},
		},
		{
			name: "the new pod is Available: one old pod leaves as its replacement",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 4, 4, 4).pods(n, 1, 1, 1)),
			want: targets{"a": {o: 3, n: 1}},
		},
		{
			name: "the new pod is not Available yet: nothing moves",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 4, 4, 4).pods(n, 1, 1, 0)),
			want: targets{"a": {o: 4, n: 1}},
		},
		{
			name: "old pod deleted, not yet gone: the fleet is full, nothing new",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 3, 4, 4).pods(n, 1, 1, 1)),
			want: targets{"a": {o: 3, n: 1}},
		},
		{
			name: "old pod gone: the freed room goes to the new revision",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 3, 3, 3).pods(n, 1, 1, 1)),
			want: targets{"a": {o: 3, n: 2}},
		},
		{
			name: "no surge: old Available pods leave ahead of replacements within maxUnavailable",
			in:   in(4, 0, 2, member("a", 4).share(4).pods(o, 4, 4, 4)),
			want: targets{"a": {o: 2, n: 0}},
		},
		{
			name: "no surge, old pods gone: new pods fill the member",
			in:   in(4, 0, 2, member("a", 4).share(4).pods(o, 2, 2, 2).pods(n, 0, 0, 0)),
			want: targets{"a": {o: 2, n: 2}},
		},
		{
			name: "old pods that are not Available leave at once, whatever the budget",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(o, 4, 4, 2)),
			want: targets{"a": {o: 2, n: 1}},
		},
		{
			name: "both budgets 0: surge 1",
			in:   in(2, 0, 0, member("a", 2).share(2).pods(o, 2, 2, 2)),
			want: targets{"a": {o: 2, n: 1}},
		},
		{
			name: "surge shared fairly among members, extra by name",
			in: in(12, 3, 0,
				member("a", 4).share(4).pods(o, 4, 4, 4),
				member("b", 4).share(4).pods(o, 4, 4, 4),
				member("c", 4).share(4).pods(o, 4, 4, 4)),
			want: targets{"a": {o: 4, n: 1}, "b": {o: 4, n: 1}, "c": {o: 4, n: 1}},
		},
		{
			name: "b is at its target + surge and gets nothing more; a takes the fleet's room",
			in: in(8, 2, 2,
				member("a", 4).share(4).pods(o, 2, 2, 2),
				member("b", 4).share(4).pods(o, 4, 4, 4).pods(n, 2, 2, 0)),
			want: targets{"a": {o: 2, n: 2}, "b": {o: 4, n: 2}},
		},
		{
			name: "canary stage: only the canary member's share moves",
			in: in(8, 2, 0,
				member("a", 4).share(0).pods(o, 4, 4, 4),
				member("c", 4).share(1).pods(o, 4, 4, 4)),
			want: targets{"a": {o: 4, n: 0}, "c": {o: 4, n: 1}},
		},
		{
			name: "canary reached and Available: settled",
			in: in(8, 2, 0,
				member("a", 4).share(0).pods(o, 4, 4, 4),
				member("c", 4).share(1).pods(o, 3, 3, 3).pods(n, 1, 1, 1)),
			want:    targets{"a": {o: 4, n: 0}, "c": {o: 3, n: 1}},
			settled: true,
		},
		{
			name: "a member without room gets no surge pod; one with room does",
			in: in(8, 2, 0,
				member("a", 4).share(4).room(0).pods(o, 4, 4, 4),
				member("b", 4).share(4).room(5).pods(o, 4, 4, 4)),
			want: targets{"a": {o: 4, n: 0}, "b": {o: 4, n: 2}},
		},
		{
			name: "unreachable member: targets kept, its pods count but are not Available, so no Available pod leaves elsewhere",
			in: in(8, 2, 1,
				member("a", 4).share(4).pods(o, 3, 3, 3).pods(n, 1, 1, 1),
				member("b", 4).share(4).unreachable().pods(o, 4, 4, 4)),
			want: targets{"a": {o: 3, n: 3}, "b": {o: 4}},
		},
		{
			name: "failed-over member (target 0): its pods count neither as pods nor as Available",
			in: in(8, 2, 0,
				member("a", 8).share(8).pods(o, 8, 8, 8),
				member("b", 0).unreachable().pods(o, 4, 4, 4)),
			want: targets{"a": {o: 8, n: 2}, "b": {o: 4}},
		},
		{
			name: "the fleet is full and at its floor: only the pod that is not Available leaves",
			in: in(6, 1, 0, member("a", 6).share(6).
				pods("older", 2, 2, 1).pods(o, 4, 4, 4).pods(n, 1, 1, 1)),
			want: targets{"a": {"older": 1, o: 4, n: 1}},
		},
		{
			name: "older revisions give up Available pods first",
			in: in(6, 1, 0, member("a", 6).share(6).
				pods("older", 2, 2, 2).pods(o, 3, 3, 3).pods(n, 2, 2, 2)),
			want: targets{"a": {"older": 1, o: 3, n: 2}},
		},
		{
			name: "target grown before the stage reaches the member: the stable revision grows",
			in: in(8, 2, 0,
				member("a", 6).share(0).pods(o, 4, 4, 4),
				member("b", 2).share(2).pods(n, 2, 2, 2)),
			want: targets{"a": {o: 6, n: 0}, "b": {n: 2}},
		},
		{
			name: "rollback: the bad revision's pods are not Available and leave at once",
			in: Input{Replicas: 4, MaxSurge: 1, MaxUnavailable: 0, UpdateRevision: o, StableRevision: o, Order: []string{o, n},
				Members: members(member("a", 4).share(4).pods(o, 3, 3, 3).pods(n, 1, 1, 0))},
			want: targets{"a": {n: 0, o: 4}},
		},
		{
			name: "complete: settled",
			in:   in(4, 1, 0, member("a", 4).share(4).pods(n, 4, 4, 4).pods(o, 0, 0, 0)),
			want: targets{"a": {o: 0, n: 4}}, settled: true,
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := Step(c.in)
			if diff := cmp.Diff(c.want, targetsOf(out)); diff != "" {
				t.Errorf("targets (-want +got):\n%s", diff)
			}
			if out.Settled != c.settled {
				t.Errorf("settled = %v, want %v", out.Settled, c.settled)
			}
			r, s := int64(c.in.Replicas), int64(max(c.in.MaxSurge, 0))
			if s == 0 && c.in.MaxUnavailable <= 0 {
				s = 1
			}
			if int64(out.Pods) > r+s {
				t.Errorf("pods bound %d above replicas + surge %d", out.Pods, r+s)
			}
		})
	}
}

func TestCurrentShares(t *testing.T) {
	got := CurrentShares("new", members(
		member("a", 4).pods("old", 3, 3, 3).pods("new", 2, 1, 1),
		member("b", 1).pods("new", 3, 3, 3),
		member("c", 2).pods("old", 2, 2, 2)))
	if diff := cmp.Diff(map[string]int32{"a": 2, "b": 1, "c": 0}, got); diff != "" {
		t.Errorf("shares (-want +got):\n%s", diff)
	}
}
