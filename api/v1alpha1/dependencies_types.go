package v1alpha1

// Dependency propagation (spec.propagateDependencies): the condition on a
// FederatedReplicaSet and the marks on the copies in members.
const (
	// ConditionDependenciesPropagated is True when every dependency the
	// template references is copied to every member with replicas; False,
	// with one of the Reason* values below, when something stands in the
	// way. It is present only while spec.propagateDependencies is true.
	ConditionDependenciesPropagated = "DependenciesPropagated"

	// ReasonDependenciesPropagated: every copy is in place.
	ReasonDependenciesPropagated = "Propagated"
	// ReasonDependencyConflict: a member holds an object of the same kind
	// and name that replicafed did not create; it is left untouched (pods
	// there use it) and the hub's version is not copied.
	ReasonDependencyConflict = "Conflict"
	// ReasonDependencyNotFound: a required dependency does not exist in the
	// hub namespace, so there is nothing to copy; pods wait for it.
	ReasonDependencyNotFound = "NotFoundInHub"
	// ReasonDependencyCopyFailed: reading the hub object or writing a member
	// copy failed (for example forbidden: see RBAC under Dependencies in
	// docs/how-it-works.md).
	ReasonDependencyCopyFailed = "CopyFailed"

	// LabelDependency marks an object in a member as a copy replicafed made
	// and manages (value "true"). Objects without it are never changed.
	LabelDependency = "replicafed.io/dependency"
	// AnnotationDependencyOf lists, comma-separated and sorted, the
	// FederatedReplicaSets (in the same namespace) a copy is kept for; the
	// copy is removed when the last of them no longer needs it.
	AnnotationDependencyOf = "replicafed.io/dependency-of"
)
