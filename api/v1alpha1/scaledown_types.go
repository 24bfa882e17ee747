package v1alpha1

// ScaleDown tunes which pods leave a member cluster when its target drops.
type ScaleDown struct {
	// NodeCost ranks a member's nodes by how cheap they are to free, so
	// scale-down removes pods from the cheapest nodes first. Unset uses the
	// controller's configured default (controller.defaultNodeCost), if any.
	// +optional
	NodeCost *NodeCost `json:"nodeCost,omitempty"`
}

// NodeCost names a node label whose value says how cheap a node is to free:
// either the position of the value in Values (first is cheapest), or, with
// Integer, the value read as an integer (lower is cheaper). Nodes without
// the label, with a value not listed or not an integer, and pods whose node
// is unknown come after every ranked node. In a member, among pods that the
// upstream rules for unassigned, phase, readiness and an explicit
// pod-deletion-cost annotation do not separate, pods on cheaper nodes are
// deleted first; the remaining upstream rules follow.
// +kubebuilder:validation:XValidation:rule="(has(self.values) && size(self.values) > 0) != (has(self.integer) && self.integer)",message="exactly one of values or integer: true must be set"
type NodeCost struct {
	// Key is the node label key, for example karpenter.sh/capacity-type.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`
	Key string `json:"key"`

	// Values lists label values from cheapest to dearest to free, for
	// example [spot, on-demand, reserved]. A repeated value keeps its first
	// position.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	// +optional
	Values []string `json:"values,omitempty"`

	// Integer reads the label value as a base-10 integer: the lower the
	// value, the cheaper the node is to free (as pod-deletion-cost: lower
	// goes first).
	// +optional
	Integer bool `json:"integer,omitempty"`
}
