package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Labels and annotations replicafed puts on objects in member clusters.
const (
	// LabelManagedBy marks MemberReplicaSets created by replicafed.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is the value of LabelManagedBy.
	ManagedByValue = "replicafed"
	// LabelFederatedName is the hub FederatedReplicaSet's name on a MemberReplicaSet.
	LabelFederatedName = "replicafed.io/federated-name"
	// AnnotationHubUID is the hub FederatedReplicaSet's UID on a MemberReplicaSet.
	AnnotationHubUID = "replicafed.io/hub-uid"
	// FinalizerCascade is the hub finalizer that holds a FederatedReplicaSet until
	// its pods are gone from every reachable member.
	FinalizerCascade = "replicafed.io/cascade"
)

// MemberReplicaSetSpec records what the hub asked of this member.
type MemberReplicaSetSpec struct {
	// Replicas is this member's target, as planned on the hub.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Replicas int32 `json:"replicas"`

	// Selector is the FederatedReplicaSet's pod selector.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || size(self.matchExpressions) <= 32",message="matchExpressions must have at most 32 items"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || size(self.matchLabels) <= 64",message="matchLabels must have at most 64 entries"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, e.operator in ['In', 'NotIn', 'Exists', 'DoesNotExist'])",message="matchExpressions operator must be In, NotIn, Exists or DoesNotExist (case matters)"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['In', 'NotIn']) || (has(e.values) && size(e.values) > 0))",message="matchExpressions with operator In or NotIn need values"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.all(e, !(e.operator in ['Exists', 'DoesNotExist']) || !has(e.values) || size(e.values) == 0)",message="matchExpressions with operator Exists or DoesNotExist take no values"
	Selector *metav1.LabelSelector `json:"selector"`

	// MinReadySeconds is copied from the FederatedReplicaSet.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=86400
	// +optional
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// NodeCost says which nodes scale-down frees first; unset keeps the
	// upstream ReplicaSet order. The hub copies the FederatedReplicaSet's
	// spec.scaleDown.nodeCost, or the controller's default when that is unset.
	// +optional
	NodeCost *NodeCost `json:"nodeCost,omitempty"`

	// Hub identifies the FederatedReplicaSet this object stands for.
	Hub HubReference `json:"hub"`
}

// HubReference names a FederatedReplicaSet in the hub cluster.
type HubReference struct {
	// Namespace of the FederatedReplicaSet in the hub.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// Name of the FederatedReplicaSet in the hub.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the FederatedReplicaSet in the hub.
	UID types.UID `json:"uid"`
	// Generation of the FederatedReplicaSet the target was planned for.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Generation int64 `json:"generation,omitempty"`
}

// MemberReplicaSetStatus is the member's own view, written by its worker.
type MemberReplicaSetStatus struct {
	// Replicas is the number of active pods owned by this object.
	// +optional
	Replicas int32 `json:"replicas"`
	// FullyLabeledReplicas is the number of owned pods carrying every template label.
	// +optional
	FullyLabeledReplicas int32 `json:"fullyLabeledReplicas,omitempty"`
	// ReadyReplicas is the number of ready owned pods.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty"`
	// AvailableReplicas is the number of owned pods ready for at least minReadySeconds.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// TerminatingReplicas is the number of owned pods being deleted.
	// +optional
	TerminatingReplicas *int32 `json:"terminatingReplicas,omitempty"`
	// Restarts is the sum of the active pods' container restart counts
	// (app containers and sidecars): the rollout's health gate compares a
	// new revision's with the old one's.
	// +optional
	Restarts int32 `json:"restarts,omitempty"`
	// CrashLoopingReplicas is the number of active pods with a container
	// waiting in CrashLoopBackOff.
	// +optional
	CrashLoopingReplicas int32 `json:"crashLoopingReplicas,omitempty"`
	// ObservedGeneration is the generation of this object the status reflects.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions, for example ReplicaFailure.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// MemberReplicaSet lives in a member cluster. It is the controller owner of the
// pods replicafed runs there for one FederatedReplicaSet: no other controller
// adopts them, the member's garbage collector removes them with it, and an
// operator inside the member can see which hub object they serve and the
// member's share.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mrs
// +kubebuilder:printcolumn:name="Target",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Hub",type=string,JSONPath=`.spec.hub.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberReplicaSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemberReplicaSetSpec   `json:"spec"`
	Status MemberReplicaSetStatus `json:"status,omitempty"`
}

// MemberReplicaSetList is a list of MemberReplicaSets.
// +kubebuilder:object:root=true
type MemberReplicaSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberReplicaSet `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &MemberReplicaSet{}, &MemberReplicaSetList{})
}
