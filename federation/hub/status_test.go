package hub

import (
	"maps"
	"math"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/planner"
)

func TestStatusRows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed map[string]int32
		reports   map[string]engine.MemberStatus
		want      map[string]int32
	}{
		{name: "nothing", want: map[string]int32{}},
		{name: "committed targets only", committed: map[string]int32{"a": 2, "b": 0}, want: map[string]int32{"a": 2, "b": 0}},
		{
			name:      "reporting members without a target get a zero row",
			committed: map[string]int32{"a": 2},
			reports: map[string]engine.MemberStatus{
				"a": {Replicas: 2},
				"b": {Replicas: 1},
				"c": {TerminatingReplicas: 1},
				"d": {},
			},
			want: map[string]int32{"a": 2, "b": 0, "c": 0},
		},
		{
			name:      "a report does not override a target",
			committed: map[string]int32{"a": 5},
			reports:   map[string]engine.MemberStatus{"a": {Replicas: 1}},
			want:      map[string]int32{"a": 5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var before map[string]int32
			if tc.committed != nil {
				before = maps.Clone(tc.committed)
			}
			got := statusRows(tc.committed, tc.reports)
			if !maps.Equal(got, tc.want) {
				t.Errorf("statusRows = %v, want %v", got, tc.want)
			}
			if !maps.Equal(tc.committed, before) {
				t.Errorf("statusRows changed its input to %v, was %v", tc.committed, before)
			}
		})
	}
}

func TestDesiredReplicas(t *testing.T) {
	spec := func(replicas *int32, mode v1alpha1.PlacementMode) *v1alpha1.FederatedReplicaSet {
		f := &v1alpha1.FederatedReplicaSet{}
		f.Spec.Replicas = replicas
		f.Spec.Placement.Mode = mode
		return f
	}
	plan := func(targets ...int32) planner.Result {
		var res planner.Result
		for _, n := range targets {
			res.Targets = append(res.Targets, planner.Target{Replicas: n})
		}
		return res
	}
	for _, tc := range []struct {
		name string
		frs  *v1alpha1.FederatedReplicaSet
		res  planner.Result
		want int32
	}{
		{name: "unset replicas default to 1", frs: spec(nil, ""), want: 1},
		{name: "divided: spec.replicas", frs: spec(ptr.To[int32](6), ""), res: plan(3, 3), want: 6},
		{name: "negative is 0", frs: spec(ptr.To[int32](-2), ""), want: 0},
		{name: "duplicated: sum of targets", frs: spec(ptr.To[int32](3), v1alpha1.PlacementDuplicated), res: plan(3, 3, 3), want: 9},
		{name: "duplicated without targets: spec.replicas", frs: spec(ptr.To[int32](3), v1alpha1.PlacementDuplicated), want: 3},
		{name: "duplicated sum is capped", frs: spec(ptr.To[int32](math.MaxInt32), v1alpha1.PlacementDuplicated),
			res: plan(math.MaxInt32, math.MaxInt32), want: math.MaxInt32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := desiredReplicas(tc.frs, tc.res); got != tc.want {
				t.Errorf("desiredReplicas = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestAggregateReport(t *testing.T) {
	at := metav1.NewTime(now)
	for _, tc := range []struct {
		name string
		rep  engine.MemberStatus
		want aggregate.Report
	}{
		{
			name: "counts",
			rep: engine.MemberStatus{Replicas: 5, FullyLabeledReplicas: 4, ReadyReplicas: 3, AvailableReplicas: 2,
				Unschedulable: 1, TerminatingReplicas: 2, ReportedAt: now},
			want: aggregate.Report{Replicas: 5, FullyLabeled: 4, Ready: 3, Available: 2, Unschedulable: 1,
				Terminating: ptr.To[int32](2), Time: now},
		},
		{
			name: "replica failure",
			rep: engine.MemberStatus{Replicas: 1, ReportedAt: now,
				ReplicaFailure: &metav1.Condition{Type: v1alpha1.ConditionReplicaFailure, Reason: "FailedCreate", Message: "quota", LastTransitionTime: at}},
			want: aggregate.Report{Replicas: 1, Terminating: ptr.To[int32](0), Time: now, Failure: "quota", FailureReason: "FailedCreate"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := aggregateReport(tc.rep)
			if got.Terminating == nil || *got.Terminating != *tc.want.Terminating {
				t.Fatalf("Terminating = %v, want %d", got.Terminating, *tc.want.Terminating)
			}
			got.Terminating, tc.want.Terminating = nil, nil
			if *got != tc.want {
				t.Errorf("aggregateReport = %+v, want %+v", *got, tc.want)
			}
		})
	}
}
