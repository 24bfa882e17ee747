package v1alpha1

import (
	"fmt"
	"regexp"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Bounds the CRD schema puts on FederatedReplicaSet fields; Validate checks
// the same ones, for objects admitted before the schema had them.
const (
	// MaxNameLength bounds a FederatedReplicaSet's name: it is a label value
	// in members (LabelFederatedName).
	MaxNameLength = validation.LabelValueMaxLength
	// MaxReplicas bounds spec.replicas and the per-member counts.
	MaxReplicas = 1000000
	// MaxMinReadySeconds bounds minReadySeconds (one day).
	MaxMinReadySeconds = 86400
	// MaxWeight bounds a member's weight.
	MaxWeight = 1000000
	// MaxDeletionCost bounds a member's deletionCost.
	MaxDeletionCost = 1000000
	// MaxTolerationSeconds bounds tolerationSeconds (ten years).
	MaxTolerationSeconds = 10 * 365 * 24 * 3600
	// MaxSelectorExpressions bounds a selector's matchExpressions.
	MaxSelectorExpressions = 32
	// MaxSelectorLabels bounds a selector's matchLabels.
	MaxSelectorLabels = 64
)

var (
	surgePercent       = regexp.MustCompile(`^[0-9]{1,3}%$`)
	unavailablePercent = regexp.MustCompile(`^([0-9]|[1-9][0-9]|100)%$`)
	canaryPercent      = regexp.MustCompile(`^([1-9]|[1-9][0-9]|100)%$`)
	zeroPercent        = regexp.MustCompile(`^0+%$`)
	stageName          = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
)

// Validate checks a FederatedReplicaSet as its CRD schema would, so one
// stored under an older or more permissive schema is reported, field by
// field, instead of acted upon. It returns every problem, with paths rooted
// at the object (metadata.name, spec.failover.unreachableGracePeriod, ...).
// Of the pod template it checks only that its labels match the selector:
// the rest is the members' API servers' to check.
func (f *FederatedReplicaSet) Validate() field.ErrorList {
	var errs field.ErrorList
	if len(f.Name) > MaxNameLength {
		errs = append(errs, field.TooLong(field.NewPath("metadata", "name"), "", MaxNameLength))
	}
	return append(errs, f.Spec.Validate()...)
}

// Validate checks the spec's fields against the schema's rules; see
// FederatedReplicaSet.Validate. Paths start at "spec".
func (s *FederatedReplicaSetSpec) Validate() field.ErrorList {
	p := field.NewPath("spec")
	var errs field.ErrorList
	if s.Replicas != nil {
		errs = append(errs, between(p.Child("replicas"), int64(*s.Replicas), 0, MaxReplicas)...)
	}
	errs = append(errs, between(p.Child("minReadySeconds"), int64(s.MinReadySeconds), 0, MaxMinReadySeconds)...)
	if s.Selector == nil {
		errs = append(errs, field.Required(p.Child("selector"), ""))
	} else {
		selErrs := validateSelector(s.Selector, p.Child("selector"))
		errs = append(errs, selErrs...)
		if len(s.Selector.MatchLabels) == 0 && len(s.Selector.MatchExpressions) == 0 {
			errs = append(errs, field.Invalid(p.Child("selector"), "", "selector must not be empty"))
		} else if len(selErrs) == 0 {
			// The admission policy's rule (api/policy), for objects admitted
			// without it.
			if sel, err := metav1.LabelSelectorAsSelector(s.Selector); err == nil && !sel.Matches(labels.Set(s.Template.Labels)) {
				errs = append(errs, field.Invalid(p.Child("template", "metadata", "labels"), labels.Set(s.Template.Labels).String(), "must match spec.selector"))
			}
		}
	}
	errs = append(errs, s.Placement.validate(p.Child("placement"))...)
	errs = append(errs, s.Failover.validate(p.Child("failover"))...)
	errs = append(errs, s.MoveBudget.validate(p.Child("moveBudget"))...)
	if s.DeletionPolicy != "" && s.DeletionPolicy != DeletionPolicyDelete && s.DeletionPolicy != DeletionPolicyOrphan {
		errs = append(errs, field.NotSupported(p.Child("deletionPolicy"), s.DeletionPolicy, []DeletionPolicy{DeletionPolicyDelete, DeletionPolicyOrphan}))
	}
	if s.UpdateStrategy != nil {
		errs = append(errs, s.UpdateStrategy.validate(p.Child("updateStrategy"), s.MinReadySeconds)...)
		if s.UpdateStrategy.Type == UpdateRolling && isZero(s.MoveBudget.MaxSurge) && (s.MoveBudget.MaxUnavailable == nil || isZero(s.MoveBudget.MaxUnavailable)) {
			errs = append(errs, field.Invalid(p.Child("moveBudget"), "", "maxSurge and maxUnavailable must not both be 0 with updateStrategy type Rolling: the rollout could never replace a pod"))
		}
	}
	if s.ScaleDown != nil && s.ScaleDown.NodeCost != nil {
		errs = append(errs, s.ScaleDown.NodeCost.validate(p.Child("scaleDown", "nodeCost"))...)
	}
	return errs
}

func (f *Failover) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, d := range []struct {
		name string
		v    *Duration
	}{{"unreachableGracePeriod", f.UnreachableGracePeriod}, {"unschedulableThreshold", f.UnschedulableThreshold}} {
		if d.v == nil {
			continue
		}
		if _, err := d.v.Check(); err != nil {
			errs = append(errs, field.Invalid(p.Child(d.name), string(*d.v), err.Error()))
		}
	}
	if f.MoveBack != "" && f.MoveBack != MoveBackNever && f.MoveBack != MoveBackOnRecovery {
		errs = append(errs, field.NotSupported(p.Child("moveBack"), f.MoveBack, []MoveBackPolicy{MoveBackNever, MoveBackOnRecovery}))
	}
	return errs
}

func (pl *Placement) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(pl.Clusters) > 1000 {
		errs = append(errs, field.TooMany(p.Child("clusters"), len(pl.Clusters), 1000))
	}
	seen := make(map[string]bool, len(pl.Clusters))
	for i := range pl.Clusters {
		c := &pl.Clusters[i]
		cp := p.Child("clusters").Index(i)
		for _, msg := range validation.IsDNS1123Subdomain(c.Name) {
			errs = append(errs, field.Invalid(cp.Child("name"), c.Name, msg))
		}
		errs = append(errs, unique(seen, cp.Child("name"), c.Name)...)
		errs = append(errs, optBetween(cp.Child("weight"), c.Weight, 0, MaxWeight)...)
		errs = append(errs, ordered(cp, "minReplicas", c.MinReplicas, "maxReplicas", c.MaxReplicas, 0, MaxReplicas)...)
		errs = append(errs, optBetween(cp.Child("deletionCost"), c.DeletionCost, 0, MaxDeletionCost)...)
	}
	if pl.ClusterSelector != nil {
		errs = append(errs, validateSelector(pl.ClusterSelector, p.Child("clusterSelector"))...)
	}
	if pl.Strategy != "" && !slices.Contains(PlacementStrategies, pl.Strategy) {
		errs = append(errs, field.NotSupported(p.Child("strategy"), pl.Strategy, PlacementStrategies))
	}
	switch pl.Mode {
	case "", PlacementDivided, PlacementDuplicated:
	default:
		errs = append(errs, field.NotSupported(p.Child("mode"), pl.Mode, []PlacementMode{PlacementDivided, PlacementDuplicated}))
	}
	if len(pl.SpreadConstraints) > 4 {
		errs = append(errs, field.TooMany(p.Child("spreadConstraints"), len(pl.SpreadConstraints), 4))
	}
	keys := make(map[string]bool, len(pl.SpreadConstraints))
	for i := range pl.SpreadConstraints {
		c := &pl.SpreadConstraints[i]
		cp := p.Child("spreadConstraints").Index(i)
		for _, msg := range validation.IsQualifiedName(c.TopologyKey) {
			errs = append(errs, field.Invalid(cp.Child("topologyKey"), c.TopologyKey, msg))
		}
		errs = append(errs, unique(keys, cp.Child("topologyKey"), c.TopologyKey)...)
		errs = append(errs, ordered(cp, "minGroups", c.MinGroups, "maxGroups", c.MaxGroups, 1, 1000)...)
	}
	if len(pl.Tolerations) > 64 {
		errs = append(errs, field.TooMany(p.Child("tolerations"), len(pl.Tolerations), 64))
	}
	for i := range pl.Tolerations {
		errs = append(errs, pl.Tolerations[i].validate(p.Child("tolerations").Index(i))...)
	}
	return errs
}

func (t *ClusterToleration) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if t.Key != "" {
		for _, msg := range validation.IsQualifiedName(t.Key) {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, msg))
		}
	}
	for _, msg := range validation.IsValidLabelValue(t.Value) {
		errs = append(errs, field.Invalid(p.Child("value"), t.Value, msg))
	}
	switch t.Operator {
	case "", TolerationEqual:
		if t.Key == "" {
			errs = append(errs, field.Invalid(p.Child("key"), t.Key, "an empty key requires operator Exists"))
		}
	case TolerationExists:
		if t.Value != "" {
			errs = append(errs, field.Invalid(p.Child("value"), t.Value, "value must be empty when operator is Exists"))
		}
	default:
		errs = append(errs, field.NotSupported(p.Child("operator"), t.Operator, []TolerationOperator{TolerationEqual, TolerationExists}))
	}
	switch t.Effect {
	case "", TaintNoSchedule, TaintNoExecute:
	default:
		errs = append(errs, field.NotSupported(p.Child("effect"), t.Effect, []TaintEffect{TaintNoSchedule, TaintNoExecute}))
	}
	if t.TolerationSeconds != nil {
		errs = append(errs, between(p.Child("tolerationSeconds"), *t.TolerationSeconds, 0, MaxTolerationSeconds)...)
		if t.Effect != TaintNoExecute {
			errs = append(errs, field.Invalid(p.Child("tolerationSeconds"), *t.TolerationSeconds, "tolerationSeconds requires effect NoExecute"))
		}
	}
	return errs
}

func (b *MoveBudget) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	check := func(v *intstr.IntOrString, name string, percent *regexp.Regexp, maxPercent string) {
		if v == nil {
			return
		}
		fp := p.Child(name)
		if v.Type == intstr.Int {
			errs = append(errs, between(fp, int64(v.IntVal), 0, MaxReplicas)...)
			return
		}
		if !percent.MatchString(v.StrVal) {
			errs = append(errs, field.Invalid(fp, v.StrVal, fmt.Sprintf("must be a number of pods from 0 to %d or a percentage from 0%% to %s", MaxReplicas, maxPercent)))
		}
	}
	check(b.MaxSurge, "maxSurge", surgePercent, "999%")
	check(b.MaxUnavailable, "maxUnavailable", unavailablePercent, "100%")
	return errs
}

func (n *NodeCost) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	for _, msg := range validation.IsQualifiedName(n.Key) {
		errs = append(errs, field.Invalid(p.Child("key"), n.Key, msg))
	}
	if (len(n.Values) > 0) == n.Integer {
		errs = append(errs, field.Invalid(p, "", "exactly one of values or integer: true must be set"))
	}
	if len(n.Values) > 32 {
		errs = append(errs, field.TooMany(p.Child("values"), len(n.Values), 32))
	}
	for i, v := range n.Values {
		for _, msg := range validation.IsValidLabelValue(v) {
			errs = append(errs, field.Invalid(p.Child("values").Index(i), v, msg))
		}
	}
	return errs
}

// validateSelector checks what LabelSelectorAsSelector would refuse (an
// unknown operator such as "in", values where none belong, bad keys) and the
// schema's size bounds.
func validateSelector(s *metav1.LabelSelector, p *field.Path) field.ErrorList {
	errs := metav1validation.ValidateLabelSelector(s, metav1validation.LabelSelectorValidationOptions{}, p)
	if len(s.MatchExpressions) > MaxSelectorExpressions {
		errs = append(errs, field.TooMany(p.Child("matchExpressions"), len(s.MatchExpressions), MaxSelectorExpressions))
	}
	if len(s.MatchLabels) > MaxSelectorLabels {
		errs = append(errs, field.TooMany(p.Child("matchLabels"), len(s.MatchLabels), MaxSelectorLabels))
	}
	return errs
}

func between(p *field.Path, v, lo, hi int64) field.ErrorList {
	if v < lo || v > hi {
		return field.ErrorList{field.Invalid(p, v, fmt.Sprintf("must be between %d and %d", lo, hi))}
	}
	return nil
}

func optBetween(p *field.Path, v *int32, lo, hi int64) field.ErrorList {
	if v == nil {
		return nil
	}
	return between(p, int64(*v), lo, hi)
}

// ordered checks an optional lower and upper bound pair held in the object
// at p: each within [lo, hi], and the lower not above the upper.
func ordered(p *field.Path, minName string, minV *int32, maxName string, maxV *int32, lo, hi int64) field.ErrorList {
	errs := append(optBetween(p.Child(minName), minV, lo, hi), optBetween(p.Child(maxName), maxV, lo, hi)...)
	if minV != nil && maxV != nil && *minV > *maxV {
		errs = append(errs, field.Invalid(p, "", minName+" must not exceed "+maxName))
	}
	return errs
}

// unique reports v at p as a duplicate when seen holds it, and records it.
func unique(seen map[string]bool, p *field.Path, v string) field.ErrorList {
	if seen[v] {
		return field.ErrorList{field.Duplicate(p, v)}
	}
	seen[v] = true
	return nil
}

// isZero reports whether a budget value is set and zero (0 or 0%); the
// caller applies the defaults (maxSurge 25%, maxUnavailable 0) for unset ones.
func isZero(v *intstr.IntOrString) bool {
	if v == nil {
		return false
	}
	if v.Type == intstr.Int {
		return v.IntVal == 0
	}
	return zeroPercent.MatchString(v.StrVal)
}

func (u *UpdateStrategy) validate(p *field.Path, minReadySeconds int32) field.ErrorList {
	var errs field.ErrorList
	switch u.Type {
	case "", UpdateReplicaSet:
		if len(u.Stages) > 0 {
			errs = append(errs, field.Invalid(p.Child("stages"), "", "stages need type Rolling"))
		}
		if u.Paused {
			errs = append(errs, field.Invalid(p.Child("paused"), true, "paused needs type Rolling"))
		}
	case UpdateRolling:
	default:
		errs = append(errs, field.NotSupported(p.Child("type"), u.Type, []UpdateStrategyType{UpdateReplicaSet, UpdateRolling}))
	}
	switch u.OnFailure {
	case "", FailurePause, FailureRollback, FailureContinue:
	default:
		errs = append(errs, field.NotSupported(p.Child("onFailure"), u.OnFailure, []FailurePolicy{FailurePause, FailureRollback, FailureContinue}))
	}
	// The schema defaults the deadline before its rule compares it with
	// minReadySeconds; so does this check.
	deadline := int32(DefaultProgressDeadlineSeconds)
	var deadlineErrs field.ErrorList
	if u.ProgressDeadlineSeconds != nil {
		deadline = *u.ProgressDeadlineSeconds
		deadlineErrs = between(p.Child("progressDeadlineSeconds"), int64(deadline), 1, MaxProgressDeadlineSeconds)
		errs = append(errs, deadlineErrs...)
	}
	if len(deadlineErrs) == 0 && deadline <= minReadySeconds {
		errs = append(errs, field.Invalid(p.Child("progressDeadlineSeconds"), deadline, "progressDeadlineSeconds must be greater than minReadySeconds"))
	}
	errs = append(errs, optBetween(p.Child("revisionHistoryLimit"), u.RevisionHistoryLimit, 0, MaxRevisionHistoryLimit)...)
	if len(u.Stages) > MaxStages {
		errs = append(errs, field.TooMany(p.Child("stages"), len(u.Stages), MaxStages))
	}
	names := make(map[string]bool, len(u.Stages))
	for i := range u.Stages {
		st := &u.Stages[i]
		sp := p.Child("stages").Index(i)
		errs = append(errs, st.validate(sp)...)
		errs = append(errs, unique(names, sp.Child("name"), st.Name)...)
		if i < len(u.Stages)-1 && len(st.Clusters) == 0 && st.ClusterSelector == nil {
			errs = append(errs, field.Invalid(sp, "", "only the last stage may leave out clusters and clusterSelector (a stage without them selects every member)"))
		}
	}
	return errs
}

func (st *RolloutStage) validate(p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if len(st.Name) > validation.DNS1123LabelMaxLength || !stageName.MatchString(st.Name) {
		errs = append(errs, field.Invalid(p.Child("name"), st.Name, "must be a DNS label: lower-case letters, digits and '-', at most 63 characters"))
	}
	if len(st.Clusters) > 1000 {
		errs = append(errs, field.TooMany(p.Child("clusters"), len(st.Clusters), 1000))
	}
	seen := make(map[string]bool, len(st.Clusters))
	for j, c := range st.Clusters {
		for _, msg := range validation.IsDNS1123Subdomain(c) {
			errs = append(errs, field.Invalid(p.Child("clusters").Index(j), c, msg))
		}
		errs = append(errs, unique(seen, p.Child("clusters").Index(j), c)...)
	}
	if st.ClusterSelector != nil {
		errs = append(errs, validateSelector(st.ClusterSelector.LabelSelector(), p.Child("clusterSelector"))...)
	}
	if c := st.Canary; c != nil {
		if len(st.Clusters) == 0 && st.ClusterSelector == nil {
			errs = append(errs, field.Invalid(p.Child("canary"), c.String(), "canary needs clusters or clusterSelector: a canary is a part of named members"))
		}
		if c.Type == intstr.Int {
			errs = append(errs, between(p.Child("canary"), int64(c.IntVal), 1, MaxReplicas)...)
		} else if !canaryPercent.MatchString(c.StrVal) {
			errs = append(errs, field.Invalid(p.Child("canary"), c.StrVal, fmt.Sprintf("must be a number of pods from 1 to %d or a percentage from 1%% to 100%%", MaxReplicas)))
		}
	}
	if st.BakeTime != nil {
		if _, err := st.BakeTime.Check(); err != nil {
			errs = append(errs, field.Invalid(p.Child("bakeTime"), string(*st.BakeTime), err.Error()))
		}
	}
	switch st.Promotion {
	case "", PromotionAuto, PromotionManual:
	default:
		errs = append(errs, field.NotSupported(p.Child("promotion"), st.Promotion, []PromotionPolicy{PromotionAuto, PromotionManual}))
	}
	return errs
}
