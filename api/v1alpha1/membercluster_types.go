package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MemberClusterStatus is what the hub knows of one registered member
// cluster. The raft leader writes it, at most every few seconds.
type MemberClusterStatus struct {
	// Health is the member's reachability as the leader probes it.
	// +optional
	Health ClusterHealth `json:"health,omitempty"`
	// HealthSince is when Health last changed.
	// +optional
	HealthSince *metav1.Time `json:"healthSince,omitempty"`
	// LastProbeError is the latest failed probe's error, empty after a
	// successful probe.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	LastProbeError string `json:"lastProbeError,omitempty"`
	// Problem says why replicafed cannot work in the member, for example
	// a kubeconfig Secret that cannot be read; empty when none.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Problem string `json:"problem,omitempty"`
	// KubernetesVersion is the member API server's version.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
	// Nodes is the number of nodes in the member.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`
	// ReadyNodes is the number of Ready, schedulable nodes.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`
	// Allocatable sums the Ready, schedulable nodes' allocatable cpu, memory
	// and pods.
	// +optional
	Allocatable corev1.ResourceList `json:"allocatable,omitempty"`
	// Free estimates what is left of Allocatable after the requests of the
	// pods bound to those nodes (a scheduler may still refuse a pod that
	// fits these sums).
	// +optional
	Free corev1.ResourceList `json:"free,omitempty"`
	// FederatedReplicaSets is how many FederatedReplicaSets place replicas
	// in the member (a non-zero target).
	// +optional
	FederatedReplicaSets int32 `json:"federatedReplicaSets,omitempty"`
	// Pods is how many pods of FederatedReplicaSets the member runs.
	// +optional
	Pods int32 `json:"pods,omitempty"`
	// Labels are the member's labels, matched by placement.clusterSelector.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// Taints are the member's taints from its registration.
	// +optional
	Taints []ClusterTaint `json:"taints,omitempty"`
	// Conditions of the member's registration: CredentialsRefused and
	// NameConflict (True while its kubeconfig Secret is not used, the
	// message naming the field or the Secret) and CredentialsExpiring.
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=16
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// LastUpdateTime is when this status last changed.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// MemberCluster shows one registered member cluster. It has no spec:
// members are registered by kubeconfig Secrets or the configuration file,
// and replicafed creates and deletes these objects to match.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=mc
// +kubebuilder:printcolumn:name="Health",type=string,JSONPath=`.status.health`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.kubernetesVersion`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.nodes`
// +kubebuilder:printcolumn:name="FRS",type=integer,JSONPath=`.status.federatedReplicaSets`
// +kubebuilder:printcolumn:name="Pods",type=integer,JSONPath=`.status.pods`
// +kubebuilder:printcolumn:name="Problem",type=string,JSONPath=`.status.problem`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MemberCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Status MemberClusterStatus `json:"status,omitempty"`
}

// MemberClusterList is a list of MemberClusters.
// +kubebuilder:object:root=true
type MemberClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MemberCluster `json:"items"`
}

func init() {
	knownTypes = append(knownTypes, &MemberCluster{}, &MemberClusterList{})
}
