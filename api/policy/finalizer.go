package policy

import (
	"bytes"
	_ "embed"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// FinalizerPolicyName names the finalizer policy and its binding.
const FinalizerPolicyName = "federatedreplicasets-finalizer.replicafed.io"

//go:embed federatedreplicaset-finalizer.yaml
var finalizerRaw []byte

// Finalizer returns the MutatingAdmissionPolicy that adds the
// replicafed.io/cascade finalizer to FederatedReplicaSets as they are
// written, and its binding. It needs a hub that serves
// admissionregistration.k8s.io/v1 MutatingAdmissionPolicy (Kubernetes 1.36
// and later); replicafed adds the finalizer itself where it is absent.
// `make generate` copies the file into the chart (files/policy), whose
// template binds it.
func Finalizer() (*admissionregistrationv1.MutatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicyBinding, error) {
	pol := &admissionregistrationv1.MutatingAdmissionPolicy{}
	if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(finalizerRaw), 4096).Decode(pol); err != nil {
		return nil, nil, fmt.Errorf("decoding embedded finalizer policy: %w", err)
	}
	bind := &admissionregistrationv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: pol.Name},
		Spec:       admissionregistrationv1.MutatingAdmissionPolicyBindingSpec{PolicyName: pol.Name},
	}
	return pol, bind, nil
}
