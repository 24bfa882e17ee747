// Package v1alpha1 holds the replicafed.io/v1alpha1 API: the FederatedReplicaSet
// that users apply to the hub, and the MemberReplicaSet that replicafed keeps
// in every member cluster as the controller owner of the pods it runs there.
//
// +kubebuilder:object:generate=true
// +groupName=replicafed.io
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of every type in this package.
	GroupVersion = schema.GroupVersion{Group: "replicafed.io", Version: "v1alpha1"}

	// SchemeBuilder registers the types of this package with a runtime.Scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types of this package to a runtime.Scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	// knownTypes is filled by each type's file, so a new kind registers
	// itself beside its definition.
	knownTypes []runtime.Object
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, knownTypes...)
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
