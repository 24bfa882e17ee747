package planner

import (
	"fmt"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// Reasons of a Problem, CamelCase for conditions and events.
const (
	ReasonInvalidReplicas        = "InvalidReplicas"
	ReasonInvalidClusterSelector = "InvalidClusterSelector"
	ReasonInvalidPlacement       = "InvalidPlacement"
	ReasonInvalidToleration      = "InvalidToleration"
	ReasonInvalidDuration        = "InvalidDuration"
	ReasonInvalidFailover        = "InvalidFailover"
	ReasonInvalidMoveBudget      = "InvalidMoveBudget"
)

// Problem is a spec field Plan cannot take as written. Plan itself never
// fails: it reads an invalid selector as matching nothing, an unknown
// operator as tolerating nothing and a bad budget or duration as its
// default, and each of those can move or delete replicas the user never
// meant to touch. A caller must not commit a plan for a spec with problems.
type Problem struct {
	// Field is the path of the offending field, such as
	// spec.placement.clusterSelector.matchExpressions[0].operator.
	Field string
	// Reason names the kind of problem (the Reason* constants).
	Reason string
	// Message says what is wrong with the value.
	Message string
}

// String renders the problem as "field: message".
func (p Problem) String() string { return p.Field + ": " + p.Message }

// Check returns the problems of the spec fields Plan reads (replicas,
// placement, failover and moveBudget), in field order; nil when Plan can
// take every one as written. It checks what the CRD schema states, so an
// object that reached the controller past an older schema (or with a value
// the schema cannot express) is reported instead of planned.
func Check(spec *v1alpha1.FederatedReplicaSetSpec) []Problem {
	var c checker
	root := field.NewPath("spec")
	if spec.Replicas != nil && *spec.Replicas < 0 {
		c.add(root.Child("replicas"), ReasonInvalidReplicas, "%d is negative", *spec.Replicas)
	}
	c.placement(root.Child("placement"), &spec.Placement)
	c.failover(root.Child("failover"), &spec.Failover)
	c.budget(root.Child("moveBudget"), &spec.MoveBudget)
	return c.problems
}

type checker struct{ problems []Problem }

func (c *checker) add(p *field.Path, reason, format string, args ...any) {
	c.problems = append(c.problems, Problem{Field: p.String(), Reason: reason, Message: fmt.Sprintf(format, args...)})
}

func (c *checker) placement(p *field.Path, pl *v1alpha1.Placement) {
	for i := range pl.Clusters {
		c.preference(p.Child("clusters").Index(i), &pl.Clusters[i])
	}
	if pl.ClusterSelector != nil {
		c.selector(p.Child("clusterSelector"), pl.ClusterSelector)
	}
	switch pl.Strategy {
	case "", v1alpha1.StrategyWeighted, v1alpha1.StrategyAvailableCapacity, v1alpha1.StrategyCostOrdered:
	default:
		c.add(p.Child("strategy"), ReasonInvalidPlacement, "unsupported value %q (Weighted, AvailableCapacity or CostOrdered)", short(string(pl.Strategy)))
	}
	switch pl.Mode {
	case "", v1alpha1.PlacementDivided, v1alpha1.PlacementDuplicated:
	default:
		c.add(p.Child("mode"), ReasonInvalidPlacement, "unsupported value %q (Divided or Duplicated)", short(string(pl.Mode)))
	}
	for i := range pl.SpreadConstraints {
		sp := p.Child("spreadConstraints").Index(i)
		s := &pl.SpreadConstraints[i]
		if errs := validation.IsQualifiedName(s.TopologyKey); len(errs) > 0 {
			c.add(sp.Child("topologyKey"), ReasonInvalidPlacement, "%q is not a label key: %s", short(s.TopologyKey), errs[0])
		}
		if s.MinGroups != nil && *s.MinGroups < 1 {
			c.add(sp.Child("minGroups"), ReasonInvalidPlacement, "%d is below 1", *s.MinGroups)
		}
		if s.MaxGroups != nil && *s.MaxGroups < 1 {
			c.add(sp.Child("maxGroups"), ReasonInvalidPlacement, "%d is below 1", *s.MaxGroups)
		}
		if s.MinGroups != nil && s.MaxGroups != nil && *s.MinGroups > *s.MaxGroups {
			c.add(sp, ReasonInvalidPlacement, "minGroups %d exceeds maxGroups %d", *s.MinGroups, *s.MaxGroups)
		}
	}
	for i := range pl.Tolerations {
		c.toleration(p.Child("tolerations").Index(i), &pl.Tolerations[i])
	}
}

func (c *checker) preference(p *field.Path, pref *v1alpha1.ClusterPreference) {
	if pref.Name == "" {
		c.add(p.Child("name"), ReasonInvalidPlacement, "must not be empty")
	}
	for _, f := range []struct {
		name string
		v    *int32
	}{{"weight", pref.Weight}, {"minReplicas", pref.MinReplicas}, {"maxReplicas", pref.MaxReplicas}, {"deletionCost", pref.DeletionCost}} {
		if f.v != nil && *f.v < 0 {
			c.add(p.Child(f.name), ReasonInvalidPlacement, "%d is negative", *f.v)
		}
	}
	if pref.MinReplicas != nil && pref.MaxReplicas != nil && *pref.MinReplicas > *pref.MaxReplicas {
		c.add(p, ReasonInvalidPlacement, "minReplicas %d exceeds maxReplicas %d", *pref.MinReplicas, *pref.MaxReplicas)
	}
}

// selector checks a label selector as metav1.LabelSelectorAsSelector would
// parse it (operators are case-sensitive; In and NotIn need values, Exists
// and DoesNotExist take none; keys and values must be label syntax), naming
// the offending entry.
func (c *checker) selector(p *field.Path, s *metav1.LabelSelector) {
	for k, v := range s.MatchLabels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			c.add(p.Child("matchLabels"), ReasonInvalidClusterSelector, "key %q is not a label key: %s", short(k), errs[0])
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			c.add(p.Child("matchLabels").Key(k), ReasonInvalidClusterSelector, "%q is not a label value: %s", short(v), errs[0])
		}
	}
	for i, e := range s.MatchExpressions {
		ep := p.Child("matchExpressions").Index(i)
		if errs := validation.IsQualifiedName(e.Key); len(errs) > 0 {
			c.add(ep.Child("key"), ReasonInvalidClusterSelector, "%q is not a label key: %s", short(e.Key), errs[0])
		}
		switch e.Operator {
		case metav1.LabelSelectorOpIn, metav1.LabelSelectorOpNotIn:
			if len(e.Values) == 0 {
				c.add(ep.Child("values"), ReasonInvalidClusterSelector, "operator %s needs at least one value", short(string(e.Operator)))
			}
		case metav1.LabelSelectorOpExists, metav1.LabelSelectorOpDoesNotExist:
			if len(e.Values) > 0 {
				c.add(ep.Child("values"), ReasonInvalidClusterSelector, "operator %s takes no values", short(string(e.Operator)))
			}
		default:
			c.add(ep.Child("operator"), ReasonInvalidClusterSelector, "unsupported operator %q (In, NotIn, Exists or DoesNotExist, case-sensitive)", short(string(e.Operator)))
		}
		for j, v := range e.Values {
			if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
				c.add(ep.Child("values").Index(j), ReasonInvalidClusterSelector, "%q is not a label value: %s", short(v), errs[0])
			}
		}
	}
}

func (c *checker) toleration(p *field.Path, t *v1alpha1.ClusterToleration) {
	switch t.Operator {
	case "", v1alpha1.TolerationEqual:
		if t.Key == "" {
			c.add(p.Child("key"), ReasonInvalidToleration, "an empty key requires operator Exists")
		}
	case v1alpha1.TolerationExists:
		if t.Value != "" {
			c.add(p.Child("value"), ReasonInvalidToleration, "must be empty with operator Exists")
		}
	default:
		c.add(p.Child("operator"), ReasonInvalidToleration, "unsupported operator %q (Exists or Equal, case-sensitive)", short(string(t.Operator)))
	}
	switch t.Effect {
	case "", v1alpha1.TaintNoSchedule, v1alpha1.TaintNoExecute:
	default:
		c.add(p.Child("effect"), ReasonInvalidToleration, "unsupported effect %q (NoSchedule or NoExecute, case-sensitive)", short(string(t.Effect)))
	}
	if t.TolerationSeconds != nil && *t.TolerationSeconds < 0 {
		c.add(p.Child("tolerationSeconds"), ReasonInvalidToleration, "%d is negative", *t.TolerationSeconds)
	}
}

func (c *checker) failover(p *field.Path, f *v1alpha1.Failover) {
	for _, d := range []struct {
		name string
		v    *metav1.Duration
	}{{"unreachableGracePeriod", f.UnreachableGracePeriod}, {"unschedulableThreshold", f.UnschedulableThreshold}} {
		if d.v != nil && d.v.Duration < 0 {
			c.add(p.Child(d.name), ReasonInvalidDuration, "%s is negative", d.v.Duration)
		}
	}
	switch f.MoveBack {
	case "", v1alpha1.MoveBackNever, v1alpha1.MoveBackOnRecovery:
	default:
		c.add(p.Child("moveBack"), ReasonInvalidFailover, "unsupported value %q (Never or OnRecovery)", short(string(f.MoveBack)))
	}
}

func (c *checker) budget(p *field.Path, b *v1alpha1.MoveBudget) {
	for _, f := range []struct {
		name string
		v    *intstr.IntOrString
	}{{"maxSurge", b.MaxSurge}, {"maxUnavailable", b.MaxUnavailable}} {
		if f.v == nil {
			continue
		}
		// Scaled against 100 so that the sign of any percentage shows.
		got, err := intstr.GetScaledValueFromIntOrPercent(f.v, 100, false)
		switch {
		case err != nil:
			c.add(p.Child(f.name), ReasonInvalidMoveBudget, "%q is neither a number nor a percentage", short(f.v.String()))
		case got < 0:
			c.add(p.Child(f.name), ReasonInvalidMoveBudget, "%s is negative", f.v.String())
		}
	}
}

// maxQuoted bounds a user's value quoted in a message: a stored object may
// hold values of any length, and a message must stay short.
const maxQuoted = 64

// short returns s, cut to maxQuoted bytes at a rune boundary and marked.
func short(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := maxQuoted - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
