package propagation

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/federation/aggregate"
)

// problem is one thing that keeps a FederatedReplicaSet's dependencies from
// being in place.
type problem struct {
	// Member is empty for a problem in the hub.
	Member string
	Key    dependencies.Key
	// Reason is one of the v1alpha1.ReasonDependency* values.
	Reason  string
	Message string
}

func (p problem) String() string {
	if p.Member == "" {
		return fmt.Sprintf("%s: %s", p.Key, p.Message)
	}
	return fmt.Sprintf("%s in %s: %s", p.Key, p.Member, p.Message)
}

// reasonRank orders reasons for the condition: the one needing the user
// first.
var reasonRank = map[string]int{
	ReasonDependencyInvalidReference:    0,
	v1alpha1.ReasonDependencyConflict:   1,
	v1alpha1.ReasonDependencyNotFound:   2,
	v1alpha1.ReasonDependencyCopyFailed: 3,
}

// maxConditionMessage is metav1.Condition's message limit.
const maxConditionMessage = aggregate.MaxConditionMessage

// condition returns the DependenciesPropagated condition for one
// FederatedReplicaSet: True when nothing stands in the way (copies counts
// the objects kept for it, members the members they are in), otherwise
// False with the most pressing reason and every problem, sorted.
func condition(problems []problem, copies, members int, generation int64) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.ConditionDependenciesPropagated, ObservedGeneration: generation}
	if len(problems) == 0 {
		c.Status, c.Reason = metav1.ConditionTrue, v1alpha1.ReasonDependenciesPropagated
		switch {
		case copies == 0:
			c.Message = "the template references no ConfigMap, Secret, ServiceAccount or PersistentVolumeClaim to copy"
		case members == 0:
			c.Message = "no member runs replicas; nothing to copy"
		default:
			c.Message = fmt.Sprintf("%d object(s) copied to %d member(s)", copies, members)
		}
		return c
	}
	ps := slices.Clone(problems)
	slices.SortFunc(ps, func(a, b problem) int {
		return cmp.Or(cmp.Compare(reasonRank[a.Reason], reasonRank[b.Reason]), cmp.Compare(a.Member, b.Member),
			cmp.Compare(a.Key.Kind, b.Key.Kind), cmp.Compare(a.Key.Name, b.Key.Name), cmp.Compare(a.Message, b.Message))
	})
	ps = slices.Compact(ps)
	msgs := make([]string, len(ps))
	for i, p := range ps {
		// A member's error text can be of any length: each is cut, so
		// one cannot crowd out the others.
		p.Message = aggregate.Truncate(p.Message, aggregate.MaxMessage)
		msgs[i] = p.String()
	}
	c.Status, c.Reason = metav1.ConditionFalse, ps[0].Reason
	c.Message = aggregate.Truncate(strings.Join(msgs, "; "), maxConditionMessage)
	return c
}

// gvk is the group, version and kind of a dependency kind (all core/v1).
func gvk(kind dependencies.Kind) schema.GroupVersionKind {
	return schema.GroupVersionKind{Version: "v1", Kind: string(kind)}
}
