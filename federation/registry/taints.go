package registry

import (
	"encoding/json"
	"fmt"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// AnnotationTaints on a member's kubeconfig Secret holds the member's taints
// as a JSON list of v1alpha1.ClusterTaint, for example
// [{"key":"maintenance","effect":"NoExecute","timeAdded":"2026-05-01T10:00:00Z"}].
// Set timeAdded when adding a NoExecute taint: tolerationSeconds count from
// it. Without it they count from when the raft leader first saw the taint,
// which a new leader does again (so a handover can only lengthen a
// toleration, never end it early).
const AnnotationTaints = "replicafed.io/taints"

// TaintInvalid is the NoSchedule taint a member gets when AnnotationTaints
// cannot be read: an operator who meant to keep replicas away is not
// overruled by a typo, and a running member keeps its pods.
const TaintInvalid = "replicafed.io/invalid-taints"

// TaintCredentialsRefused is the NoSchedule taint a member registered by a
// refused kubeconfig Secret gets (ConditionCredentialsRefused): replicafed
// cannot reach it, so no new replicas go there, and none are evicted for it.
const TaintCredentialsRefused = "replicafed.io/credentials-refused"

// ParseTaints reads an AnnotationTaints value. An empty value means no taint.
// On error it returns the TaintInvalid taint and the reason.
func ParseTaints(value string) ([]v1alpha1.ClusterTaint, string) {
	if value == "" {
		return nil, ""
	}
	var taints []v1alpha1.ClusterTaint
	err := json.Unmarshal([]byte(value), &taints)
	if err == nil {
		for i, t := range taints {
			switch {
			case t.Key == "":
				err = fmt.Errorf("taint %d has no key", i)
			case t.Effect != v1alpha1.TaintNoSchedule && t.Effect != v1alpha1.TaintNoExecute:
				err = fmt.Errorf("taint %q has effect %q, want NoSchedule or NoExecute", t.Key, t.Effect)
			}
			if err != nil {
				break
			}
		}
	}
	if err != nil {
		return []v1alpha1.ClusterTaint{{Key: TaintInvalid, Effect: v1alpha1.TaintNoSchedule}},
			fmt.Sprintf("annotation %s is not a valid list of taints: %v", AnnotationTaints, err)
	}
	return taints, ""
}
