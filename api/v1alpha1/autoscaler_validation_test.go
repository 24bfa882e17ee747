package v1alpha1_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func validFHPA(name string) *v1alpha1.FederatedHorizontalPodAutoscaler {
	return &v1alpha1.FederatedHorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1alpha1.FederatedHorizontalPodAutoscalerSpec{
			ScaleTargetRef: v1alpha1.CrossVersionObjectReference{Kind: "FederatedReplicaSet", Name: "web", APIVersion: "replicafed.io/v1alpha1"},
			MinReplicas:    ptr.To[int32](2),
			MaxReplicas:    10,
			Metrics: []v1alpha1.MetricSpec{
				{Type: v1alpha1.ResourceMetricSourceType, Resource: &v1alpha1.ResourceMetricSource{
					Name: corev1.ResourceCPU, Target: v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](60)}}},
				{Type: v1alpha1.ContainerResourceMetricSourceType, ContainerResource: &v1alpha1.ContainerResourceMetricSource{
					Name: corev1.ResourceMemory, Container: "app",
					Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("200Mi"))}}},
				{Type: v1alpha1.PodsMetricSourceType, Pods: &v1alpha1.PodsMetricSource{
					Metric: v1alpha1.MetricIdentifier{Name: "requests_per_second", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"verb": "GET"}}},
					Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("10"))}}},
				{Type: v1alpha1.ObjectMetricSourceType, Object: &v1alpha1.ObjectMetricSource{
					DescribedObject: v1alpha1.MetricObjectReference{Kind: "Ingress", Name: "web", APIVersion: "networking.k8s.io/v1"},
					Metric:          v1alpha1.MetricIdentifier{Name: "hits"},
					Target:          v1alpha1.MetricTarget{Type: v1alpha1.ValueMetricType, Value: ptr.To(resource.MustParse("100"))}}},
				{Type: v1alpha1.ExternalMetricSourceType, External: &v1alpha1.ExternalMetricSource{
					Metric: v1alpha1.MetricIdentifier{Name: "queue_length"},
					Target: v1alpha1.MetricTarget{Type: v1alpha1.AverageValueMetricType, AverageValue: ptr.To(resource.MustParse("30"))}}},
			},
			Behavior: &v1alpha1.HorizontalPodAutoscalerBehavior{
				ScaleDown: &v1alpha1.HPAScalingRules{
					StabilizationWindowSeconds: ptr.To[int32](60),
					SelectPolicy:               ptr.To(v1alpha1.MinChangePolicySelect),
					Policies:                   []v1alpha1.HPAScalingPolicy{{Type: v1alpha1.PercentScalingPolicy, Value: 10, PeriodSeconds: 60}},
				},
			},
		},
	}
}

// TestFederatedHorizontalPodAutoscalerValidation checks the schema and CEL
// rules against a real API server: a full object is accepted, and each rule
// refuses its bad value with a message naming it.
func TestFederatedHorizontalPodAutoscalerValidation(t *testing.T) {
	_, c, ctx := startHub(t, "fhpa-validation")
	if err := c.Create(ctx, validFHPA("valid")); err != nil {
		t.Fatalf("valid object refused: %v", err)
	}
	minimal := validFHPA("minimal")
	minimal.Spec.MinReplicas, minimal.Spec.Metrics, minimal.Spec.Behavior = nil, nil, nil
	minimal.Spec.ScaleTargetRef.APIVersion = ""
	if err := c.Create(ctx, minimal); err != nil {
		t.Fatalf("minimal object refused: %v", err)
	}

	cases := []struct {
		name   string
		change func(*v1alpha1.FederatedHorizontalPodAutoscalerSpec)
		want   string
	}{
		{"min above max", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.MinReplicas = ptr.To[int32](11) },
			"minReplicas must not exceed maxReplicas"},
		{"min zero", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.MinReplicas = ptr.To[int32](0) },
			"spec.minReplicas"},
		{"target a Deployment", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.ScaleTargetRef.Kind = "Deployment" },
			"scaleTargetRef.kind must be FederatedReplicaSet"},
		{"target another group", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.ScaleTargetRef.APIVersion = "apps/v1" },
			"scaleTargetRef.apiVersion must be replicafed.io/v1alpha1"},
		{"unknown metric type", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.Metrics[0].Type = "Prometheus" },
			"spec.metrics[0].type"},
		{"type names another field", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.Metrics[0].Type = "Pods" },
			"set exactly the field named by type"},
		{"Pods metric with a Value target", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[2].Pods.Target = v1alpha1.MetricTarget{Type: v1alpha1.ValueMetricType, Value: ptr.To(resource.MustParse("1"))}
		}, "a Pods metric takes an AverageValue target"},
		{"Object metric with a Utilization target", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[3].Object.Target = v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}
		}, "an Object metric takes a Value or AverageValue target"},
		{"External metric with a Utilization target", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[4].External.Target = v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageUtilization: ptr.To[int32](50)}
		}, "an External metric takes a Value or AverageValue target"},
		{"resource metric with a Value target", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[0].Resource.Target = v1alpha1.MetricTarget{Type: v1alpha1.ValueMetricType, Value: ptr.To(resource.MustParse("1"))}
		}, "a resource metric takes a Utilization or AverageValue target"},
		{"Value without value", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[3].Object.Target = v1alpha1.MetricTarget{Type: v1alpha1.ValueMetricType, AverageValue: ptr.To(resource.MustParse("1"))}
		}, "Value needs value"},
		{"metric without a name", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.Metrics[2].Pods.Metric.Name = "" },
			"spec.metrics[2].pods.metric.name"},
		{"object without a kind", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.Metrics[3].Object.DescribedObject.Kind = "" },
			"spec.metrics[3].object.describedObject.kind"},
		{"both sources", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[0].ContainerResource = s.Metrics[1].ContainerResource
		}, "set exactly the field named by type"},
		{"utilisation without percent", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[0].Resource.Target = v1alpha1.MetricTarget{Type: v1alpha1.UtilizationMetricType, AverageValue: ptr.To(resource.MustParse("1"))}
		}, "Utilization needs averageUtilization"},
		{"network resource", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Metrics[0].Resource.Name = "ephemeral-storage"
		},
			"spec.metrics[0].resource.name"},
		{"window over an hour", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Behavior.ScaleDown.StabilizationWindowSeconds = ptr.To[int32](3601)
		}, "stabilizationWindowSeconds"},
		{"unknown select policy", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Behavior.ScaleDown.SelectPolicy = ptr.To(v1alpha1.ScalingPolicySelect("Average"))
		}, "selectPolicy"},
		{"period over 30 minutes", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) {
			s.Behavior.ScaleDown.Policies[0].PeriodSeconds = 1801
		}, "periodSeconds"},
		{"zero policy value", func(s *v1alpha1.FederatedHorizontalPodAutoscalerSpec) { s.Behavior.ScaleDown.Policies[0].Value = 0 },
			"policies[0].value"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := validFHPA("bad-" + string(rune('a'+i)))
			tc.change(&f.Spec)
			err := c.Create(ctx, f)
			if err == nil {
				t.Fatalf("accepted, want refused with %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("refused with %v, want a message containing %q", err, tc.want)
			}
		})
	}
}
