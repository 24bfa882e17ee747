package policy

import (
	"bytes"
	_ "embed"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
)

// Level is a Pod Security Standard level enforced on FederatedReplicaSet
// pod templates.
type Level string

// Pod Security Standard levels.
const (
	// LevelPrivileged enforces nothing.
	LevelPrivileged Level = "privileged"
	// LevelBaseline forbids known privilege escalations (the default).
	LevelBaseline Level = "baseline"
	// LevelRestricted adds the hardening best practices to baseline.
	LevelRestricted Level = "restricted"
)

// Files of the Pod Security policies; `make generate` copies them into the
// chart (charts/replicafed/files/policy), whose template binds them by level.
const (
	PodSecurityBaselineFile   = "federatedreplicaset-podsecurity-baseline.yaml"
	PodSecurityRestrictedFile = "federatedreplicaset-podsecurity-restricted.yaml"
)

//go:embed federatedreplicaset-podsecurity-baseline.yaml
var baselineRaw []byte

//go:embed federatedreplicaset-podsecurity-restricted.yaml
var restrictedRaw []byte

// PodSecurity returns the policies enforcing level on FederatedReplicaSet
// templates and a Deny binding for each: none for privileged, the baseline
// policy for baseline, and the baseline and restricted policies for
// restricted (restricted is baseline plus its own rules, as in the standard).
func PodSecurity(level Level) ([]*admissionregistrationv1.ValidatingAdmissionPolicy, []*admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	var raws [][]byte
	switch level {
	case LevelPrivileged:
	case LevelBaseline:
		raws = [][]byte{baselineRaw}
	case LevelRestricted:
		raws = [][]byte{baselineRaw, restrictedRaw}
	default:
		return nil, nil, fmt.Errorf("unknown Pod Security level %q (want privileged, baseline or restricted)", level)
	}
	var pols []*admissionregistrationv1.ValidatingAdmissionPolicy
	var binds []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	for _, raw := range raws {
		pol := &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096).Decode(pol); err != nil {
			return nil, nil, fmt.Errorf("decoding embedded Pod Security policy: %w", err)
		}
		pols = append(pols, pol)
		binds = append(binds, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
			ObjectMeta: metav1.ObjectMeta{Name: pol.Name},
			Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
				PolicyName:        pol.Name,
				ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			},
		})
	}
	return pols, binds, nil
}
