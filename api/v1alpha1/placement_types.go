package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// PlacementMode says whether replicas are divided among members or duplicated
// in each of them.
// +kubebuilder:validation:Enum=Divided;Duplicated
type PlacementMode string

const (
	// PlacementDivided divides spec.replicas among the members (the default).
	PlacementDivided PlacementMode = "Divided"
	// PlacementDuplicated runs spec.replicas in every selected member, up to
	// each member's maxReplicas; strategy, weight and minReplicas do not apply.
	PlacementDuplicated PlacementMode = "Duplicated"
)

// SpreadConstraint spreads replicas over groups of members: the members that
// share one value of the member label TopologyKey form a group.
// +kubebuilder:validation:XValidation:rule="!has(self.minGroups) || !has(self.maxGroups) || self.minGroups <= self.maxGroups",message="minGroups must not exceed maxGroups"
type SpreadConstraint struct {
	// TopologyKey is a member cluster label key, for example
	// topology.kubernetes.io/region. Members without the label take no part.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	TopologyKey string `json:"topologyKey"`

	// MinGroups is the fewest groups that must run replicas; fewer eligible
	// groups make the constraint unsatisfiable, which status reports.
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MinGroups *int32 `json:"minGroups,omitempty"`

	// MaxGroups is the most groups that may run replicas; unset means every
	// eligible group.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +optional
	MaxGroups *int32 `json:"maxGroups,omitempty"`
}

// TaintEffect is what a member cluster's taint does to replicas that do not
// tolerate it.
// +kubebuilder:validation:Enum=NoSchedule;NoExecute
type TaintEffect string

const (
	// TaintNoSchedule: no new replicas on the member; those it runs stay.
	TaintNoSchedule TaintEffect = "NoSchedule"
	// TaintNoExecute: the member's replicas are planned elsewhere, at once or
	// after the toleration's tolerationSeconds.
	TaintNoExecute TaintEffect = "NoExecute"
)

// TolerationOperator says how a toleration matches a taint's value.
// +kubebuilder:validation:Enum=Exists;Equal
type TolerationOperator string

const (
	// TolerationExists matches any value (and, with an empty key, any taint).
	TolerationExists TolerationOperator = "Exists"
	// TolerationEqual matches the taint whose value equals the toleration's.
	TolerationEqual TolerationOperator = "Equal"
)

// ClusterTaint is a taint on a member cluster, given where the member is
// registered (for example as JSON in an annotation of its kubeconfig Secret).
type ClusterTaint struct {
	// Key of the taint.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Key string `json:"key"`
	// Value of the taint.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Value string `json:"value,omitempty"`
	// Effect of the taint.
	Effect TaintEffect `json:"effect"`
	// TimeAdded is when the taint was added; tolerationSeconds count from it.
	// +optional
	TimeAdded *metav1.Time `json:"timeAdded,omitempty"`
}

// ClusterToleration lets a FederatedReplicaSet's replicas run on members with
// matching taints, as a pod's toleration does with a node's taints.
// +kubebuilder:validation:XValidation:rule="!has(self.operator) || self.operator != 'Exists' || !has(self.value) || size(self.value) == 0",message="value must be empty when operator is Exists"
// +kubebuilder:validation:XValidation:rule="(has(self.key) && size(self.key) > 0) || (has(self.operator) && self.operator == 'Exists')",message="an empty key requires operator Exists"
// +kubebuilder:validation:XValidation:rule="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",message="tolerationSeconds requires effect NoExecute"
type ClusterToleration struct {
	// Key is the taint key matched; empty with operator Exists matches every
	// taint.
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^(([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`
	// +optional
	Key string `json:"key,omitempty"`
	// Operator is Equal (the default) or Exists.
	// +kubebuilder:default=Equal
	// +optional
	Operator TolerationOperator `json:"operator,omitempty"`
	// Value is matched with operator Equal.
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Value string `json:"value,omitempty"`
	// Effect is the taint effect matched; empty matches both effects.
	// +optional
	Effect TaintEffect `json:"effect,omitempty"`
	// TolerationSeconds bounds how long a NoExecute taint is tolerated,
	// counted from the taint's timeAdded; unset tolerates it for ever, 0
	// not at all. At most ten years (315360000): longer is "for ever",
	// which leaving it unset says.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=315360000
	// +optional
	TolerationSeconds *int64 `json:"tolerationSeconds,omitempty"`
}

// ConditionSpreadUnsatisfied is True when a spread constraint cannot be met
// (fewer eligible groups than minGroups, or fewer replicas than the groups
// chosen); the replicas are then placed on the groups that are eligible.
const ConditionSpreadUnsatisfied = "SpreadUnsatisfied"
