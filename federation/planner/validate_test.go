package planner

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

func TestCheck(t *testing.T) {
	type fr = struct{ Field, Reason string }
	sel := func(reqs ...metav1.LabelSelectorRequirement) func(*v1alpha1.FederatedReplicaSetSpec) {
		return func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: reqs}
		}
	}
	tol := func(ts ...v1alpha1.ClusterToleration) func(*v1alpha1.FederatedReplicaSetSpec) {
		return func(s *v1alpha1.FederatedReplicaSetSpec) { s.Placement.Tolerations = ts }
	}
	cases := []struct {
		name string
		mod  func(*v1alpha1.FederatedReplicaSetSpec)
		want []fr
	}{
		{name: "empty spec is valid", mod: func(*v1alpha1.FederatedReplicaSetSpec) {}},
		{name: "a full valid spec", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Replicas = ptr[int32](0)
			s.Placement = v1alpha1.Placement{
				Clusters:          []v1alpha1.ClusterPreference{{Name: "a", Weight: ptr[int32](0), MinReplicas: ptr[int32](1), MaxReplicas: ptr[int32](1)}},
				ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}, MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"spot"}}, {Key: "x", Operator: metav1.LabelSelectorOpExists}}},
				Strategy:          v1alpha1.StrategyCostOrdered,
				Mode:              v1alpha1.PlacementDuplicated,
				SpreadConstraints: []v1alpha1.SpreadConstraint{{TopologyKey: "topology.kubernetes.io/region", MinGroups: ptr[int32](2), MaxGroups: ptr[int32](2)}},
				Tolerations:       []v1alpha1.ClusterToleration{{Operator: v1alpha1.TolerationExists}, {Key: "k", Value: "v", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr[int64](0)}},
			}
			s.Failover = v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(0), MoveBack: v1alpha1.MoveBackOnRecovery}
			s.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr(intstr.FromString("50%")), MaxUnavailable: ptr(intstr.FromInt32(0))}
		}},
		{name: "lowercase in (issue 24)", mod: sel(metav1.LabelSelectorRequirement{Key: "region", Operator: "in", Values: []string{"eu"}}),
			want: []fr{{"spec.placement.clusterSelector.matchExpressions[0].operator", ReasonInvalidClusterSelector}}},
		{name: "In without values", mod: sel(metav1.LabelSelectorRequirement{Key: "region", Operator: metav1.LabelSelectorOpIn}),
			want: []fr{{"spec.placement.clusterSelector.matchExpressions[0].values", ReasonInvalidClusterSelector}}},
		{name: "Exists with values", mod: sel(metav1.LabelSelectorRequirement{Key: "ok", Operator: metav1.LabelSelectorOpIn, Values: []string{"x"}},
			metav1.LabelSelectorRequirement{Key: "region", Operator: metav1.LabelSelectorOpExists, Values: []string{"eu"}}),
			want: []fr{{"spec.placement.clusterSelector.matchExpressions[1].values", ReasonInvalidClusterSelector}}},
		{name: "bad key and value", mod: sel(metav1.LabelSelectorRequirement{Key: "a b", Operator: metav1.LabelSelectorOpIn, Values: []string{"-x-"}}),
			want: []fr{{"spec.placement.clusterSelector.matchExpressions[0].key", ReasonInvalidClusterSelector}, {"spec.placement.clusterSelector.matchExpressions[0].values[0]", ReasonInvalidClusterSelector}}},
		{name: "bad matchLabels value", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu west"}}
		}, want: []fr{{"spec.placement.clusterSelector.matchLabels", ReasonInvalidClusterSelector}}},
		{name: "negative replicas", mod: func(s *v1alpha1.FederatedReplicaSetSpec) { s.Replicas = ptr[int32](-1) },
			want: []fr{{"spec.replicas", ReasonInvalidReplicas}}},
		{name: "preferences", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", Weight: ptr[int32](-1)}, {MinReplicas: ptr[int32](3), MaxReplicas: ptr[int32](2)}}
		}, want: []fr{{"spec.placement.clusters[0].weight", ReasonInvalidPlacement}, {"spec.placement.clusters[1].name", ReasonInvalidPlacement}, {"spec.placement.clusters[1]", ReasonInvalidPlacement}}},
		{name: "lowercase strategy and mode", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Placement.Strategy, s.Placement.Mode = "weighted", "duplicated"
		}, want: []fr{{"spec.placement.strategy", ReasonInvalidPlacement}, {"spec.placement.mode", ReasonInvalidPlacement}}},
		{name: "spread", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "", MinGroups: ptr[int32](0)}, {TopologyKey: "r", MinGroups: ptr[int32](3), MaxGroups: ptr[int32](2)}}
		}, want: []fr{{"spec.placement.spreadConstraints[0].topologyKey", ReasonInvalidPlacement}, {"spec.placement.spreadConstraints[0].minGroups", ReasonInvalidPlacement}, {"spec.placement.spreadConstraints[1]", ReasonInvalidPlacement}}},
		{name: "lowercase toleration operator and effect", mod: tol(v1alpha1.ClusterToleration{Key: "k", Operator: "exists", Effect: "noexecute"}),
			want: []fr{{"spec.placement.tolerations[0].operator", ReasonInvalidToleration}, {"spec.placement.tolerations[0].effect", ReasonInvalidToleration}}},
		{name: "toleration key and value rules", mod: tol(v1alpha1.ClusterToleration{Value: "v"}, v1alpha1.ClusterToleration{Key: "k", Operator: v1alpha1.TolerationExists, Value: "v"}),
			want: []fr{{"spec.placement.tolerations[0].key", ReasonInvalidToleration}, {"spec.placement.tolerations[1].value", ReasonInvalidToleration}}},
		{name: "negative tolerationSeconds", mod: tol(v1alpha1.ClusterToleration{Key: "k", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr[int64](-1)}),
			want: []fr{{"spec.placement.tolerations[0].tolerationSeconds", ReasonInvalidToleration}}},
		{name: "negative durations and unknown moveBack", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.Failover = v1alpha1.Failover{UnreachableGracePeriod: v1alpha1.DurationOf(-time.Second),
				UnschedulableThreshold: v1alpha1.DurationOf(-time.Minute), MoveBack: "onRecovery"}
		}, want: []fr{{"spec.failover.unreachableGracePeriod", ReasonInvalidDuration}, {"spec.failover.unschedulableThreshold", ReasonInvalidDuration}, {"spec.failover.moveBack", ReasonInvalidFailover}}},
		{name: "durations that do not parse (issue 24: 3d)", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			bad, empty := v1alpha1.Duration("3d"), v1alpha1.Duration("")
			s.Failover = v1alpha1.Failover{UnreachableGracePeriod: &bad, UnschedulableThreshold: &empty}
		}, want: []fr{{"spec.failover.unreachableGracePeriod", ReasonInvalidDuration}, {"spec.failover.unschedulableThreshold", ReasonInvalidDuration}}},
		{name: "move budget text", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr(intstr.FromString("lots")), MaxUnavailable: ptr(intstr.FromString("-5%"))}
		}, want: []fr{{"spec.moveBudget.maxSurge", ReasonInvalidMoveBudget}, {"spec.moveBudget.maxUnavailable", ReasonInvalidMoveBudget}}},
		{name: "move budget bare number as text and negative int", mod: func(s *v1alpha1.FederatedReplicaSetSpec) {
			s.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr(intstr.FromString("5")), MaxUnavailable: ptr(intstr.FromInt32(-1))}
		}, want: []fr{{"spec.moveBudget.maxSurge", ReasonInvalidMoveBudget}, {"spec.moveBudget.maxUnavailable", ReasonInvalidMoveBudget}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := &v1alpha1.FederatedReplicaSetSpec{Replicas: ptr[int32](3)}
			tc.mod(spec)
			var got []fr
			for _, p := range Check(spec) {
				if p.Message == "" {
					t.Errorf("problem at %s has no message", p.Field)
				}
				got = append(got, fr{p.Field, p.Reason})
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("Check problems (-want +got):\n%s", diff)
			}
		})
	}
}

// Everything Check accepts, Plan takes as written: no selector error and
// no fallback note.
func TestCheckedSpecPlansWithoutFallbacks(t *testing.T) {
	spec := v1alpha1.FederatedReplicaSetSpec{
		Replicas: ptr[int32](4),
		Placement: v1alpha1.Placement{ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"eu"}}}}},
		Failover:   v1alpha1.Failover{MoveBack: v1alpha1.MoveBackOnRecovery},
		MoveBudget: v1alpha1.MoveBudget{MaxSurge: ptr(intstr.FromString("50%"))},
	}
	if p := Check(&spec); p != nil {
		t.Fatalf("Check = %v, want none", p)
	}
	members := healthy("a", "b")
	for i := range members {
		members[i].Labels = map[string]string{"region": "eu"}
	}
	r := Plan(Input{UID: "u", Replicas: *spec.Replicas, Placement: spec.Placement, Failover: spec.Failover, MoveBudget: spec.MoveBudget, Now: now, Members: members})
	if r.SelectorError != nil || len(r.Notes) != 0 {
		t.Fatalf("selector error %v, notes %q", r.SelectorError, r.Notes)
	}
}

// A value of any length is quoted short: messages stay bounded.
func TestCheckQuotesShort(t *testing.T) {
	spec := &v1alpha1.FederatedReplicaSetSpec{Placement: v1alpha1.Placement{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOperator(strings.Repeat("x", 100000))}}}}}
	p := Check(spec)
	if len(p) != 1 || len(p[0].Message) > 200 {
		t.Fatalf("problems %d, message of %d bytes", len(p), len(p[0].Message))
	}
	for _, tc := range []struct{ in, want string }{
		{"short", "short"},
		{strings.Repeat("a", 64), strings.Repeat("a", 64)},
		{strings.Repeat("a", 65), strings.Repeat("a", 61) + "..."},
		{strings.Repeat("é", 40), strings.Repeat("é", 30) + "..."},
	} {
		if got := short(tc.in); got != tc.want {
			t.Errorf("short(%d bytes) = %q, want %q", len(tc.in), got, tc.want)
		}
	}
}

func TestReasonFor(t *testing.T) {
	for _, tc := range []struct {
		path   string
		reason string
		ok     bool
	}{
		{"spec.replicas", ReasonInvalidReplicas, true},
		{"spec.placement.clusterSelector.matchExpressions[0].operator", ReasonInvalidClusterSelector, true},
		{"spec.placement.tolerations[2].effect", ReasonInvalidToleration, true},
		{"spec.placement.clusters[0]", ReasonInvalidPlacement, true},
		{"spec.failover.moveBack", ReasonInvalidFailover, true},
		{"spec.failover.unreachableGracePeriod", ReasonInvalidDuration, true},
		{"spec.moveBudget.maxSurge", ReasonInvalidMoveBudget, true},
		// Fields Plan does not read, and prefixes that only look alike.
		{"spec.selector", "", false},
		{"spec.minReadySeconds", "", false},
		{"spec.replicasExtra", "", false},
		{"metadata.name", "", false},
	} {
		reason, ok := ReasonFor(tc.path)
		if reason != tc.reason || ok != tc.ok {
			t.Errorf("ReasonFor(%q) = %q, %v; want %q, %v", tc.path, reason, ok, tc.reason, tc.ok)
		}
	}
}
