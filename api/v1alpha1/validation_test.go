package v1alpha1_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

func validFRS(name string) *v1alpha1.FederatedReplicaSet {
	return builder.FRS("default", name).NoReplicas().
		Selector(&metav1.LabelSelector{
			MatchLabels: map[string]string{"app": "web"},
			MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "tier", Operator: metav1.LabelSelectorOpIn, Values: []string{"frontend", "edge"}},
				{Key: "canary", Operator: metav1.LabelSelectorOpDoesNotExist},
			},
		}).
		TemplateLabels(map[string]string{"app": "web", "tier": "frontend"}).
		PodSpec(corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}).Obj()
}

// installSelectorPolicy installs the admission policy and waits until the API
// server enforces it (policies reach the admission plugin through an informer).
func installSelectorPolicy(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	pol, bind, err := policy.Selector()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, pol); err != nil {
		t.Fatalf("creating admission policy: %v", err)
	}
	if err := c.Create(ctx, bind); err != nil {
		t.Fatalf("creating admission policy binding: %v", err)
	}
	probe := validFRS("policy-probe")
	probe.Spec.Template.Labels["app"] = "other"
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Create(ctx, probe.DeepCopy())
		if err == nil {
			// Not enforced yet: remove the object and try again.
			return false, c.Delete(ctx, probe.DeepCopy())
		}
		return strings.Contains(err.Error(), "must match"), nil
	})
	if err != nil {
		t.Fatalf("admission policy never enforced: %v", err)
	}
}

func TestFederatedReplicaSetValidation(t *testing.T) {
	hub, c, ctx := startHub(t, "crd-hub")
	installSelectorPolicy(ctx, t, c)

	t.Run("defaults", func(t *testing.T) {
		frs := validFRS("defaults")
		frs.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a"}, {Name: "b", Weight: ptr.To[int32](3)}}
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("valid object refused: %v", err)
		}
		got := &v1alpha1.FederatedReplicaSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		s := got.Spec
		if s.Replicas == nil || *s.Replicas != 1 {
			t.Errorf("replicas default = %v, want 1", s.Replicas)
		}
		if s.Placement.Strategy != v1alpha1.StrategyWeighted {
			t.Errorf("strategy default = %q, want Weighted", s.Placement.Strategy)
		}
		if s.Placement.Mode != v1alpha1.PlacementDivided {
			t.Errorf("mode default = %q, want Divided", s.Placement.Mode)
		}
		if w := s.Placement.Clusters[0].Weight; w == nil || *w != 1 {
			t.Errorf("weight default = %v, want 1", w)
		}
		if w := s.Placement.Clusters[1].Weight; w == nil || *w != 3 {
			t.Errorf("explicit weight = %v, want 3", w)
		}
		// Failover fields stay unset: the controller's configuration supplies them.
		if d := s.Failover.UnreachableGracePeriod; d != nil {
			t.Errorf("unreachableGracePeriod defaulted to %v, want unset", d)
		}
		if s.Failover.MoveBack != "" {
			t.Errorf("moveBack defaulted to %q, want unset", s.Failover.MoveBack)
		}
		if m := s.MoveBudget.MaxSurge; m == nil || m.String() != "25%" {
			t.Errorf("maxSurge default = %v, want 25%%", m)
		}
		if m := s.MoveBudget.MaxUnavailable; m == nil || m.IntValue() != 0 {
			t.Errorf("maxUnavailable default = %v, want 0", m)
		}
		if s.DeletionPolicy != v1alpha1.DeletionPolicyDelete {
			t.Errorf("deletionPolicy default = %q, want Delete", s.DeletionPolicy)
		}
		// Optional and not defaulted: objects that do not set it are stored
		// and served without it.
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FederatedReplicaSet"))
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), raw); err != nil {
			t.Fatal(err)
		}
		if v, found, _ := unstructured.NestedFieldNoCopy(raw.Object, "spec", "propagateDependencies"); found {
			t.Errorf("propagateDependencies defaulted to %v, want absent", v)
		}
	})

	t.Run("every strategy accepted", func(t *testing.T) {
		for _, st := range []v1alpha1.PlacementStrategy{v1alpha1.StrategyWeighted, v1alpha1.StrategyAvailableCapacity,
			v1alpha1.StrategyCostOrdered, v1alpha1.StrategyPacked} {
			frs := validFRS("strategy-" + strings.ToLower(string(st)))
			frs.Spec.Placement.Strategy = st
			if err := c.Create(ctx, frs); err != nil {
				t.Errorf("strategy %s refused: %v", st, err)
			}
		}
	})

	t.Run("propagateDependencies accepted", func(t *testing.T) {
		frs := validFRS("with-dependencies")
		frs.Spec.PropagateDependencies = true
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("refused: %v", err)
		}
		got := &v1alpha1.FederatedReplicaSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil || !got.Spec.PropagateDependencies {
			t.Fatalf("propagateDependencies not stored: %v %v", err, got.Spec.PropagateDependencies)
		}
		got.Spec.PropagateDependencies = false
		if err := c.Update(ctx, got); err != nil {
			t.Fatalf("turning it off refused: %v", err)
		}
	})

	cases := []struct {
		name   string
		mutate func(*v1alpha1.FederatedReplicaSet)
		want   string
	}{
		{"labels do not match matchLabels", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Template.Labels["app"] = "db"
		}, "spec.selector.matchLabels must match spec.template.metadata.labels"},
		{"template without labels", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Template.Labels = nil
		}, "must match spec.template.metadata.labels"},
		{"In expression not satisfied", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Template.Labels["tier"] = "backend"
		}, "spec.selector.matchExpressions must match spec.template.metadata.labels"},
		{"DoesNotExist expression violated", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Template.Labels["canary"] = "true"
		}, "spec.selector.matchExpressions must match spec.template.metadata.labels"},
		{"NotIn expression violated", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Selector.MatchExpressions = append(f.Spec.Selector.MatchExpressions,
				metav1.LabelSelectorRequirement{Key: "app", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"web"}})
		}, "spec.selector.matchExpressions must match spec.template.metadata.labels"},
		{"empty selector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Selector = &metav1.LabelSelector{}
		}, "selector must not be empty"},
		{"negative replicas", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Replicas = ptr.To[int32](-1)
		}, "spec.replicas"},
		{"negative weight", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", Weight: ptr.To[int32](-2)}}
		}, "weight"},
		{"negative deletion cost", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", DeletionCost: ptr.To[int32](-5)}}
		}, "deletionCost"},
		{"min above max", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", MinReplicas: ptr.To[int32](3), MaxReplicas: ptr.To[int32](2)}}
		}, "minReplicas must not exceed maxReplicas"},
		{"duplicate cluster names", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a"}, {Name: "b"}, {Name: "a"}}
		}, "Duplicate value"},
		{"unknown strategy", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Strategy = "Random"
		}, "Unsupported value"},
		{"unknown move-back policy", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.MoveBack = "Sometimes"
		}, "Unsupported value"},
		{"unknown deletion policy", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.DeletionPolicy = "Keep"
		}, "Unsupported value"},
		{"negative minReadySeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MinReadySeconds = -3
		}, "minReadySeconds"},
		{"unknown mode", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Mode = "Mirrored"
		}, "Unsupported value"},
		{"minGroups above maxGroups", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "region", MinGroups: ptr.To[int32](3), MaxGroups: ptr.To[int32](2)}}
		}, "minGroups must not exceed maxGroups"},
		{"zero minGroups", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "region", MinGroups: ptr.To[int32](0)}}
		}, "minGroups"},
		{"topology key not a label key", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "bad key!"}}
		}, "topologyKey"},
		{"duplicate topology keys", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.SpreadConstraints = []v1alpha1.SpreadConstraint{{TopologyKey: "region"}, {TopologyKey: "region"}}
		}, "Duplicate value"},
		{"unknown toleration operator", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Operator: "Lt", Value: "1"}}
		}, "Unsupported value"},
		{"unknown taint effect", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Effect: "PreferNoSchedule"}}
		}, "Unsupported value"},
		{"Exists with a value", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Operator: v1alpha1.TolerationExists, Value: "v"}}
		}, "value must be empty when operator is Exists"},
		{"empty key with Equal", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Value: "v"}}
		}, "an empty key requires operator Exists"},
		{"tolerationSeconds without NoExecute", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Effect: v1alpha1.TaintNoSchedule, TolerationSeconds: ptr.To[int64](30)}}
		}, "tolerationSeconds requires effect NoExecute"},
		{"negative tolerationSeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](-1)}}
		}, "tolerationSeconds"},
		{"nodeCost with neither form", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.ScaleDown = &v1alpha1.ScaleDown{NodeCost: &v1alpha1.NodeCost{Key: "karpenter.sh/capacity-type"}}
		}, "exactly one of values or integer: true must be set"},
		{"nodeCost with both forms", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.ScaleDown = &v1alpha1.ScaleDown{NodeCost: &v1alpha1.NodeCost{Key: "k", Values: []string{"spot"}, Integer: true}}
		}, "exactly one of values or integer: true must be set"},
		{"nodeCost key not a label key", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.ScaleDown = &v1alpha1.ScaleDown{NodeCost: &v1alpha1.NodeCost{Key: "bad key!", Integer: true}}
		}, "key"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			frs := validFRS("bad-" + strings.ReplaceAll(strings.ToLower(tc.name), " ", "-"))
			_ = i
			tc.mutate(frs)
			err := c.Create(ctx, frs)
			if err == nil {
				t.Fatalf("invalid object accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}

	// Each field's bound: the refusal names the field (the API server puts
	// the field path before the message).
	bounds := []struct {
		field  string
		mutate func(*v1alpha1.FederatedReplicaSet)
		want   string
	}{
		{"metadata.name", func(f *v1alpha1.FederatedReplicaSet) { f.Name = strings.Repeat("n", 64) }, "metadata.name must be at most 63 characters"},
		{"spec.replicas", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.Replicas = ptr.To[int32](1000001) }, "should be less than or equal to 1000000"},
		{"spec.minReadySeconds", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.MinReadySeconds = 86401 }, "should be less than or equal to 86400"},
		{"spec.failover.unreachableGracePeriod", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnreachableGracePeriod = dur("3d")
		}, "must be a duration such as 90s, 5m or 1h30m"},
		{"spec.failover.unreachableGracePeriod", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnreachableGracePeriod = dur("721h")
		}, "must be at most 720h"},
		{"spec.failover.unreachableGracePeriod", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnreachableGracePeriod = dur("-5s")
		}, "must be a duration"},
		{"spec.failover.unschedulableThreshold", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnschedulableThreshold = dur("60")
		}, "must be a duration"},
		{"spec.failover.unschedulableThreshold", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnschedulableThreshold = dur("9999999999999999999h")
		}, "must be a duration"},
		{"spec.failover.unschedulableThreshold", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Failover.UnschedulableThreshold = dur(strings.Repeat("1s", 33))
		}, "Too long"},
		{"spec.selector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Selector.MatchExpressions[0].Operator = "in"
		}, "operator must be In, NotIn, Exists or DoesNotExist"},
		{"spec.placement.clusterSelector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "in", Values: []string{"eu"}}}}
		}, "operator must be In, NotIn, Exists or DoesNotExist"},
		{"spec.placement.clusterSelector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "In"}}}
		}, "with operator In or NotIn need values"},
		{"spec.placement.clusterSelector", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Exists", Values: []string{"eu"}}}}
		}, "with operator Exists or DoesNotExist take no values"},
		{"spec.placement.clusterSelector", func(f *v1alpha1.FederatedReplicaSet) {
			sel := &metav1.LabelSelector{}
			for i := range 33 {
				sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{Key: fmt.Sprintf("k%d", i), Operator: "Exists"})
			}
			f.Spec.Placement.ClusterSelector = sel
		}, "matchExpressions must have at most 32 items"},
		{"spec.placement.clusters[0].name", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "Member_A"}}
		}, "should match"},
		{"spec.placement.clusters[0].minReplicas", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", MinReplicas: ptr.To[int32](1000001)}}
		}, "should be less than or equal to 1000000"},
		{"spec.placement.clusters[0].maxReplicas", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", MaxReplicas: ptr.To[int32](1000001)}}
		}, "should be less than or equal to 1000000"},
		{"spec.placement.clusters[0].weight", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", Weight: ptr.To[int32](1000001)}}
		}, "should be less than or equal to 1000000"},
		{"spec.placement.clusters[0].deletionCost", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a", DeletionCost: ptr.To[int32](1000001)}}
		}, "should be less than or equal to 1000000"},
		{"spec.placement.tolerations[0].tolerationSeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](math.MaxInt64)}}
		}, "should be less than or equal to 315360000"},
		{"spec.placement.tolerations[0].key", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "bad key", Operator: v1alpha1.TolerationExists}}
		}, "should match"},
		{"spec.placement.tolerations[0].value", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Value: "not valid!"}}
		}, "should match"},
		{"spec.placement.tolerations", func(f *v1alpha1.FederatedReplicaSet) {
			for range 65 {
				f.Spec.Placement.Tolerations = append(f.Spec.Placement.Tolerations, v1alpha1.ClusterToleration{Operator: v1alpha1.TolerationExists})
			}
		}, "must have at most 64 items"},
		{"spec.moveBudget.maxSurge", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MoveBudget.MaxSurge = ptr.To(intstr.FromString("lots"))
		}, "must be a number of pods from 0 to 1000000 or a percentage"},
		{"spec.moveBudget.maxSurge", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MoveBudget.MaxSurge = ptr.To(intstr.FromInt32(math.MaxInt32))
		}, "must be a number of pods from 0 to 1000000 or a percentage"},
		{"spec.moveBudget.maxUnavailable", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MoveBudget.MaxUnavailable = ptr.To(intstr.FromString("101%"))
		}, "percentage from 0% to 100%"},
		{"spec.scaleDown.nodeCost.values[0]", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.ScaleDown = &v1alpha1.ScaleDown{NodeCost: &v1alpha1.NodeCost{Key: "k", Values: []string{"on demand"}}}
		}, "should match"},
	}
	for i, tc := range bounds {
		t.Run(fmt.Sprintf("bound %s %d", tc.field, i), func(t *testing.T) {
			frs := validFRS(fmt.Sprintf("bound-%d", i))
			tc.mutate(frs)
			err := c.Create(ctx, frs)
			if err == nil {
				t.Fatalf("invalid %s accepted", tc.field)
			}
			t.Logf("refused: %v", err)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s with %q", err, tc.field, tc.want)
			}
		})
	}

	rolloutCases(ctx, t, c)

	t.Run("bounds admit their limits", func(t *testing.T) {
		frs := validFRS(strings.Repeat("l", 63))
		frs.Spec.Replicas = ptr.To[int32](1000000)
		frs.Spec.MinReadySeconds = 86400
		frs.Spec.Failover = v1alpha1.Failover{UnreachableGracePeriod: dur("720h"), UnschedulableThreshold: dur("1h30m0.5s")}
		frs.Spec.Placement.ClusterSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "region", Operator: "NotIn", Values: []string{"eu"}}, {Key: "gpu", Operator: "Exists"}}}
		frs.Spec.Placement.Tolerations = []v1alpha1.ClusterToleration{{Key: "k", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](315360000)}}
		frs.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromString("200%")), MaxUnavailable: ptr.To(intstr.FromString("100%"))}
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("values at the bounds refused: %v", err)
		}
	})

	t.Run("member replica set bounds", func(t *testing.T) {
		memberCRDs, err := crds.Member()
		if err != nil {
			t.Fatal(err)
		}
		if err := testcluster.InstallCRDs(ctx, hub.Config, memberCRDs); err != nil {
			t.Fatal(err)
		}
		mrs := func(name string) *v1alpha1.MemberReplicaSet {
			return &v1alpha1.MemberReplicaSet{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
				Spec: v1alpha1.MemberReplicaSetSpec{Replicas: 1, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
					Hub: v1alpha1.HubReference{Namespace: "default", Name: name, UID: "u"}},
			}
		}
		if err := c.Create(ctx, mrs("ok")); err != nil {
			t.Fatalf("valid MemberReplicaSet refused: %v", err)
		}
		for _, tc := range []struct {
			field, want string
			mutate      func(*v1alpha1.MemberReplicaSet)
		}{
			{"spec.replicas", "should be less than or equal to 1000000", func(m *v1alpha1.MemberReplicaSet) { m.Spec.Replicas = 1000001 }},
			{"spec.minReadySeconds", "should be greater than or equal to 0", func(m *v1alpha1.MemberReplicaSet) { m.Spec.MinReadySeconds = -1 }},
			{"spec.selector", "operator must be In, NotIn, Exists or DoesNotExist", func(m *v1alpha1.MemberReplicaSet) {
				m.Spec.Selector.MatchExpressions = []metav1.LabelSelectorRequirement{{Key: "a", Operator: "exists"}}
			}},
		} {
			m := mrs("bad")
			tc.mutate(m)
			err := c.Create(ctx, m)
			if err == nil || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("MemberReplicaSet with a bad %s: %v; want %q", tc.field, err, tc.want)
			}
		}
	})

	t.Run("placement features accepted", func(t *testing.T) {
		frs := validFRS("placement-features")
		frs.Spec.Placement = v1alpha1.Placement{
			Strategy: v1alpha1.StrategyCostOrdered,
			Mode:     v1alpha1.PlacementDuplicated,
			SpreadConstraints: []v1alpha1.SpreadConstraint{
				{TopologyKey: "topology.kubernetes.io/region", MinGroups: ptr.To[int32](2), MaxGroups: ptr.To[int32](2)},
				{TopologyKey: "zone"},
			},
			Tolerations: []v1alpha1.ClusterToleration{
				{Operator: v1alpha1.TolerationExists},
				{Key: "maintenance", Value: "planned", Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](300)},
			},
		}
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("valid placement refused: %v", err)
		}
		got := &v1alpha1.FederatedReplicaSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		p := got.Spec.Placement
		if m := p.SpreadConstraints[1].MinGroups; m == nil || *m != 1 {
			t.Errorf("minGroups default = %v, want 1", m)
		}
		if op := p.Tolerations[1].Operator; op != v1alpha1.TolerationEqual {
			t.Errorf("toleration operator default = %q, want Equal", op)
		}
		if p.SpreadConstraints[1].MaxGroups != nil {
			t.Errorf("maxGroups defaulted to %v, want unset", *p.SpreadConstraints[1].MaxGroups)
		}
	})

	t.Run("nodeCost forms accepted", func(t *testing.T) {
		for name, nc := range map[string]*v1alpha1.NodeCost{
			"node-cost-values":  {Key: "karpenter.sh/capacity-type", Values: []string{"spot", "on-demand", "reserved"}},
			"node-cost-integer": {Key: "example.com/free-cost", Integer: true},
		} {
			frs := validFRS(name)
			frs.Spec.ScaleDown = &v1alpha1.ScaleDown{NodeCost: nc}
			if err := c.Create(ctx, frs); err != nil {
				t.Errorf("%s: valid nodeCost refused: %v", name, err)
			}
		}
	})

	t.Run("selector is immutable", func(t *testing.T) {
		frs := validFRS("immutable")
		if err := c.Create(ctx, frs); err != nil {
			t.Fatal(err)
		}
		frs.Spec.Selector.MatchExpressions = nil
		err := c.Update(ctx, frs)
		if err == nil || !strings.Contains(err.Error(), "selector is immutable") {
			t.Fatalf("selector change: got %v, want 'selector is immutable'", err)
		}
	})

	t.Run("scale subresource", func(t *testing.T) {
		frs := validFRS("scaled")
		if err := c.Create(ctx, frs); err != nil {
			t.Fatal(err)
		}
		scale := &autoscalingv1.Scale{}
		if err := c.SubResource("scale").Get(ctx, frs, scale); err != nil {
			t.Fatalf("reading scale: %v", err)
		}
		if scale.Spec.Replicas != 1 {
			t.Fatalf("scale.spec.replicas = %d, want 1", scale.Spec.Replicas)
		}
		scale.Spec.Replicas = 7
		if err := c.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("writing scale: %v", err)
		}
		got := &v1alpha1.FederatedReplicaSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != 7 {
			t.Fatalf("spec.replicas after scale = %d, want 7", *got.Spec.Replicas)
		}
		scale.Spec.Replicas = 0
		if err := c.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(scale)); err != nil {
			t.Fatalf("scaling to 0: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		if *got.Spec.Replicas != 0 {
			t.Fatalf("spec.replicas after scale to 0 = %d", *got.Spec.Replicas)
		}
	})
}

// startHub starts a hub API server with the hub CRDs and returns it, a
// client for it and a context that ends two minutes on (or with the test).
func startHub(t *testing.T, name string) (*testcluster.Cluster, client.Client, context.Context) {
	t.Helper()
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	hub := testcluster.Start(t, testcluster.Options{Name: name, CRDs: hubCRDs})
	c, err := client.New(hub.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return hub, c, ctx
}

func dur(s string) *v1alpha1.Duration {
	d := v1alpha1.Duration(s)
	return &d
}

func rollingStrategy() *v1alpha1.UpdateStrategy {
	return &v1alpha1.UpdateStrategy{
		Type:      v1alpha1.UpdateRolling,
		OnFailure: v1alpha1.FailureRollback,
		Stages: []v1alpha1.RolloutStage{
			{Name: "canary", Clusters: []string{"member-c"}, Canary: ptr.To(intstr.FromInt32(1)), BakeTime: dur("10m"), Promotion: v1alpha1.PromotionManual},
			{Name: "eu", ClusterSelector: &v1alpha1.ClusterLabelSelector{MatchLabels: map[string]string{"region": "eu"}}, Canary: ptr.To(intstr.FromString("50%"))},
			{Name: "rest"},
		},
	}
}

// rolloutCases checks spec.updateStrategy against the API server: defaults,
// accepted shapes, and one refusal per rule naming the field.
func rolloutCases(ctx context.Context, t *testing.T, c client.Client) {
	t.Run("update strategy defaults", func(t *testing.T) {
		frs := validFRS("rolling-defaults")
		frs.Spec.UpdateStrategy = rollingStrategy()
		frs.Spec.UpdateStrategy.OnFailure = ""
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("valid rolling object refused: %v", err)
		}
		got := &v1alpha1.FederatedReplicaSet{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			t.Fatal(err)
		}
		u := got.Spec.UpdateStrategy
		if u.OnFailure != v1alpha1.FailurePause {
			t.Errorf("onFailure default = %q, want Pause", u.OnFailure)
		}
		if d := u.ProgressDeadlineSeconds; d == nil || *d != 600 {
			t.Errorf("progressDeadlineSeconds default = %v, want 600", d)
		}
		if h := u.RevisionHistoryLimit; h == nil || *h != 10 {
			t.Errorf("revisionHistoryLimit default = %v, want 10", h)
		}
		if p := u.Stages[1].Promotion; p != v1alpha1.PromotionAuto {
			t.Errorf("promotion default = %q, want Auto", p)
		}
		if p := u.Stages[0].Promotion; p != v1alpha1.PromotionManual {
			t.Errorf("explicit promotion = %q, want Manual", p)
		}

		empty := validFRS("rolling-empty")
		empty.Spec.UpdateStrategy = &v1alpha1.UpdateStrategy{}
		if err := c.Create(ctx, empty); err != nil {
			t.Fatalf("empty updateStrategy refused: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(empty), got); err != nil {
			t.Fatal(err)
		}
		if typ := got.Spec.UpdateStrategy.Type; typ != v1alpha1.UpdateReplicaSet {
			t.Errorf("type default = %q, want ReplicaSet", typ)
		}

		none := validFRS("rolling-absent")
		if err := c.Create(ctx, none); err != nil {
			t.Fatal(err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(none), got); err != nil {
			t.Fatal(err)
		}
		if got.Spec.UpdateStrategy != nil {
			t.Errorf("updateStrategy defaulted to %+v, want absent", got.Spec.UpdateStrategy)
		}
	})

	t.Run("update strategy limits accepted", func(t *testing.T) {
		frs := validFRS("rolling-limits")
		frs.Spec.MinReadySeconds = 30
		u := rollingStrategy()
		u.ProgressDeadlineSeconds = ptr.To[int32](2592000)
		u.RevisionHistoryLimit = ptr.To[int32](0)
		u.Paused = true
		u.Stages[0].Canary = ptr.To(intstr.FromString("100%"))
		u.Stages[1].Canary = ptr.To(intstr.FromInt32(1000000))
		u.Stages[2].BakeTime = dur("720h")
		frs.Spec.UpdateStrategy = u
		frs.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromString("1%"))}
		if err := c.Create(ctx, frs); err != nil {
			t.Fatalf("values at the bounds refused: %v", err)
		}
		// A zero budget is fine without a rolling update (the planner surges by one).
		rs := validFRS("replicaset-zero-budget")
		rs.Spec.UpdateStrategy = &v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateReplicaSet}
		rs.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(0)), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		if err := c.Create(ctx, rs); err != nil {
			t.Fatalf("zero budget with type ReplicaSet refused: %v", err)
		}
	})

	refusals := []struct {
		field  string
		mutate func(*v1alpha1.FederatedReplicaSet)
		want   string
	}{
		{"spec.updateStrategy.type", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy.Type = "rolling" }, "Unsupported value"},
		{"spec.updateStrategy.onFailure", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy.OnFailure = "Abort" }, "Unsupported value"},
		{"spec.updateStrategy.progressDeadlineSeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](0)
		}, "should be greater than or equal to 1"},
		{"spec.updateStrategy.progressDeadlineSeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.ProgressDeadlineSeconds = ptr.To[int32](2592001)
		}, "should be less than or equal to 2592000"},
		{"spec.updateStrategy.progressDeadlineSeconds", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MinReadySeconds = 600
		}, "progressDeadlineSeconds must be greater than minReadySeconds"},
		{"spec.updateStrategy.revisionHistoryLimit", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.RevisionHistoryLimit = ptr.To[int32](-1)
		}, "should be greater than or equal to 0"},
		{"spec.updateStrategy.stages", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy.Type = v1alpha1.UpdateReplicaSet }, "stages need type Rolling"},
		{"spec.updateStrategy.paused", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy = &v1alpha1.UpdateStrategy{Paused: true}
		}, "paused needs type Rolling"},
		{"spec.moveBudget", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromString("0%")), MaxUnavailable: ptr.To(intstr.FromInt32(0))}
		}, "maxSurge and maxUnavailable must not both be 0"},
		{"spec.moveBudget", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.MoveBudget = v1alpha1.MoveBudget{MaxSurge: ptr.To(intstr.FromInt32(0))}
		}, "maxSurge and maxUnavailable must not both be 0"},
		{"spec.updateStrategy.stages[0].name", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[0].Name = "Canary" }, "should match"},
		{"spec.updateStrategy.stages[1]", func(f *v1alpha1.FederatedReplicaSet) { f.Spec.UpdateStrategy.Stages[1].Name = "canary" }, "Duplicate value"},
		{"spec.updateStrategy.stages[0].clusters[0]", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].Clusters = []string{"Member_C"}
		}, "should match"},
		{"spec.updateStrategy.stages[0].clusters[1]", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].Clusters = []string{"a", "a"}
		}, "Duplicate value"},
		{"spec.updateStrategy.stages[1].clusterSelector.matchExpressions[0].operator", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].ClusterSelector.MatchExpressions = []v1alpha1.ClusterSelectorRequirement{{Key: "region", Operator: "in", Values: []string{"eu"}}}
		}, "Unsupported value"},
		{"spec.updateStrategy.stages[1].clusterSelector.matchExpressions[0]", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].ClusterSelector.MatchExpressions = []v1alpha1.ClusterSelectorRequirement{{Key: "region", Operator: "In"}}
		}, "operators In and NotIn need values"},
		{"spec.updateStrategy.stages[1].clusterSelector.matchExpressions[0]", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].ClusterSelector.MatchExpressions = []v1alpha1.ClusterSelectorRequirement{{Key: "region", Operator: "Exists", Values: []string{"eu"}}}
		}, "Exists and DoesNotExist take none"},
		{"spec.updateStrategy.stages[1].clusterSelector.matchExpressions[0].key", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].ClusterSelector.MatchExpressions = []v1alpha1.ClusterSelectorRequirement{{Key: "bad key", Operator: "Exists"}}
		}, "should match"},
		{"spec.updateStrategy.stages[2].canary", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[2].Canary = ptr.To(intstr.FromInt32(2))
		}, "canary needs clusters or clusterSelector"},
		{"spec.updateStrategy.stages[0].canary", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].Canary = ptr.To(intstr.FromInt32(0))
		}, "must be a number of pods from 1 to 1000000 or a percentage from 1% to 100%"},
		{"spec.updateStrategy.stages[1].canary", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("0%"))
		}, "must be a number of pods from 1 to 1000000 or a percentage from 1% to 100%"},
		{"spec.updateStrategy.stages[1].canary", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("101%"))
		}, "must be a number of pods from 1 to 1000000 or a percentage from 1% to 100%"},
		{"spec.updateStrategy.stages[1].canary", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[1].Canary = ptr.To(intstr.FromString("half"))
		}, "must be a number of pods from 1 to 1000000 or a percentage from 1% to 100%"},
		{"spec.updateStrategy.stages[0].bakeTime", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].BakeTime = dur("1d")
		}, "must be a duration such as 90s"},
		{"spec.updateStrategy.stages[0].promotion", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages[0].Promotion = "manual"
		}, "Unsupported value"},
		{"spec.updateStrategy.stages", func(f *v1alpha1.FederatedReplicaSet) {
			f.Spec.UpdateStrategy.Stages = append(f.Spec.UpdateStrategy.Stages, v1alpha1.RolloutStage{Name: "after", Clusters: []string{"x"}})
		}, "only the last stage may leave out clusters and clusterSelector"},
		{"spec.updateStrategy.stages", func(f *v1alpha1.FederatedReplicaSet) {
			var st []v1alpha1.RolloutStage
			for i := range v1alpha1.MaxStages + 1 {
				st = append(st, v1alpha1.RolloutStage{Name: fmt.Sprintf("s%d", i), Clusters: []string{"a"}})
			}
			f.Spec.UpdateStrategy.Stages = st
		}, "must have at most 16 items"},
	}
	for i, tc := range refusals {
		t.Run(fmt.Sprintf("rollout %s %d", tc.field, i), func(t *testing.T) {
			frs := validFRS(fmt.Sprintf("rollout-%d", i))
			frs.Spec.UpdateStrategy = rollingStrategy()
			tc.mutate(frs)
			if errs := frs.Validate(); len(errs) == 0 {
				t.Errorf("Validate accepts what the API server must refuse")
			}
			err := c.Create(ctx, frs)
			if err == nil {
				t.Fatalf("invalid %s accepted", tc.field)
			}
			t.Logf("refused: %v", err)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not name %s with %q", err, tc.field, tc.want)
			}
		})
	}
}
