package v1alpha1

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func goodFRS() *FederatedReplicaSet {
	return &FederatedReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: FederatedReplicaSetSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
			Placement: Placement{
				Clusters: []ClusterPreference{{Name: "member-a", Weight: ptr.To[int32](2), MinReplicas: ptr.To[int32](1), MaxReplicas: ptr.To[int32](5)}},
				ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"eu"}},
					{Key: "retired", Operator: metav1.LabelSelectorOpDoesNotExist},
				}},
				Strategy:          StrategyCostOrdered,
				Mode:              PlacementDivided,
				SpreadConstraints: []SpreadConstraint{{TopologyKey: "topology.kubernetes.io/region", MinGroups: ptr.To[int32](1)}},
				Tolerations: []ClusterToleration{
					{Operator: TolerationExists},
					{Key: "maintenance", Value: "planned", Effect: TaintNoExecute, TolerationSeconds: ptr.To[int64](300)},
				},
			},
			Failover: Failover{
				UnreachableGracePeriod: DurationOf(5 * time.Minute),
				UnschedulableThreshold: ptrTo(Duration("1h30m")),
				MoveBack:               MoveBackOnRecovery,
			},
			MoveBudget:     MoveBudget{MaxSurge: ptr.To(intstr.FromString("25%")), MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			ScaleDown:      &ScaleDown{NodeCost: &NodeCost{Key: "karpenter.sh/capacity-type", Values: []string{"spot", "on-demand"}}},
			DeletionPolicy: DeletionPolicyOrphan,
		},
	}
}

func TestValidateAcceptsValid(t *testing.T) {
	if errs := goodFRS().Validate(); len(errs) > 0 {
		t.Fatalf("valid object: %v", errs.ToAggregate())
	}
	// Unset optional fields are valid too.
	min := &FederatedReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: strings.Repeat("a", 63)},
		Spec: FederatedReplicaSetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}}}}}
	if errs := min.Validate(); len(errs) > 0 {
		t.Fatalf("minimal object: %v", errs.ToAggregate())
	}
}

func TestValidateRefusesEachField(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*FederatedReplicaSet)
		path   string // the field path of the (only) error
		detail string // substring of the error
	}{
		{"long name", func(f *FederatedReplicaSet) { f.Name = strings.Repeat("a", 64) }, "metadata.name", "may not be more than 63"},
		{"replicas above max", func(f *FederatedReplicaSet) { f.Spec.Replicas = ptr.To[int32](MaxReplicas + 1) }, "spec.replicas", "between 0 and 1000000"},
		{"negative replicas", func(f *FederatedReplicaSet) { f.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas", "between"},
		{"minReadySeconds", func(f *FederatedReplicaSet) { f.Spec.MinReadySeconds = 86401 }, "spec.minReadySeconds", "between 0 and 86400"},
		{"no selector", func(f *FederatedReplicaSet) { f.Spec.Selector = nil }, "spec.selector", "Required"},
		{"empty selector", func(f *FederatedReplicaSet) { f.Spec.Selector = &metav1.LabelSelector{} }, "spec.selector", "must not be empty"},
		{"selector operator lowercase", func(f *FederatedReplicaSet) {
			f.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "tier", Operator: "in", Values: []string{"x"}}}
		}, "spec.selector.matchExpressions[0].operator", "not a valid selector operator"},
		{"template labels do not match", func(f *FederatedReplicaSet) { f.Spec.Template.Labels["app"] = "db" }, "spec.template.metadata.labels", "must match spec.selector"},
		{"cluster selector operator lowercase", func(f *FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector.MatchExpressions[0].Operator = "in"
		}, "spec.placement.clusterSelector.matchExpressions[0].operator", "not a valid selector operator"},
		{"cluster selector In without values", func(f *FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector.MatchExpressions[0].Values = nil
		}, "spec.placement.clusterSelector.matchExpressions[0].values", "must be specified"},
		{"cluster selector Exists with values", func(f *FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector.MatchExpressions[1].Values = []string{"x"}
		}, "spec.placement.clusterSelector.matchExpressions[1].values", "may not be specified"},
		{"cluster selector bad label value", func(f *FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector.MatchLabels = map[string]string{"region": "not valid!"}
		}, "spec.placement.clusterSelector.matchLabels", "a valid label must"},
		{"cluster selector too many expressions", func(f *FederatedReplicaSet) {
			for range MaxSelectorExpressions {
				f.Spec.Placement.ClusterSelector.MatchExpressions = append(f.Spec.Placement.ClusterSelector.MatchExpressions,
					metav1.LabelSelectorRequirement{Key: "k", Operator: metav1.LabelSelectorOpExists})
			}
		}, "spec.placement.clusterSelector.matchExpressions", "must have at most 32"},
		{"cluster name", func(f *FederatedReplicaSet) { f.Spec.Placement.Clusters[0].Name = "Member_A" }, "spec.placement.clusters[0].name", "RFC 1123"},
		{"duplicate cluster", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Clusters = append(f.Spec.Placement.Clusters, ClusterPreference{Name: "member-a"})
		}, "spec.placement.clusters[1].name", "Duplicate"},
		{"weight", func(f *FederatedReplicaSet) { f.Spec.Placement.Clusters[0].Weight = ptr.To[int32](-1) }, "spec.placement.clusters[0].weight", "between 0 and 1000000"},
		{"minReplicas", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Clusters[0].MinReplicas = ptr.To[int32](MaxReplicas + 1)
			f.Spec.Placement.Clusters[0].MaxReplicas = nil
		}, "spec.placement.clusters[0].minReplicas", "between"},
		{"maxReplicas", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Clusters[0].MaxReplicas = ptr.To[int32](-1)
			f.Spec.Placement.Clusters[0].MinReplicas = nil
		}, "spec.placement.clusters[0].maxReplicas", "between"},
		{"min above max", func(f *FederatedReplicaSet) { f.Spec.Placement.Clusters[0].MinReplicas = ptr.To[int32](6) }, "spec.placement.clusters[0]", "minReplicas must not exceed maxReplicas"},
		{"deletionCost", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Clusters[0].DeletionCost = ptr.To[int32](MaxDeletionCost + 1)
		}, "spec.placement.clusters[0].deletionCost", "between"},
		{"strategy", func(f *FederatedReplicaSet) { f.Spec.Placement.Strategy = "weighted" }, "spec.placement.strategy", "Unsupported value"},
		{"mode", func(f *FederatedReplicaSet) { f.Spec.Placement.Mode = "Mirrored" }, "spec.placement.mode", "Unsupported value"},
		{"topologyKey", func(f *FederatedReplicaSet) { f.Spec.Placement.SpreadConstraints[0].TopologyKey = "bad key" }, "spec.placement.spreadConstraints[0].topologyKey", "name part"},
		{"minGroups", func(f *FederatedReplicaSet) { f.Spec.Placement.SpreadConstraints[0].MinGroups = ptr.To[int32](0) }, "spec.placement.spreadConstraints[0].minGroups", "between 1 and 1000"},
		{"too many spread constraints", func(f *FederatedReplicaSet) {
			for _, k := range []string{"a", "b", "c", "d"} {
				f.Spec.Placement.SpreadConstraints = append(f.Spec.Placement.SpreadConstraints, SpreadConstraint{TopologyKey: k})
			}
		}, "spec.placement.spreadConstraints", "must have at most 4"},
		{"toleration operator", func(f *FederatedReplicaSet) { f.Spec.Placement.Tolerations[1].Operator = "equal" }, "spec.placement.tolerations[1].operator", "Unsupported value"},
		{"toleration effect", func(f *FederatedReplicaSet) { f.Spec.Placement.Tolerations[0].Effect = "PreferNoSchedule" }, "spec.placement.tolerations[0].effect", "Unsupported value"},
		{"tolerationSeconds huge", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Tolerations[1].TolerationSeconds = ptr.To[int64](1 << 62)
		}, "spec.placement.tolerations[1].tolerationSeconds", "between 0 and 315360000"},
		{"tolerationSeconds without NoExecute", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Tolerations[1].Effect = TaintNoSchedule
		}, "spec.placement.tolerations[1].tolerationSeconds", "requires effect NoExecute"},
		{"toleration Exists with value", func(f *FederatedReplicaSet) { f.Spec.Placement.Tolerations[0].Value = "x" }, "spec.placement.tolerations[0].value", "must be empty when operator is Exists"},
		{"toleration Equal without key", func(f *FederatedReplicaSet) {
			f.Spec.Placement.Tolerations[1].Key = ""
		}, "spec.placement.tolerations[1].key", "an empty key requires operator Exists"},
		{"grace 3d", func(f *FederatedReplicaSet) { f.Spec.Failover.UnreachableGracePeriod = ptrTo(Duration("3d")) }, "spec.failover.unreachableGracePeriod", "no unit for days"},
		{"grace above max", func(f *FederatedReplicaSet) { f.Spec.Failover.UnreachableGracePeriod = ptrTo(Duration("800h")) }, "spec.failover.unreachableGracePeriod", "at most 720h"},
		{"threshold number", func(f *FederatedReplicaSet) { f.Spec.Failover.UnschedulableThreshold = ptrTo(Duration("60")) }, "spec.failover.unschedulableThreshold", "must be a duration"},
		{"moveBack", func(f *FederatedReplicaSet) { f.Spec.Failover.MoveBack = "Always" }, "spec.failover.moveBack", "Unsupported value"},
		{"maxSurge percent", func(f *FederatedReplicaSet) { f.Spec.MoveBudget.MaxSurge = ptr.To(intstr.FromString("lots")) }, "spec.moveBudget.maxSurge", "percentage from 0% to 999%"},
		{"maxSurge int", func(f *FederatedReplicaSet) { f.Spec.MoveBudget.MaxSurge = ptr.To(intstr.FromInt32(-1)) }, "spec.moveBudget.maxSurge", "between 0 and 1000000"},
		{"maxUnavailable percent", func(f *FederatedReplicaSet) { f.Spec.MoveBudget.MaxUnavailable = ptr.To(intstr.FromString("101%")) }, "spec.moveBudget.maxUnavailable", "percentage from 0% to 100%"},
		{"deletionPolicy", func(f *FederatedReplicaSet) { f.Spec.DeletionPolicy = "delete" }, "spec.deletionPolicy", "Unsupported value"},
		{"nodeCost both forms", func(f *FederatedReplicaSet) { f.Spec.ScaleDown.NodeCost.Integer = true }, "spec.scaleDown.nodeCost", "exactly one of values or integer"},
		{"nodeCost key", func(f *FederatedReplicaSet) { f.Spec.ScaleDown.NodeCost.Key = "bad key" }, "spec.scaleDown.nodeCost.key", "name part"},
		{"nodeCost value", func(f *FederatedReplicaSet) { f.Spec.ScaleDown.NodeCost.Values[1] = "on demand" }, "spec.scaleDown.nodeCost.values[1]", "a valid label must"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := goodFRS()
			c.mutate(f)
			errs := f.Validate()
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), errs.ToAggregate())
			}
			if got := errs[0].Field; !strings.HasPrefix(got, c.path) {
				t.Errorf("error on %q, want %q", got, c.path)
			}
			if !strings.Contains(errs[0].Error(), c.detail) {
				t.Errorf("error %q does not say %q", errs[0].Error(), c.detail)
			}
		})
	}
}

// Every problem is reported, not only the first.
func TestValidateReportsAll(t *testing.T) {
	f := goodFRS()
	f.Spec.Failover.UnreachableGracePeriod = ptrTo(Duration("3d"))
	f.Spec.Failover.UnschedulableThreshold = ptrTo(Duration("1w"))
	f.Spec.Placement.ClusterSelector.MatchExpressions[0].Operator = "in"
	errs := f.Validate()
	var fields []string
	for _, e := range errs {
		fields = append(fields, e.Field)
	}
	want := []string{"spec.placement.clusterSelector.matchExpressions[0].operator", "spec.failover.unreachableGracePeriod", "spec.failover.unschedulableThreshold"}
	if strings.Join(fields, " ") != strings.Join(want, " ") {
		t.Fatalf("errors on %v, want %v", fields, want)
	}
}

func rollingFRS() *FederatedReplicaSet {
	f := goodFRS()
	f.Spec.UpdateStrategy = &UpdateStrategy{
		Type:                    UpdateRolling,
		OnFailure:               FailureRollback,
		ProgressDeadlineSeconds: ptr.To[int32](600),
		RevisionHistoryLimit:    ptr.To[int32](10),
		Stages: []RolloutStage{
			{Name: "canary", Clusters: []string{"member-c"}, Canary: ptr.To(intstr.FromInt32(1)), BakeTime: ptrTo(Duration("10m")), Promotion: PromotionManual},
			{Name: "eu", ClusterSelector: &ClusterLabelSelector{MatchLabels: map[string]string{"region": "eu"}}, Canary: ptr.To(intstr.FromString("50%"))},
			{Name: "rest"},
		},
	}
	return f
}

func TestValidateUpdateStrategy(t *testing.T) {
	if errs := rollingFRS().Validate(); len(errs) > 0 {
		t.Fatalf("valid rolling object: %v", errs.ToAggregate())
	}
	rs := goodFRS()
	rs.Spec.UpdateStrategy = &UpdateStrategy{Type: UpdateReplicaSet, RevisionHistoryLimit: ptr.To[int32](10), OnFailure: FailurePause}
	if errs := rs.Validate(); len(errs) > 0 {
		t.Fatalf("type ReplicaSet with defaulted fields: %v", errs.ToAggregate())
	}
	cases := []struct {
		name   string
		mutate func(*FederatedReplicaSet)
		path   string
		detail string
	}{
		{"type", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Type = "rolling" }, "spec.updateStrategy.type", "Unsupported value"},
		{"onFailure", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.OnFailure = "Abort" }, "spec.updateStrategy.onFailure", "Unsupported value"},
		{"deadline zero", func(f *FederatedReplicaSet) {
			f.Spec.MinReadySeconds = 0
			f.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](0)
		}, "spec.updateStrategy.progressDeadlineSeconds", "between 1 and 2592000"},
		{"deadline not above minReadySeconds", func(f *FederatedReplicaSet) { f.Spec.MinReadySeconds = 600 }, "spec.updateStrategy.progressDeadlineSeconds", "greater than minReadySeconds"},
		{"default deadline not above minReadySeconds", func(f *FederatedReplicaSet) {
			f.Spec.MinReadySeconds = 900
			f.Spec.UpdateStrategy.ProgressDeadlineSeconds = nil
		}, "spec.updateStrategy.progressDeadlineSeconds", "greater than minReadySeconds"},
		{"history", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.RevisionHistoryLimit = ptr.To[int32](-1) }, "spec.updateStrategy.revisionHistoryLimit", "between 0 and 1000"},
		{"stages with ReplicaSet", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Type = UpdateReplicaSet }, "spec.updateStrategy.stages", "stages need type Rolling"},
		{"paused with ReplicaSet", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Type = ""
			f.Spec.UpdateStrategy.Stages = nil
			f.Spec.UpdateStrategy.Paused = true
		}, "spec.updateStrategy.paused", "paused needs type Rolling"},
		{"both budgets zero", func(f *FederatedReplicaSet) {
			f.Spec.MoveBudget = MoveBudget{MaxSurge: ptr.To(intstr.FromString("0%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}, "spec.moveBudget", "must not both be 0"},
		{"surge zero, unavailable unset", func(f *FederatedReplicaSet) {
			f.Spec.MoveBudget = MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(0))}
		}, "spec.moveBudget", "must not both be 0"},
		{"stage name", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].Name = "Canary" }, "spec.updateStrategy.stages[0].name", "DNS label"},
		{"duplicate stage", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[1].Name = "canary" }, "spec.updateStrategy.stages[1].name", "Duplicate"},
		{"stage cluster name", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].Clusters = []string{"Member_C"} }, "spec.updateStrategy.stages[0].clusters[0]", "RFC 1123"},
		{"duplicate stage cluster", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].Clusters = []string{"a", "a"}
		}, "spec.updateStrategy.stages[0].clusters[1]", "Duplicate"},
		{"stage selector", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].ClusterSelector.MatchExpressions = []ClusterSelectorRequirement{{Key: "region", Operator: "in", Values: []string{"eu"}}}
		}, "spec.updateStrategy.stages[1].clusterSelector.matchExpressions[0].operator", "not a valid selector operator"},
		{"canary without members", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[2].Canary = ptr.To(intstr.FromInt32(2))
		}, "spec.updateStrategy.stages[2].canary", "needs clusters or clusterSelector"},
		{"canary zero", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].Canary = ptr.To(intstr.FromInt32(0)) }, "spec.updateStrategy.stages[0].canary", "between 1 and 1000000"},
		{"canary 0%", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("0%")) }, "spec.updateStrategy.stages[1].canary", "percentage from 1% to 100%"},
		{"canary 101%", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("101%"))
		}, "spec.updateStrategy.stages[1].canary", "percentage from 1% to 100%"},
		{"canary text", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("half"))
		}, "spec.updateStrategy.stages[1].canary", "percentage"},
		{"bake time", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].BakeTime = ptrTo(Duration("1d")) }, "spec.updateStrategy.stages[0].bakeTime", "no unit for days"},
		{"promotion", func(f *FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].Promotion = "manual" }, "spec.updateStrategy.stages[0].promotion", "Unsupported value"},
		{"memberless stage before the last", func(f *FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages = append(f.Spec.UpdateStrategy.Stages, RolloutStage{Name: "after", Clusters: []string{"x"}})
		}, "spec.updateStrategy.stages[2]", "only the last stage may leave out"},
		{"too many stages", func(f *FederatedReplicaSet) {
			var st []RolloutStage
			for i := range MaxStages + 1 {
				st = append(st, RolloutStage{Name: fmt.Sprintf("s%d", i), Clusters: []string{"a"}})
			}
			f.Spec.UpdateStrategy.Stages = st
		}, "spec.updateStrategy.stages", "must have at most 16"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := rollingFRS()
			c.mutate(f)
			errs := f.Validate()
			if len(errs) != 1 {
				t.Fatalf("got %d errors, want 1: %v", len(errs), errs.ToAggregate())
			}
			if got := errs[0].Field; got != c.path {
				t.Errorf("error on %q, want %q", got, c.path)
			}
			if !strings.Contains(errs[0].Error(), c.detail) {
				t.Errorf("error %q does not say %q", errs[0].Error(), c.detail)
			}
		})
	}
}
