package aggregate

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func rep(replicas, ready, avail int32) *Report {
	return &Report{Replicas: replicas, FullyLabeled: replicas, Ready: ready, Available: avail, Time: t0}
}

func cond(st v1alpha1.FederatedReplicaSetStatus, typ string) *metav1.Condition {
	return meta.FindStatusCondition(st.Conditions, typ)
}

func TestCompute(t *testing.T) {
	two := int32(2)
	tests := []struct {
		name  string
		in    Input
		check func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus)
	}{
		{"sums members and is ready", Input{Generation: 3, Desired: 4, Selector: "app=web", Now: t0, Members: []Member{
			{Name: "b", Target: 2, Health: v1alpha1.ClusterHealthy, Report: rep(2, 2, 2)},
			{Name: "a", Target: 2, Health: v1alpha1.ClusterHealthy, Report: rep(2, 2, 2)},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if st.Replicas != 4 || st.ReadyReplicas != 4 || st.AvailableReplicas != 4 || st.FullyLabeledReplicas != 4 {
				t.Fatalf("sums wrong: %+v", st)
			}
			if st.ObservedGeneration != 3 || st.Selector != "app=web" || st.ClusterCount != 2 {
				t.Fatalf("meta wrong: %+v", st)
			}
			if st.Clusters[0].Name != "a" || st.Clusters[1].Name != "b" {
				t.Fatalf("rows not sorted: %+v", st.Clusters)
			}
			if c := cond(st, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("Ready = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("Progressing = %+v", c)
			}
			if st.TerminatingReplicas != nil {
				t.Fatalf("terminating should stay nil when no member reports it")
			}
		}},
		{"refused commit: rows show what runs, Planned False, not at target", Input{Generation: 9, Desired: 9, Now: t0,
			PlanFailure: &PlanFailure{Reason: "CommitFailed", Message: "stale command: generation 999999"},
			Members: []Member{
				{Name: "a", Target: 25, Health: v1alpha1.ClusterHealthy, Report: rep(25, 25, 25)},
				{Name: "b", Target: 0, Health: v1alpha1.ClusterHealthy, Report: rep(4, 4, 4)},
			}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if st.Replicas != 29 {
				t.Fatalf("replicas = %d, want 29", st.Replicas)
			}
			if c := cond(st, v1alpha1.ConditionPlanned); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "CommitFailed" || !strings.Contains(c.Message, "999999") {
				t.Fatalf("Planned = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionProgressing); c == nil || c.Reason != "PlanNotCommitted" {
				t.Fatalf("Progressing = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionFalse {
				t.Fatalf("Ready = %+v", c)
			}
		}},
		{"committed plan: Planned True", Input{Generation: 2, Desired: 1, Now: t0, Members: []Member{
			{Name: "a", Target: 1, Report: rep(1, 1, 1)},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if c := cond(st, v1alpha1.ConditionPlanned); c == nil || c.Status != metav1.ConditionTrue {
				t.Fatalf("Planned = %+v", c)
			}
		}},
		{"member below target is progressing, not ready", Input{Desired: 4, Now: t0, Members: []Member{
			{Name: "a", Target: 2, Report: rep(2, 2, 2)},
			{Name: "b", Target: 2, Report: rep(1, 1, 0)},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if c := cond(st, v1alpha1.ConditionReady); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "2 of 4") {
				t.Fatalf("Ready = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "b") {
				t.Fatalf("Progressing = %+v", c)
			}
		}},
		{"member without report but with target is progressing", Input{Desired: 1, Now: t0, Members: []Member{
			{Name: "a", Target: 1},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if c := cond(st, v1alpha1.ConditionProgressing); c.Status != metav1.ConditionTrue {
				t.Fatalf("Progressing = %+v", c)
			}
			if st.Clusters[0].Health != v1alpha1.ClusterHealthUnknown || st.Clusters[0].LastReportTime != nil {
				t.Fatalf("row = %+v", st.Clusters[0])
			}
		}},
		{"failures, unreachable, unschedulable and terminating", Input{Desired: 3, Shortfall: 0, Now: t0, Members: []Member{
			{Name: "a", Target: 2, Health: v1alpha1.ClusterHealthy, Report: &Report{Replicas: 1, Terminating: &two, Unschedulable: 1, Failure: "quota exceeded", Time: t0}},
			{Name: "b", Target: 1, Health: v1alpha1.ClusterUnreachable, Report: rep(1, 1, 1)},
		}}, func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
			if st.TerminatingReplicas == nil || *st.TerminatingReplicas != 2 {
				t.Fatalf("terminating = %v", st.TerminatingReplicas)
			}
			if c := cond(st, v1alpha1.ConditionReplicaFailure); c == nil || !strings.Contains(c.Message, "a: quota exceeded") {
				t.Fatalf("ReplicaFailure = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionClusterUnavailable); c == nil || !strings.Contains(c.Message, "b") {
				t.Fatalf("ClusterUnavailable = %+v", c)
			}
			if c := cond(st, v1alpha1.ConditionUnschedulable); c == nil || c.Reason != "PodsUnschedulable" {
				t.Fatalf("Unschedulable = %+v", c)
			}
			if st.Clusters[0].UnschedulableReplicas != 1 {
				t.Fatalf("row a = %+v", st.Clusters[0])
			}
		}},
		{"member problem is a replica failure", Input{Desired: 1, Now: t0, Members: []Member{{Name: "a", Target: 1, Problem: "cannot install CRD: forbidden"}}},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if c := cond(st, v1alpha1.ConditionReplicaFailure); c == nil || !strings.Contains(c.Message, "a: cannot install CRD: forbidden") {
					t.Fatalf("ReplicaFailure = %+v", c)
				}
				if st.Clusters[0].Message != "cannot install CRD: forbidden" {
					t.Fatalf("row message = %q", st.Clusters[0].Message)
				}
			}},
		{"shortfall reported", Input{Desired: 10, Shortfall: 4, Now: t0, Members: []Member{{Name: "a", Target: 6, Report: rep(6, 6, 6)}}},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if c := cond(st, v1alpha1.ConditionUnschedulable); c == nil || c.Reason != "InsufficientCapacity" || !strings.Contains(c.Message, "4") {
					t.Fatalf("Unschedulable = %+v", c)
				}
			}},
		{"cleared conditions are removed", Input{Desired: 1, Now: t0, Members: []Member{{Name: "a", Target: 1, Report: rep(1, 1, 1)}},
			Previous: v1alpha1.FederatedReplicaSetStatus{Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReplicaFailure, Status: metav1.ConditionTrue, Reason: "x"},
				{Type: v1alpha1.ConditionClusterUnavailable, Status: metav1.ConditionTrue, Reason: "x"},
			}}},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if cond(st, v1alpha1.ConditionReplicaFailure) != nil || cond(st, v1alpha1.ConditionClusterUnavailable) != nil {
					t.Fatalf("stale conditions kept: %+v", st.Conditions)
				}
			}},
		{"transition time kept while status holds", Input{Desired: 1, Now: t0.Add(time.Hour), Members: []Member{{Name: "a", Target: 1, Report: rep(1, 1, 1)}},
			Previous: v1alpha1.FederatedReplicaSetStatus{Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "ReplicasAvailable", LastTransitionTime: metav1.NewTime(t0)},
			}}},
			func(t *testing.T, st v1alpha1.FederatedReplicaSetStatus) {
				if c := cond(st, v1alpha1.ConditionReady); !c.LastTransitionTime.Time.Equal(t0) {
					t.Fatalf("LastTransitionTime moved: %v", c.LastTransitionTime)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.check(t, Compute(tc.in)) })
	}
}

func TestEqualIgnoresReportTimes(t *testing.T) {
	in := Input{Desired: 1, Now: t0, Members: []Member{{Name: "a", Target: 1, Report: rep(1, 1, 1)}}}
	a := Compute(in)
	in.Members[0].Report = &Report{Replicas: 1, FullyLabeled: 1, Ready: 1, Available: 1, Time: t0.Add(time.Minute)}
	in.Now = t0.Add(time.Minute)
	b := Compute(in)
	if !Equal(a, b) {
		t.Fatalf("statuses differing only in times should be equal")
	}
	in.Members[0].Report = rep(1, 0, 0)
	if Equal(a, Compute(in)) {
		t.Fatalf("statuses with different counts should differ")
	}
}

func TestSpreadText(t *testing.T) {
	m := func(name string, target int32) Member { return Member{Name: name, Target: target} }
	long := strings.Repeat("x", 120)
	cases := []struct {
		name    string
		members []Member
		want    string
	}{
		{"none", nil, ""},
		{"zero targets left out", []Member{m("a", 4), m("b", 0), m("c", 2)}, "a=4,c=2"},
		{"first five then a count", []Member{m("a", 1), m("b", 1), m("c", 1), m("d", 1), m("e", 1), m("f", 1), m("g", 1)},
			"a=1,b=1,c=1,d=1,e=1,+2 more"},
		{"long names bounded by length", []Member{m(long+"1", 1), m(long+"2", 1)}, long + "1=1,+1 more"},
	}
	for _, tc := range cases {
		if got := spreadText(tc.members); got != tc.want {
			t.Errorf("%s: spreadText = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestComputeSumsUnschedulableAndSpreadCondition(t *testing.T) {
	st := Compute(Input{
		Desired: 4,
		Members: []Member{
			{Name: "a", Target: 2, Report: &Report{Replicas: 2, Unschedulable: 1}},
			{Name: "b", Target: 2, Report: &Report{Replicas: 2, Unschedulable: 2}},
		},
		SpreadUnsatisfied: []string{"spread by region: too few groups"},
	})
	if st.UnschedulableReplicas != 3 {
		t.Errorf("unschedulableReplicas = %d, want 3", st.UnschedulableReplicas)
	}
	if st.Spread != "a=2,b=2" {
		t.Errorf("spread = %q, want a=2,b=2", st.Spread)
	}
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSpreadUnsatisfied)
	if c == nil || c.Status != metav1.ConditionTrue || c.Message != "spread by region: too few groups" {
		t.Errorf("SpreadUnsatisfied = %+v", c)
	}
	st = Compute(Input{Desired: 4, Previous: st})
	if meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionSpreadUnsatisfied) != nil {
		t.Error("SpreadUnsatisfied kept after the constraint was met")
	}
}

func TestSignificant(t *testing.T) {
	base := func() v1alpha1.FederatedReplicaSetStatus {
		return v1alpha1.FederatedReplicaSetStatus{
			ObservedGeneration: 2, Selector: "app=web", Replicas: 4, ReadyReplicas: 2,
			Clusters: []v1alpha1.ClusterStatus{
				{Name: "a", Target: 2, Health: v1alpha1.ClusterHealthy, Replicas: 2, ReadyReplicas: 1},
				{Name: "b", Target: 2, Health: v1alpha1.ClusterHealthy, Replicas: 2, ReadyReplicas: 1},
			},
			Conditions: []metav1.Condition{
				{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "ReplicasNotAvailable", Message: "2 of 4 replicas available"},
				{Type: v1alpha1.ConditionProgressing, Status: metav1.ConditionTrue, Reason: "MembersConverging", Message: "converging: a, b"},
			},
		}
	}
	tests := []struct {
		name   string
		change func(*v1alpha1.FederatedReplicaSetStatus)
		want   bool
	}{
		{"nothing", func(*v1alpha1.FederatedReplicaSetStatus) {}, false},
		{"counts and their messages", func(s *v1alpha1.FederatedReplicaSetStatus) {
			s.ReadyReplicas, s.Clusters[0].ReadyReplicas = 3, 2
			s.Conditions[0].Message = "3 of 4 replicas available"
			s.Conditions[1].Message = "converging: b"
		}, false},
		{"generation", func(s *v1alpha1.FederatedReplicaSetStatus) { s.ObservedGeneration = 3 }, true},
		{"Ready turns true", func(s *v1alpha1.FederatedReplicaSetStatus) {
			s.Conditions[0].Status, s.Conditions[0].Reason = metav1.ConditionTrue, "ReplicasAvailable"
		}, true},
		{"condition added", func(s *v1alpha1.FederatedReplicaSetStatus) {
			s.Conditions = append(s.Conditions, metav1.Condition{Type: v1alpha1.ConditionReplicaFailure, Status: metav1.ConditionTrue})
		}, true},
		{"target moves", func(s *v1alpha1.FederatedReplicaSetStatus) { s.Clusters[1].Target = 3 }, true},
		{"member unreachable", func(s *v1alpha1.FederatedReplicaSetStatus) { s.Clusters[0].Health = v1alpha1.ClusterUnreachable }, true},
		{"member row added", func(s *v1alpha1.FederatedReplicaSetStatus) {
			s.Clusters = append(s.Clusters, v1alpha1.ClusterStatus{Name: "c"})
		}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			next := base()
			tc.change(&next)
			if got := Significant(base(), next); got != tc.want {
				t.Fatalf("Significant = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTallyAdd(t *testing.T) {
	one := int32(1)
	tests := []struct {
		name                 string
		m                    Member
		wantHealth           v1alpha1.ClusterHealth
		wantMessage          string
		wantProgressing      bool
		wantFailed           int
		wantUnreachable      bool
		wantClusters, wantRs int64
		wantTerminating      bool
	}{
		{name: "no report, no target", m: Member{Name: "a"}, wantHealth: v1alpha1.ClusterHealthUnknown},
		{name: "no report with target converges", m: Member{Name: "a", Target: 2}, wantHealth: v1alpha1.ClusterHealthUnknown,
			wantProgressing: true, wantClusters: 1},
		{name: "at target", m: Member{Name: "a", Target: 2, Health: v1alpha1.ClusterHealthy, Report: rep(2, 2, 2)},
			wantHealth: v1alpha1.ClusterHealthy, wantClusters: 1, wantRs: 2},
		{name: "problem fills empty message", m: Member{Name: "a", Health: v1alpha1.ClusterUnreachable, Problem: "no CRD"},
			wantHealth: v1alpha1.ClusterUnreachable, wantMessage: "no CRD", wantFailed: 1, wantUnreachable: true},
		{name: "report failure and terminating", m: Member{Name: "a", Target: 1, Health: v1alpha1.ClusterHealthy,
			Report: &Report{Replicas: 1, Available: 0, Terminating: &one, Failure: "quota", Time: t0}},
			wantHealth: v1alpha1.ClusterHealthy, wantProgressing: true, wantFailed: 1, wantClusters: 1, wantRs: 1, wantTerminating: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tl tally
			row := tl.add(tc.m)
			if row.Health != tc.wantHealth || row.Message != tc.wantMessage {
				t.Errorf("row health, message = %q, %q; want %q, %q", row.Health, row.Message, tc.wantHealth, tc.wantMessage)
			}
			if got := len(tl.progressing) > 0; got != tc.wantProgressing {
				t.Errorf("progressing = %v, want %v", got, tc.wantProgressing)
			}
			if len(tl.failed) != tc.wantFailed {
				t.Errorf("failed = %q, want %d entries", tl.failed, tc.wantFailed)
			}
			if got := len(tl.unreachable) > 0; got != tc.wantUnreachable {
				t.Errorf("unreachable = %v, want %v", got, tc.wantUnreachable)
			}
			if tl.clusterCount != tc.wantClusters || tl.replicas != tc.wantRs || tl.anyTerminating != tc.wantTerminating {
				t.Errorf("clusterCount, replicas, anyTerminating = %d, %d, %v; want %d, %d, %v",
					tl.clusterCount, tl.replicas, tl.anyTerminating, tc.wantClusters, tc.wantRs, tc.wantTerminating)
			}
			if (tc.m.Report != nil) != (row.LastReportTime != nil) {
				t.Errorf("LastReportTime = %v with report %v", row.LastReportTime, tc.m.Report)
			}
		})
	}
}

func TestConverged(t *testing.T) {
	status := func(gen int64, ready metav1.ConditionStatus) v1alpha1.FederatedReplicaSetStatus {
		st := v1alpha1.FederatedReplicaSetStatus{ObservedGeneration: gen}
		if ready != "" {
			st.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: ready}}
		}
		return st
	}
	tests := []struct {
		name       string
		prev, next v1alpha1.FederatedReplicaSetStatus
		want       bool
	}{
		{"Ready turns true", status(2, metav1.ConditionFalse), status(2, metav1.ConditionTrue), true},
		{"first status, ready", status(0, ""), status(1, metav1.ConditionTrue), true},
		{"stays true, same generation", status(2, metav1.ConditionTrue), status(2, metav1.ConditionTrue), false},
		{"stays true, new generation", status(2, metav1.ConditionTrue), status(3, metav1.ConditionTrue), true},
		{"turns false", status(2, metav1.ConditionTrue), status(2, metav1.ConditionFalse), false},
		{"still false", status(2, metav1.ConditionFalse), status(3, metav1.ConditionFalse), false},
		{"unknown", status(2, metav1.ConditionFalse), status(2, metav1.ConditionUnknown), false},
	}
	for _, tc := range tests {
		if got := Converged(tc.prev, tc.next); got != tc.want {
			t.Errorf("%s: Converged = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSettled(t *testing.T) {
	row := func(target, replicas, ready, available int32) v1alpha1.ClusterStatus {
		return v1alpha1.ClusterStatus{Target: target, Replicas: replicas, ReadyReplicas: ready, AvailableReplicas: available}
	}
	terminating := func(n int32) *int32 { return &n }
	tests := []struct {
		name string
		st   v1alpha1.FederatedReplicaSetStatus
		want bool
	}{
		{"no members", v1alpha1.FederatedReplicaSetStatus{}, true},
		{"all at target", v1alpha1.FederatedReplicaSetStatus{Clusters: []v1alpha1.ClusterStatus{row(3, 3, 3, 3), row(0, 0, 0, 0)}}, true},
		{"above target", v1alpha1.FederatedReplicaSetStatus{Clusters: []v1alpha1.ClusterStatus{row(3, 4, 4, 4)}}, false},
		{"not ready yet", v1alpha1.FederatedReplicaSetStatus{Clusters: []v1alpha1.ClusterStatus{row(3, 3, 2, 2)}}, false},
		{"ready, not available yet", v1alpha1.FederatedReplicaSetStatus{Clusters: []v1alpha1.ClusterStatus{row(3, 3, 3, 1)}}, false},
		{"pods still terminating", v1alpha1.FederatedReplicaSetStatus{TerminatingReplicas: terminating(1), Clusters: []v1alpha1.ClusterStatus{row(3, 3, 3, 3)}}, false},
		{"none terminating", v1alpha1.FederatedReplicaSetStatus{TerminatingReplicas: terminating(0), Clusters: []v1alpha1.ClusterStatus{row(3, 3, 3, 3)}}, true},
	}
	for _, tc := range tests {
		if got := Settled(&tc.st); got != tc.want {
			t.Errorf("%s: Settled = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestFirstProgress(t *testing.T) {
	cond := func(typ string, status metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: "R"}
	}
	progressing := []metav1.Condition{
		cond(v1alpha1.ConditionReady, metav1.ConditionFalse),
		cond(v1alpha1.ConditionPlanned, metav1.ConditionTrue),
		cond(v1alpha1.ConditionProgressing, metav1.ConditionTrue),
	}
	with := func(extra ...metav1.Condition) []metav1.Condition {
		return append(slices.Clone(progressing), extra...)
	}
	tests := []struct {
		name    string
		prevGen int64
		next    []metav1.Condition
		want    bool
	}{
		{"new object, pods being made", 0, progressing, true},
		{"new object, no conditions yet", 0, nil, true},
		{"an earlier generation was observed", 2, progressing, false},
		{"plan failed", 0, []metav1.Condition{cond(v1alpha1.ConditionPlanned, metav1.ConditionFalse)}, false},
		{"not progressing", 0, []metav1.Condition{cond(v1alpha1.ConditionProgressing, metav1.ConditionFalse)}, false},
		{"replica failure", 0, with(cond(v1alpha1.ConditionReplicaFailure, metav1.ConditionTrue)), false},
		{"member unavailable", 0, with(cond(v1alpha1.ConditionClusterUnavailable, metav1.ConditionTrue)), false},
		{"unschedulable", 0, with(cond(v1alpha1.ConditionUnschedulable, metav1.ConditionTrue)), false},
		{"spread unsatisfied", 0, with(cond(v1alpha1.ConditionSpreadUnsatisfied, metav1.ConditionTrue)), false},
		{"any other condition", 0, with(cond("Invalid", metav1.ConditionTrue)), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			prev := v1alpha1.FederatedReplicaSetStatus{ObservedGeneration: tc.prevGen}
			next := v1alpha1.FederatedReplicaSetStatus{ObservedGeneration: 3, Conditions: tc.next}
			if got := FirstProgress(prev, next); got != tc.want {
				t.Errorf("FirstProgress = %v, want %v", got, tc.want)
			}
		})
	}
}
