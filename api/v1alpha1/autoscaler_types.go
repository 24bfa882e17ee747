package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The FederatedHorizontalPodAutoscaler mirrors autoscaling/v2's
// HorizontalPodAutoscaler field for field (same JSON names, enums and
// meaning), so an HPA manifest becomes one by changing its kind and the
// scaleTargetRef. Resource and ContainerResource metrics come from every
// member's metrics.k8s.io, Pods and Object metrics from their
// custom.metrics.k8s.io and External metrics from their
// external.metrics.k8s.io; how members' values are combined is in
// docs/autoscaling.md.

// AutoscalerMetricSourceType names a kind of metric source.
// +kubebuilder:validation:Enum=Resource;ContainerResource;Pods;Object;External
type AutoscalerMetricSourceType string

const (
	// ResourceMetricSourceType is a resource (cpu, memory) summed over each
	// pod's containers, as kubelets report it through metrics.k8s.io.
	ResourceMetricSourceType AutoscalerMetricSourceType = "Resource"
	// ContainerResourceMetricSourceType is a resource of one named container
	// of each pod.
	ContainerResourceMetricSourceType AutoscalerMetricSourceType = "ContainerResource"
	// PodsMetricSourceType is a metric of each pod, from the members'
	// custom.metrics.k8s.io, averaged over the federation's pods.
	PodsMetricSourceType AutoscalerMetricSourceType = "Pods"
	// ObjectMetricSourceType is a metric of one named object, from the
	// members' custom.metrics.k8s.io, summed over the members that have it.
	ObjectMetricSourceType AutoscalerMetricSourceType = "Object"
	// ExternalMetricSourceType is a metric from outside the clusters, from
	// the members' external.metrics.k8s.io; the highest member's value
	// counts.
	ExternalMetricSourceType AutoscalerMetricSourceType = "External"
)

// AutoscalerMetricTargetType says how a metric is compared with its target.
// +kubebuilder:validation:Enum=Utilization;Value;AverageValue
type AutoscalerMetricTargetType string

const (
	// UtilizationMetricType compares the mean of usage/request over pods
	// with averageUtilization (percent).
	UtilizationMetricType AutoscalerMetricTargetType = "Utilization"
	// AverageValueMetricType compares the mean usage per pod with
	// averageValue.
	AverageValueMetricType AutoscalerMetricTargetType = "AverageValue"
	// ValueMetricType compares the metric's value with value (Object and
	// External metrics).
	ValueMetricType AutoscalerMetricTargetType = "Value"
)

// ScalingPolicySelect chooses among the policies of one direction.
// +kubebuilder:validation:Enum=Max;Min;Disabled
type ScalingPolicySelect string

const (
	// MaxChangePolicySelect lets the policy allowing the largest change win.
	MaxChangePolicySelect ScalingPolicySelect = "Max"
	// MinChangePolicySelect lets the policy allowing the smallest change win.
	MinChangePolicySelect ScalingPolicySelect = "Min"
	// DisabledPolicySelect turns scaling in that direction off.
	DisabledPolicySelect ScalingPolicySelect = "Disabled"
)

// HPAScalingPolicyType is the unit of a scaling policy.
// +kubebuilder:validation:Enum=Pods;Percent
type HPAScalingPolicyType string

const (
	// PodsScalingPolicy allows a change of Value pods per period.
	PodsScalingPolicy HPAScalingPolicyType = "Pods"
	// PercentScalingPolicy allows a change of Value percent of the replicas
	// at the start of the period.
	PercentScalingPolicy HPAScalingPolicyType = "Percent"
)

// Condition types of a FederatedHorizontalPodAutoscaler; the first three
// are the HorizontalPodAutoscaler's.
const (
	// AutoscalerAbleToScale says whether the target can be read and scaled
	// now (False while a stabilisation window or a failed scale holds it).
	AutoscalerAbleToScale = "AbleToScale"
	// AutoscalerScalingActive says whether metrics could be computed.
	AutoscalerScalingActive = "ScalingActive"
	// AutoscalerScalingLimited is True when the desired count was held back:
	// by min/max, a rate policy, or metrics missing from a member (no
	// scale-down on partial data).
	AutoscalerScalingLimited = "ScalingLimited"
	// AutoscalerMemberConflict is True while a HorizontalPodAutoscaler in a
	// member targets the MemberReplicaSet (or its pods) of the scaled
	// FederatedReplicaSet; replicafed reports it and never fights it.
	AutoscalerMemberConflict = "MemberAutoscalerConflict"
)

// CrossVersionObjectReference names the scaled object.
// +kubebuilder:validation:XValidation:rule="self.kind == 'FederatedReplicaSet'",message="scaleTargetRef.kind must be FederatedReplicaSet"
// +kubebuilder:validation:XValidation:rule="!has(self.apiVersion) || self.apiVersion == 'replicafed.io/v1alpha1'",message="scaleTargetRef.apiVersion must be replicafed.io/v1alpha1"
type CrossVersionObjectReference struct {
	// Kind of the target: FederatedReplicaSet.
	Kind string `json:"kind"`
	// Name of the FederatedReplicaSet, in the autoscaler's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// APIVersion of the target: replicafed.io/v1alpha1.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}

// MetricSpec is one metric to scale on.
// +kubebuilder:validation:XValidation:rule="(self.type == 'Resource') == has(self.resource) && (self.type == 'ContainerResource') == has(self.containerResource) && (self.type == 'Pods') == has(self.pods) && (self.type == 'Object') == has(self.object) && (self.type == 'External') == has(self.external)",message="set exactly the field named by type (resource, containerResource, pods, object or external)"
type MetricSpec struct {
	// Type of the metric source: Resource, ContainerResource, Pods, Object
	// or External.
	Type AutoscalerMetricSourceType `json:"type"`
	// Resource is a resource of whole pods.
	// +optional
	Resource *ResourceMetricSource `json:"resource,omitempty"`
	// ContainerResource is a resource of one container of each pod.
	// +optional
	ContainerResource *ContainerResourceMetricSource `json:"containerResource,omitempty"`
	// Pods is a metric of each pod of the target, in every member.
	// +optional
	Pods *PodsMetricSource `json:"pods,omitempty"`
	// Object is a metric of one named object in the members.
	// +optional
	Object *ObjectMetricSource `json:"object,omitempty"`
	// External is a metric from outside the clusters.
	// +optional
	External *ExternalMetricSource `json:"external,omitempty"`
}

// MetricIdentifier names a custom or external metric.
type MetricIdentifier struct {
	// Name of the metric.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// Selector narrows the metric's series (passed to the metrics API).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// PodsMetricSource targets the mean of a metric over the target's pods in
// every member (read from custom.metrics.k8s.io); only AverageValue
// targets, as for an HPA.
// +kubebuilder:validation:XValidation:rule="self.target.type == 'AverageValue'",message="a Pods metric takes an AverageValue target"
type PodsMetricSource struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Target value.
	Target MetricTarget `json:"target"`
}

// MetricObjectReference names the object an Object metric describes, in
// the autoscaler's namespace of each member.
type MetricObjectReference struct {
	// Kind of the object, for example Service or Ingress.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// Name of the object.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// APIVersion of the object.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
}

// ObjectMetricSource targets a metric of one object (read from
// custom.metrics.k8s.io); the values of the members that have the object
// are summed.
// +kubebuilder:validation:XValidation:rule="self.target.type != 'Utilization'",message="an Object metric takes a Value or AverageValue target"
type ObjectMetricSource struct {
	// DescribedObject is the object.
	DescribedObject MetricObjectReference `json:"describedObject"`
	// Target value.
	Target MetricTarget `json:"target"`
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
}

// ExternalMetricSource targets a metric from outside the clusters (read
// from external.metrics.k8s.io); the highest member's value counts.
// +kubebuilder:validation:XValidation:rule="self.target.type != 'Utilization'",message="an External metric takes a Value or AverageValue target"
type ExternalMetricSource struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Target value.
	Target MetricTarget `json:"target"`
}

// ResourceMetricSource targets a resource of whole pods.
// +kubebuilder:validation:XValidation:rule="self.target.type != 'Value'",message="a resource metric takes a Utilization or AverageValue target"
type ResourceMetricSource struct {
	// Name of the resource: cpu or memory.
	// +kubebuilder:validation:Enum=cpu;memory
	Name corev1.ResourceName `json:"name"`
	// Target value.
	Target MetricTarget `json:"target"`
}

// ContainerResourceMetricSource targets a resource of one container.
// +kubebuilder:validation:XValidation:rule="self.target.type != 'Value'",message="a resource metric takes a Utilization or AverageValue target"
type ContainerResourceMetricSource struct {
	// Name of the resource: cpu or memory.
	// +kubebuilder:validation:Enum=cpu;memory
	Name corev1.ResourceName `json:"name"`
	// Container is the name of the container in each pod.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Container string `json:"container"`
	// Target value.
	Target MetricTarget `json:"target"`
}

// MetricTarget is the value a metric is held at.
// +kubebuilder:validation:XValidation:rule="(self.type == 'Utilization') == has(self.averageUtilization) && (self.type == 'AverageValue') == has(self.averageValue) && (self.type == 'Value') == has(self.value)",message="Utilization needs averageUtilization, AverageValue needs averageValue, Value needs value, and none of the others"
type MetricTarget struct {
	// Type is Utilization, Value or AverageValue (which a source takes is
	// as for an HPA).
	Type AutoscalerMetricTargetType `json:"type"`
	// Value is the wanted value of the metric; more than zero.
	// +optional
	Value *resource.Quantity `json:"value,omitempty"`
	// AverageValue is the wanted mean usage per pod; more than zero.
	// +optional
	AverageValue *resource.Quantity `json:"averageValue,omitempty"`
	// AverageUtilization is the wanted mean usage as a percent of the
	// pods' requests.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100000
	// +optional
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`
}

// HorizontalPodAutoscalerBehavior configures scaling in each direction.
type HorizontalPodAutoscalerBehavior struct {
	// ScaleUp defaults to no stabilisation and the larger of 4 pods or
	// 100 % per 15 s.
	// +optional
	ScaleUp *HPAScalingRules `json:"scaleUp,omitempty"`
	// ScaleDown defaults to a 300 s stabilisation window and 100 % per 15 s.
	// +optional
	ScaleDown *HPAScalingRules `json:"scaleDown,omitempty"`
}

// HPAScalingRules limit scaling in one direction.
type HPAScalingRules struct {
	// StabilizationWindowSeconds: past recommendations within this window
	// are considered (the highest for scale-down, the lowest for scale-up).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	// +optional
	StabilizationWindowSeconds *int32 `json:"stabilizationWindowSeconds,omitempty"`
	// SelectPolicy is Max (default), Min or Disabled.
	// +optional
	SelectPolicy *ScalingPolicySelect `json:"selectPolicy,omitempty"`
	// Policies bound the change per period; the defaults of the direction
	// when empty.
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	// +optional
	Policies []HPAScalingPolicy `json:"policies,omitempty"`
}

// HPAScalingPolicy allows a change of Value pods or percent per
// PeriodSeconds.
type HPAScalingPolicy struct {
	// Type is Pods or Percent.
	Type HPAScalingPolicyType `json:"type"`
	// Value is the change allowed per period.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	Value int32 `json:"value"`
	// PeriodSeconds is the length of the period.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1800
	PeriodSeconds int32 `json:"periodSeconds"`
}

// FederatedHorizontalPodAutoscalerSpec is the HorizontalPodAutoscaler's spec
// with a FederatedReplicaSet as target.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type FederatedHorizontalPodAutoscalerSpec struct {
	// ScaleTargetRef names the FederatedReplicaSet in the same namespace.
	ScaleTargetRef CrossVersionObjectReference `json:"scaleTargetRef"`
	// MinReplicas is the lower bound; default 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`
	// MaxReplicas is the upper bound.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	MaxReplicas int32 `json:"maxReplicas"`
	// Metrics to scale on; the highest replica count any of them asks for
	// wins. Empty means cpu at 80 % utilisation, as for an HPA.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	Metrics []MetricSpec `json:"metrics,omitempty"`
	// Behavior bounds the speed of scaling each way.
	// +optional
	Behavior *HorizontalPodAutoscalerBehavior `json:"behavior,omitempty"`
}

// MetricValueStatus is a metric's current value.
type MetricValueStatus struct {
	// Value is the metric's value (Object and External metrics with a
	// Value target).
	// +optional
	Value *resource.Quantity `json:"value,omitempty"`
	// AverageValue is the mean usage per pod.
	// +optional
	AverageValue *resource.Quantity `json:"averageValue,omitempty"`
	// AverageUtilization is the mean usage as a percent of requests.
	// +optional
	AverageUtilization *int32 `json:"averageUtilization,omitempty"`
}

// ResourceMetricStatus is a resource metric's current value.
type ResourceMetricStatus struct {
	// Name of the resource.
	Name corev1.ResourceName `json:"name"`
	// Current value.
	Current MetricValueStatus `json:"current"`
}

// ContainerResourceMetricStatus is a container resource metric's current
// value.
type ContainerResourceMetricStatus struct {
	// Name of the resource.
	Name corev1.ResourceName `json:"name"`
	// Container is the container's name.
	Container string `json:"container"`
	// Current value.
	Current MetricValueStatus `json:"current"`
}

// PodsMetricStatus is a Pods metric's current mean over the pods.
type PodsMetricStatus struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Current value.
	Current MetricValueStatus `json:"current"`
}

// ObjectMetricStatus is an Object metric's current value, summed over the
// members that have the object.
type ObjectMetricStatus struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Current value.
	Current MetricValueStatus `json:"current"`
	// DescribedObject is the object.
	DescribedObject MetricObjectReference `json:"describedObject"`
}

// ExternalMetricStatus is an External metric's current value.
type ExternalMetricStatus struct {
	// Metric names the metric.
	Metric MetricIdentifier `json:"metric"`
	// Current value.
	Current MetricValueStatus `json:"current"`
}

// MetricStatus is the current value of one metric of the spec.
type MetricStatus struct {
	// Type of the metric source.
	Type AutoscalerMetricSourceType `json:"type"`
	// Resource is set for Resource metrics.
	// +optional
	Resource *ResourceMetricStatus `json:"resource,omitempty"`
	// ContainerResource is set for ContainerResource metrics.
	// +optional
	ContainerResource *ContainerResourceMetricStatus `json:"containerResource,omitempty"`
	// Pods is set for Pods metrics.
	// +optional
	Pods *PodsMetricStatus `json:"pods,omitempty"`
	// Object is set for Object metrics.
	// +optional
	Object *ObjectMetricStatus `json:"object,omitempty"`
	// External is set for External metrics.
	// +optional
	External *ExternalMetricStatus `json:"external,omitempty"`
}

// AutoscalerClusterStatus is what one member contributed to the last
// computation.
type AutoscalerClusterStatus struct {
	// Name of the member cluster.
	Name string `json:"name"`
	// Pods is the number of the target's pods in the member.
	Pods int32 `json:"pods"`
	// PodsWithMetrics is how many of them had a sample (of a resource
	// metric, or else of a Pods metric).
	PodsWithMetrics int32 `json:"podsWithMetrics"`
	// MetricsAvailable is false when a metric the autoscaler asks for
	// could not be read in the member (its API not served, or not
	// answering); the autoscaler then does not scale down.
	MetricsAvailable bool `json:"metricsAvailable"`
	// Message says why metrics were not available.
	// +optional
	Message string `json:"message,omitempty"`
}

// AutoscalerScaleEvent is one change of the replica count the autoscaler
// made.
type AutoscalerScaleEvent struct {
	// Time of the change.
	Time metav1.Time `json:"time"`
	// Change is the number of replicas added (positive) or removed
	// (negative).
	Change int32 `json:"change"`
}

// FederatedHorizontalPodAutoscalerStatus is the HorizontalPodAutoscaler's
// status, with a row per member and the recent scale events.
type FederatedHorizontalPodAutoscalerStatus struct {
	// ObservedGeneration is the generation last acted on.
	// +optional
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// LastScaleTime is when the autoscaler last changed the replica count.
	// +optional
	LastScaleTime *metav1.Time `json:"lastScaleTime,omitempty"`
	// CurrentReplicas is the target's replica count last seen.
	// +optional
	CurrentReplicas int32 `json:"currentReplicas,omitempty"`
	// DesiredReplicas is the count last computed.
	DesiredReplicas int32 `json:"desiredReplicas"`
	// CurrentMetrics are the metrics' values last computed.
	// +listType=atomic
	// +optional
	CurrentMetrics []MetricStatus `json:"currentMetrics,omitempty"`
	// Conditions: AbleToScale, ScalingActive, ScalingLimited and
	// MemberAutoscalerConflict.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Clusters has one row per member the target runs in.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []AutoscalerClusterStatus `json:"clusters,omitempty"`
	// RecentScaleEvents are the changes made within the longest policy
	// period, oldest first: a new raft leader reads them, so the rate
	// policies hold across a leader change.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	RecentScaleEvents []AutoscalerScaleEvent `json:"recentScaleEvents,omitempty"`
}

// FederatedHorizontalPodAutoscaler scales a FederatedReplicaSet on its pods'
// metrics in every member cluster, like a HorizontalPodAutoscaler.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=fhpa,categories=all
// +kubebuilder:printcolumn:name="Reference",type=string,JSONPath=`.spec.scaleTargetRef.name`
// +kubebuilder:printcolumn:name="MinPods",type=integer,JSONPath=`.spec.minReplicas`
// +kubebuilder:printcolumn:name="MaxPods",type=integer,JSONPath=`.spec.maxReplicas`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.currentReplicas`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Active",type=string,JSONPath=`.status.conditions[?(@.type=="ScalingActive")].status`,priority=1
// +kubebuilder:printcolumn:name="Limited",type=string,JSONPath=`.status.conditions[?(@.type=="ScalingLimited")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FederatedHorizontalPodAutoscaler struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FederatedHorizontalPodAutoscalerSpec   `json:"spec"`
	Status FederatedHorizontalPodAutoscalerStatus `json:"status,omitempty"`
}

// FederatedHorizontalPodAutoscalerList is a list of
// FederatedHorizontalPodAutoscalers.
// +kubebuilder:object:root=true
type FederatedHorizontalPodAutoscalerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FederatedHorizontalPodAutoscaler `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &FederatedHorizontalPodAutoscaler{}, &FederatedHorizontalPodAutoscalerList{})
}
