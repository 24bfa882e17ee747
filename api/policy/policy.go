// Package policy embeds the admission policies on
// FederatedReplicaSets, for the Helm chart (copied by `make generate`) and for
// tests that install them: the selector policy (the selector must match the
// template labels) and the Pod Security policies (PodSecurity); and the
// mutating policy that adds the cascade finalizer at admission (Finalizer).
package policy

import (
	"bytes"
	_ "embed"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

//go:embed federatedreplicaset-selector.yaml
var raw []byte

// Selector returns the policy and its binding.
func Selector() (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	pol := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	if err := dec.Decode(pol); err != nil {
		return nil, nil, fmt.Errorf("decoding embedded admission policy: %w", err)
	}
	bind := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	if err := dec.Decode(bind); err != nil {
		return nil, nil, fmt.Errorf("decoding embedded admission policy binding: %w", err)
	}
	return pol, bind, nil
}
