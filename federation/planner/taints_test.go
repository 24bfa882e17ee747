package planner

import (
	"math"
	"testing"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func TestTolerates(t *testing.T) {
	noExec := Taint{Key: "maintenance", Value: "planned", Effect: v1alpha1.TaintNoExecute}
	cases := []struct {
		name string
		tol  v1alpha1.ClusterToleration
		want bool
	}{
		{"equal key and value", v1alpha1.ClusterToleration{Key: "maintenance", Value: "planned"}, true},
		{"empty operator is Equal", v1alpha1.ClusterToleration{Key: "maintenance", Value: "other"}, false},
		{"Equal needs the value", v1alpha1.ClusterToleration{Key: "maintenance", Operator: v1alpha1.TolerationEqual}, false},
		{"Exists ignores the value", v1alpha1.ClusterToleration{Key: "maintenance", Operator: v1alpha1.TolerationExists}, true},
		{"other key", v1alpha1.ClusterToleration{Key: "gpu", Operator: v1alpha1.TolerationExists}, false},
		{"empty key Exists matches all", v1alpha1.ClusterToleration{Operator: v1alpha1.TolerationExists}, true},
		{"empty key Equal matches nothing", v1alpha1.ClusterToleration{Value: "planned"}, false},
		{"same effect", v1alpha1.ClusterToleration{Key: "maintenance", Operator: v1alpha1.TolerationExists, Effect: v1alpha1.TaintNoExecute}, true},
		{"other effect", v1alpha1.ClusterToleration{Key: "maintenance", Operator: v1alpha1.TolerationExists, Effect: v1alpha1.TaintNoSchedule}, false},
		{"unknown operator", v1alpha1.ClusterToleration{Key: "maintenance", Operator: "Lt", Value: "planned"}, false},
	}
	for _, tc := range cases {
		if got := tolerates(&tc.tol, &noExec); got != tc.want {
			t.Errorf("%s: tolerates = %t, want %t", tc.name, got, tc.want)
		}
	}
}

// Item 5 of issue 14: NoSchedule keeps what runs and adds nothing;
// NoExecute moves the member's share away like a failover, at once or after
// tolerationSeconds counted from the taint's time, and the plan says when to
// come back.
func TestTaints(t *testing.T) {
	seconds := func(n int64) *int64 { return &n }
	tolerateFor := func(n int64) []v1alpha1.ClusterToleration {
		return []v1alpha1.ClusterToleration{{Key: "maintenance", Operator: v1alpha1.TolerationExists,
			Effect: v1alpha1.TaintNoExecute, TolerationSeconds: seconds(n)}}
	}
	noSchedule := Taint{Key: "maintenance", Effect: v1alpha1.TaintNoSchedule, TimeAdded: now.Add(-time.Hour)}
	noExecute := func(age time.Duration) Taint {
		return Taint{Key: "maintenance", Value: "planned", Effect: v1alpha1.TaintNoExecute, TimeAdded: now.Add(-age)}
	}
	cases := []struct {
		name        string
		taint       Taint
		tolerations []v1alpha1.ClusterToleration
		replicas    int32
		want        map[string]int32
		state       TargetState
		reason      Reason
		requeueAt   time.Time
	}{
		{name: "no taint", replicas: 6, want: map[string]int32{"a": 3, "b": 3}, state: StateActive},
		{name: "NoSchedule keeps running pods", taint: noSchedule, replicas: 6,
			want: map[string]int32{"a": 3, "b": 3}, state: StateCordoned},
		{name: "NoSchedule adds nothing on scale-up", taint: noSchedule, replicas: 10,
			want: map[string]int32{"a": 3, "b": 7}, state: StateCordoned},
		{name: "NoSchedule scale-down still cuts in order", taint: noSchedule, replicas: 2,
			want: map[string]int32{"a": 1, "b": 1}, state: StateCordoned},
		{name: "NoSchedule tolerated", taint: noSchedule, replicas: 10,
			tolerations: []v1alpha1.ClusterToleration{{Key: "maintenance", Operator: v1alpha1.TolerationExists}},
			want:        map[string]int32{"a": 5, "b": 5}, state: StateActive},
		{name: "NoSchedule not tolerated by a NoExecute toleration", taint: noSchedule, replicas: 10,
			tolerations: tolerateFor(60), want: map[string]int32{"a": 3, "b": 7}, state: StateCordoned},
		{name: "NoExecute untolerated evicts at once", taint: noExecute(0), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "NoExecute tolerated for ever", taint: noExecute(time.Hour), replicas: 6,
			tolerations: []v1alpha1.ClusterToleration{{Key: "maintenance", Value: "planned"}},
			want:        map[string]int32{"a": 3, "b": 3}, state: StateActive},
		{name: "NoExecute within tolerationSeconds: no new replicas, requeue at the end", taint: noExecute(20 * time.Second),
			tolerations: tolerateFor(300), replicas: 10,
			want: map[string]int32{"a": 3, "b": 7}, state: StateCordoned, requeueAt: now.Add(280 * time.Second)},
		{name: "NoExecute past tolerationSeconds evicts", taint: noExecute(300 * time.Second),
			tolerations: tolerateFor(300), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "shortest of several tolerations", taint: noExecute(100 * time.Second),
			tolerations: append(tolerateFor(300), tolerateFor(90)...), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "unlimited toleration beside a limited one", taint: noExecute(100 * time.Second),
			tolerations: append(tolerateFor(90), v1alpha1.ClusterToleration{Operator: v1alpha1.TolerationExists}), replicas: 6,
			want: map[string]int32{"a": 3, "b": 3}, state: StateActive},
		{name: "tolerationSeconds 0 evicts at once", taint: noExecute(0),
			tolerations: tolerateFor(0), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "unknown taint time: window not started", taint: Taint{Key: "maintenance", Effect: v1alpha1.TaintNoExecute},
			tolerations: tolerateFor(1), replicas: 6,
			want: map[string]int32{"a": 3, "b": 3}, state: StateCordoned},
		{name: "tolerationSeconds MaxInt64 never evicts (no overflow into the past)", taint: noExecute(24 * time.Hour),
			tolerations: tolerateFor(math.MaxInt64), replicas: 6,
			want: map[string]int32{"a": 3, "b": 3}, state: StateCordoned},
		{name: "tolerationSeconds just past what a Duration holds never evicts", taint: noExecute(24 * time.Hour),
			tolerations: tolerateFor(maxTolerationSeconds + 1), replicas: 6,
			want: map[string]int32{"a": 3, "b": 3}, state: StateCordoned},
		{name: "tolerationSeconds negative evicts at once", taint: noExecute(time.Second),
			tolerations: tolerateFor(-5), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "tolerationSeconds MinInt64 evicts at once", taint: noExecute(time.Second),
			tolerations: tolerateFor(math.MinInt64), replicas: 6,
			want: map[string]int32{"a": 0, "b": 6}, state: StateEvicted, reason: ReasonTaintEviction},
		{name: "unknown effect ignored", taint: Taint{Key: "x", Effect: "PreferNoSchedule"}, replicas: 10,
			want: map[string]int32{"a": 5, "b": 5}, state: StateActive},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Settled at 3 + 3, capacity to spare.
			members := healthy("a", "b")
			for i := range members {
				members[i].Current, members[i].Ready = 3, 3
			}
			if tc.taint.Effect != "" {
				members[0].Taints = []Taint{tc.taint}
			}
			in := Input{UID: "taints", Replicas: tc.replicas, Now: now, Members: members,
				Previous:  map[string]int32{"a": 3, "b": 3},
				Placement: v1alpha1.Placement{Tolerations: tc.tolerations}}
			r := Plan(in)
			checkInvariants(t, in, r)
			wantTargets(t, r, tc.want)
			if r.Targets[0].State != tc.state {
				t.Errorf("state %v, want %v", r.Targets[0].State, tc.state)
			}
			if tc.reason != "" && (len(r.Changes) == 0 || r.Changes[0].Reason != tc.reason) {
				t.Errorf("changes %v, want a's reason %s", r.Changes, tc.reason)
			}
			if !r.RequeueAt.Equal(tc.requeueAt) {
				t.Errorf("requeueAt %v, want %v", r.RequeueAt, tc.requeueAt)
			}
			if tc.state != StateActive && r.Note("a") == "" {
				t.Errorf("no note for a %v member", tc.state)
			}
			// At the deadline the plan sees the toleration expired.
			if !tc.requeueAt.IsZero() {
				in.Now = tc.requeueAt
				if r := Plan(in); r.Targets[0].State != StateEvicted || r.Target("a") != 0 {
					t.Errorf("at requeueAt: %s state %v, want a evicted", targetsString(r), r.Targets[0].State)
				}
			}
		})
	}
}

// A cordoned member keeps its pods under moveBack OnRecovery too: they are
// not moved by the budget.
func TestCordonedUnderOnRecovery(t *testing.T) {
	members := healthy("a", "b")
	members[0].Current, members[0].Ready = 5, 5
	members[0].Taints = []Taint{{Key: "k", Effect: v1alpha1.TaintNoSchedule}}
	in := Input{UID: "c", Replicas: 6, Now: now, Members: members, Previous: map[string]int32{"a": 5},
		Failover: v1alpha1.Failover{MoveBack: v1alpha1.MoveBackOnRecovery}, MoveBudget: budget(3, 1)}
	r := Plan(in)
	checkInvariants(t, in, r)
	wantTargets(t, r, map[string]int32{"a": 5, "b": 1})
	if r.MovesPending != 0 {
		t.Fatalf("moves pending %d, want 0", r.MovesPending)
	}
}

// RequeueAt also covers the grace period and the unschedulable threshold.
func TestRequeueAt(t *testing.T) {
	members := healthy("a", "b", "c")
	members[0].Health, members[0].UnhealthySince = Unhealthy, now.Add(-10*time.Second)
	members[1].Current, members[1].Unschedulable, members[1].UnschedulableSince = 2, 2, now.Add(-50*time.Second)
	in := Input{UID: "r", Replicas: 4, Now: now, Members: members, Previous: map[string]int32{"a": 2, "b": 2}}
	if r := Plan(in); !r.RequeueAt.Equal(now.Add(10 * time.Second)) {
		t.Fatalf("requeueAt %v, want the unschedulable threshold %v", r.RequeueAt, now.Add(10*time.Second))
	}
	in.Now = now.Add(10 * time.Second)
	if r := Plan(in); !r.RequeueAt.Equal(now.Add(50 * time.Second)) {
		t.Fatalf("requeueAt %v, want the grace period %v", r.RequeueAt, now.Add(50*time.Second))
	}
	in.Now = now.Add(50 * time.Second)
	if r := Plan(in); !r.RequeueAt.IsZero() {
		t.Fatalf("requeueAt %v, want none", r.RequeueAt)
	}
}

// tolerationEnd saturates instead of overflowing: a window too long for a
// time.Duration ends as late as one can reach, never in the past.
func TestTolerationEnd(t *testing.T) {
	added := now.Add(-time.Hour)
	far := added.Add(time.Duration(math.MaxInt64))
	cases := []struct {
		name    string
		seconds int64
		want    time.Time
	}{
		{"zero ends at once", 0, added},
		{"negative ends at once", -30, added},
		{"MinInt64 ends at once", math.MinInt64, added},
		{"ordinary", 90, added.Add(90 * time.Second)},
		{"largest countable", maxTolerationSeconds, added.Add(time.Duration(maxTolerationSeconds) * time.Second)},
		{"one past the largest countable saturates", maxTolerationSeconds + 1, far},
		{"MaxInt64 saturates", math.MaxInt64, far},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := tolerationEnd(added, tc.seconds)
			if !got.Equal(tc.want) {
				t.Fatalf("tolerationEnd(%d) = %v, want %v", tc.seconds, got, tc.want)
			}
			if tc.seconds > 0 && !got.After(added) {
				t.Fatalf("tolerationEnd(%d) = %v is not after the taint time %v", tc.seconds, got, added)
			}
		})
	}
}
