// Package v1alpha1 holds the replicafed.io/v1alpha1 API: the FederatedReplicaSet
// that users apply to the hub, and the MemberReplicaSet that replicafed keeps
// in every member cluster as the controller owner of the pods it runs there.
//
// +kubebuilder:object:generate=true
// +groupName=replicafed.io
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "replicafed.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
