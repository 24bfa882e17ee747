package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PlacementStrategy selects how replicas are divided among member clusters.
// +kubebuilder:validation:Enum=Weighted;AvailableCapacity;CostOrdered;Packed
type PlacementStrategy string

const (
	// StrategyWeighted divides replicas in proportion to the per-cluster weights
	// (Webster / Sainte-Laguë), capped by each member's free capacity.
	StrategyWeighted PlacementStrategy = "Weighted"
	// StrategyAvailableCapacity uses each member's estimated free capacity for the
	// pod template as its weight.
	StrategyAvailableCapacity PlacementStrategy = "AvailableCapacity"
	// StrategyCostOrdered fills members in tiers of deletionCost, the highest
	// cost (the capacity to keep longest, such as reserved capacity) first,
	// each member up to its free capacity or maxReplicas before the next tier;
	// members of one tier share by weight. Scale-down empties the tiers in the
	// reverse order, lowest cost first.
	StrategyCostOrdered PlacementStrategy = "CostOrdered"
	// StrategyPacked runs the replicas on as few members as their capacity
	// allows: each member is filled up to its capacity or maxReplicas before
	// the next gets any. Members already running replicas come first, then
	// the higher weight, then an order drawn from the FRS's UID, so that many
	// small FRS spread over the fleet instead of piling onto one member.
	// Scale-down empties the member with the fewest replicas first (within
	// the highest deletionCost kept longest). It saves a MemberReplicaSet,
	// its status writes and its events in every member left out, at the
	// price of spread: replicas packed onto one member are all down while it
	// is, until failover plans them elsewhere.
	StrategyPacked PlacementStrategy = "Packed"
)

// PlacementStrategies lists every PlacementStrategy the API accepts.
var PlacementStrategies = []PlacementStrategy{StrategyWeighted, StrategyAvailableCapacity, StrategyCostOrdered, StrategyPacked}

// MoveBackPolicy says what happens to replicas moved away from a member when
// that member becomes healthy again.
// +kubebuilder:validation:Enum=Never;OnRecovery
type MoveBackPolicy string

const (
	// MoveBackNever leaves moved replicas where they are.
	MoveBackNever MoveBackPolicy = "Never"
	// MoveBackOnRecovery returns replicas to the recovered member within the
	// surge/unavailability budget.
	MoveBackOnRecovery MoveBackPolicy = "OnRecovery"
)

// ClusterPreference tunes how one member cluster takes part in the division.
// +kubebuilder:validation:XValidation:rule="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",message="minReplicas must not exceed maxReplicas"
type ClusterPreference struct {
	// Name of the member cluster as registered with replicafed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`

	// Weight is the relative share of replicas this cluster receives.
	// Zero means the cluster gets replicas only to satisfy minReplicas.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Weight *int32 `json:"weight,omitempty"`

	// MinReplicas is the floor kept in this cluster while it is healthy.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MinReplicas *int32 `json:"minReplicas,omitempty"`

	// MaxReplicas is the ceiling for this cluster; unset means no ceiling.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	MaxReplicas *int32 `json:"maxReplicas,omitempty"`

	// DeletionCost orders clusters on scale-down: replicas leave the cluster
	// with the lowest cost first (for example a pay-as-you-go cloud before a
	// reserved data centre).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	DeletionCost *int32 `json:"deletionCost,omitempty"`
}

// Placement chooses the member clusters and how replicas are divided.
type Placement struct {
	// Clusters lists member clusters by name, with per-cluster preferences.
	// Names are unique (the list is a map keyed by name).
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	// +optional
	Clusters []ClusterPreference `json:"clusters,omitempty"`

	// ClusterSelector selects registered member clusters by their labels.
	// Selected clusters not listed in clusters get weight 1 and no bounds.
	// When both are empty, every registered cluster is a candidate.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="matchExpressions must have at most 32 items"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="matchLabels must have at most 64 entries"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist (case matters)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",message="matchExpressions with operator In or NotIn need values"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions with operator Exists or DoesNotExist take no values"
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`

	// Strategy is how replicas are divided (mode Divided only): Weighted by
	// weight, AvailableCapacity by free capacity, CostOrdered in tiers of
	// deletionCost, Packed onto as few members as their capacity allows.
	// +kubebuilder:default=Weighted
	// +optional
	Strategy PlacementStrategy `json:"strategy,omitempty"`

	// Mode says whether spec.replicas is divided among the members (Divided)
	// or run in full by every selected member (Duplicated).
	// +kubebuilder:default=Divided
	// +optional
	Mode PlacementMode `json:"mode,omitempty"`

	// SpreadConstraints spread the replicas over groups of members that share
	// the value of a member label (region, zone, provider). They apply in list
	// order, each among the members the ones before it kept.
	// +listType=map
	// +listMapKey=topologyKey
	// +kubebuilder:validation:MaxItems=4
	// +optional
	SpreadConstraints []SpreadConstraint `json:"spreadConstraints,omitempty"`

	// Tolerations let replicas run on members with matching taints.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +optional
	Tolerations []ClusterToleration `json:"tolerations,omitempty"`
}

// Failover says when replicas leave a member that cannot run them. Unset
// fields take the controller's configured defaults (failover.* in its config
// file: 60s, 60s and Never unless changed).
type Failover struct {
	// UnreachableGracePeriod is how long a member may be unreachable before its
	// replicas are planned elsewhere. Nothing is deleted in an unreachable member.
	// +optional
	UnreachableGracePeriod *Duration `json:"unreachableGracePeriod,omitempty"`

	// UnschedulableThreshold is how long a pod may stay unschedulable before it
	// counts as missing capacity in its member and its replica is planned elsewhere.
	// +optional
	UnschedulableThreshold *Duration `json:"unschedulableThreshold,omitempty"`

	// MoveBack says whether replicas return to a member after it recovers.
	// +optional
	MoveBack MoveBackPolicy `json:"moveBack,omitempty"`
}

// MoveBudget bounds how far the fleet may go above or below spec.replicas while
// replicas move between members.
type MoveBudget struct {
	// MaxSurge is how many pods above spec.replicas the fleet may run during a
	// move; an absolute number or a percentage of spec.replicas (rounded up).
	// +kubebuilder:default="25%"
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 && self <= 1000000 : self.matches('^[0-9]{1,3}%$')",message="must be a number of pods from 0 to 1000000 or a percentage from 0% to 999%"
	// +optional
	MaxSurge *intstr.IntOrString `json:"maxSurge,omitempty"`

	// MaxUnavailable is how many replicas below spec.replicas the fleet may
	// be during a move; an absolute number or a percentage (rounded down).
	// +kubebuilder:default=0
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 && self <= 1000000 : self.matches('^([0-9]|[1-9][0-9]|100)%$')",message="must be a number of pods from 0 to 1000000 or a percentage from 0% to 100%"
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// DeletionPolicy says what deleting a FederatedReplicaSet does to its pods in
// the members when the deletion itself does not say.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionPolicyDelete deletes the pods with the FederatedReplicaSet.
	DeletionPolicyDelete DeletionPolicy = "Delete"
	// DeletionPolicyOrphan leaves the pods running, without a controller.
	DeletionPolicyOrphan DeletionPolicy = "Orphan"
)

// FederatedReplicaSetSpec is the desired state of a FederatedReplicaSet.
// The selector must match the template's labels; that rule iterates over
// unbounded lists and maps, which the CRD's static CEL cost budget refuses, so
// it lives in the ValidatingAdmissionPolicy in api/policy instead.
// +kubebuilder:validation:XValidation:rule="(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || (has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",message="selector must not be empty"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || self.updateStrategy.type != 'Rolling' || !has(self.moveBudget) || !has(self.moveBudget.maxSurge) || !has(self.moveBudget.maxUnavailable) || !(type(self.moveBudget.maxSurge) == int ? self.moveBudget.maxSurge == 0 : self.moveBudget.maxSurge.matches('^0+%$')) || !(type(self.moveBudget.maxUnavailable) == int ? self.moveBudget.maxUnavailable == 0 : self.moveBudget.maxUnavailable.matches('^0+%$'))",message="maxSurge and maxUnavailable must not both be 0 with updateStrategy type Rolling: the rollout could never replace a pod",fieldPath=".moveBudget"
// +kubebuilder:validation:XValidation:rule="!has(self.updateStrategy) || !has(self.updateStrategy.progressDeadlineSeconds) || self.updateStrategy.progressDeadlineSeconds > (has(self.minReadySeconds) ? self.minReadySeconds : 0)",message="progressDeadlineSeconds must be greater than minReadySeconds",fieldPath=".updateStrategy.progressDeadlineSeconds"
type FederatedReplicaSetSpec struct {
	// Replicas is the number of pods wanted across the whole fleet.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`

	// MinReadySeconds is how long a new pod must be ready before it counts as
	// available, as in a ReplicaSet.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// Selector is a label query over pods that must match the template labels.
	// It cannot be changed after creation.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="selector is immutable"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="matchExpressions must have at most 32 items"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="matchLabels must have at most 64 entries"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist (case matters)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",message="matchExpressions with operator In or NotIn need values"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions with operator Exists or DoesNotExist take no values"
	Selector *metav1.LabelSelector `json:"selector"`

	// Template is the pod template created in every member cluster.
	Template corev1.PodTemplateSpec `json:"template"`

	// Placement chooses member clusters and how replicas are divided.
	// +kubebuilder:default={strategy: Weighted}
	// +optional
	Placement Placement `json:"placement,omitempty"`

	// Failover says when replicas leave a member that cannot run them.
	// +kubebuilder:default={}
	// +optional
	Failover Failover `json:"failover,omitempty"`

	// MoveBudget bounds surge and unavailability while replicas move
	// between members and, with updateStrategy Rolling, while a new
	// template replaces the running pods.
	// +kubebuilder:default={}
	// +optional
	MoveBudget MoveBudget `json:"moveBudget,omitempty"`

	// UpdateStrategy says what a template change does to running pods.
	// Unset, or type ReplicaSet, keeps a ReplicaSet's behaviour: only new
	// pods get the new template. Type Rolling replaces the running pods,
	// stage by stage, within moveBudget.
	// +optional
	UpdateStrategy *UpdateStrategy `json:"updateStrategy,omitempty"`

	// ScaleDown tunes which pods a member removes first when its target
	// drops.
	// +optional
	ScaleDown *ScaleDown `json:"scaleDown,omitempty"`

	// DeletionPolicy says what happens to the pods in the members when this
	// object is deleted: Delete (the default) removes them, Orphan leaves them
	// running without a controller. An explicit `--cascade=orphan` on the
	// delete always orphans, but the API server records that request only in a
	// transient "orphan" finalizer the hub's garbage collector removes almost
	// at once; if no replicafed replica saw it (all were restarting, say),
	// this field is what decides. Set Orphan on workloads whose pods must
	// outlive their FederatedReplicaSet whatever the delete says, as with
	// Karmada's preserve-on-deletion.
	// +kubebuilder:default=Delete
	// +optional
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// PropagateDependencies copies the ConfigMaps, Secrets, ServiceAccounts
	// and PersistentVolumeClaims the template references (volumes, env,
	// envFrom, imagePullSecrets, serviceAccountName) from this namespace
	// into every member that runs replicas, keeps the copies updated and
	// removes them when no FederatedReplicaSet needs them there. Pods wait in
	// a member until the required ones exist. An object of the same name
	// that replicafed did not create is never overwritten (condition
	// DependenciesPropagated False, reason Conflict). Off by default.
	// +optional
	PropagateDependencies bool `json:"propagateDependencies,omitempty"`
}

// ClusterHealth is replicafed's view of a member cluster.
// +kubebuilder:validation:Enum=Healthy;Unreachable;Unknown
type ClusterHealth string

const (
	// ClusterHealthy means the member's API server answers its readiness probe.
	ClusterHealthy ClusterHealth = "Healthy"
	// ClusterUnreachable means the probe has been failing.
	ClusterUnreachable ClusterHealth = "Unreachable"
	// ClusterHealthUnknown means no probe has completed yet.
	ClusterHealthUnknown ClusterHealth = "Unknown"
)

// ClusterStatus is one member's row in a FederatedReplicaSet's status.
type ClusterStatus struct {
	// Name of the member cluster.
	Name string `json:"name"`
	// Target is the member's planned share of replicas.
	Target int32 `json:"target"`
	// Replicas is the number of active pods in the member.
	Replicas int32 `json:"replicas"`
	// ReadyReplicas is the number of ready pods in the member.
	ReadyReplicas int32 `json:"readyReplicas"`
	// AvailableReplicas is the number of available pods in the member.
	AvailableReplicas int32 `json:"availableReplicas"`
	// UnschedulableReplicas is the number of pods the member's scheduler could not place.
	// +optional
	UnschedulableReplicas int32 `json:"unschedulableReplicas,omitempty"`
	// Health of the member as replicafed sees it.
	Health ClusterHealth `json:"health"`
	// LastReportTime is when the member's worker last reported.
	// +optional
	LastReportTime *metav1.Time `json:"lastReportTime,omitempty"`
	// Message explains the row, for example why the target changed.
	// +optional
	Message string `json:"message,omitempty"`
	// Revisions has the member's target and counts per live revision
	// (updateStrategy Rolling only).
	// +listType=map
	// +listMapKey=name
	// +optional
	Revisions []ClusterRevisionStatus `json:"revisions,omitempty"`
}

// Condition types of a FederatedReplicaSet.
const (
	// ConditionReady is True when every replica is available.
	ConditionReady = "Ready"
	// ConditionProgressing is True while members move towards their targets;
	// with updateStrategy Rolling it carries the rollout's reasons
	// (ReasonRevisionUpdating, ReasonProgressDeadlineExceeded, ...).
	ConditionProgressing = "Progressing"
	// ConditionReplicaFailure is True when a member failed to create or delete pods.
	ConditionReplicaFailure = "ReplicaFailure"
	// ConditionClusterUnavailable is True when a selected member is unreachable.
	ConditionClusterUnavailable = "ClusterUnavailable"
	// ConditionUnschedulable is True when the fleet lacks room for all replicas.
	ConditionUnschedulable = "Unschedulable"
	// ConditionPlanned is True when the members' targets are committed for the
	// current generation; False, with the reason, when planning or committing
	// failed (the members then keep their last committed targets).
	ConditionPlanned = "Planned"
)

// FederatedReplicaSetStatus is the observed state, summed over member clusters.
type FederatedReplicaSetStatus struct {
	// Replicas is the number of active pods across members.
	// +optional
	Replicas int32 `json:"replicas"`
	// FullyLabeledReplicas is the number of pods whose labels include all template labels.
	// +optional
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`
	// ReadyReplicas is the number of ready pods across members.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is the number of available pods across members.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// TerminatingReplicas is the number of pods being deleted across members.
	// +optional
	TerminatingReplicas *int32 `json:"terminatingReplicas,omitempty"`
	// ObservedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Selector is spec.selector as a string, for the scale subresource and HPA.
	// +optional
	Selector string `json:"selector,omitempty"`
	// ClusterCount is the number of member clusters with a non-zero target.
	// +optional
	ClusterCount int32 `json:"clusterCount,omitempty"`
	// UnschedulableReplicas is the number of pods the members' schedulers
	// could not place, across members.
	// +optional
	UnschedulableReplicas int32 `json:"unschedulableReplicas,omitempty"`
	// Spread is the members' targets as text for kubectl, for example
	// "member-a=4,member-b=2", members with a non-zero target in name order,
	// the first few only ("+3 more" after them).
	// +kubebuilder:validation:MaxLength=512
	// +optional
	Spread string `json:"spread,omitempty"`
	// CurrentRevision is the revision the last completed rollout left on
	// every member: the stable revision a rollback returns to
	// (updateStrategy Rolling only).
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// UpdateRevision is the revision of spec.template; equal to
	// CurrentRevision when no rollout is under way.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// Revision is UpdateRevision's number (1, 2, ...), for kubectl.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// CollisionCount counts template hash collisions; it is part of the
	// next revision's hash, so a colliding template gets a new name.
	// +optional
	CollisionCount *int32 `json:"collisionCount,omitempty"`
	// UpdatedReplicas is the number of pods of UpdateRevision across members.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// Revisions has one entry per live revision, newest first.
	// +listType=map
	// +listMapKey=name
	// +optional
	Revisions []RevisionStatus `json:"revisions,omitempty"`
	// Rollout is where the current or last rolling update stands.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
	// Conditions describe the FederatedReplicaSet's state.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Clusters has one row per member cluster taking part.
	// +listType=map
	// +listMapKey=name
	// +optional
	Clusters []ClusterStatus `json:"clusters,omitempty"`
}

// FederatedReplicaSet keeps a number of replicas of a pod template running
// across member clusters. Its name is the value of a label on the objects it
// makes in members (LabelFederatedName), so it is at most 63 characters.
// +kubebuilder:object:root=true
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="metadata.name must be at most 63 characters: it is the value of the replicafed.io/federated-name label in member clusters"
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=frs,categories=all
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.clusterCount`
// +kubebuilder:printcolumn:name="Spread",type=string,JSONPath=`.status.spread`
// +kubebuilder:printcolumn:name="Revision",type=integer,JSONPath=`.status.revision`
// +kubebuilder:printcolumn:name="Stage",type=string,JSONPath=`.status.rollout.stageName`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`,priority=1
// +kubebuilder:printcolumn:name="Unschedulable",type=integer,JSONPath=`.status.unschedulableReplicas`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FederatedReplicaSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   FederatedReplicaSetSpec   `json:"spec"`
	Status FederatedReplicaSetStatus `json:"status,omitempty"`
}

// FederatedReplicaSetList is a list of FederatedReplicaSets.
// +kubebuilder:object:root=true
type FederatedReplicaSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FederatedReplicaSet `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &FederatedReplicaSet{}, &FederatedReplicaSetList{})
}
