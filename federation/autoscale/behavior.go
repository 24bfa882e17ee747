package autoscale

import (
	"math"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Rules is one direction's behaviour with the defaults filled in.
type Rules struct {
	Window   time.Duration
	Select   v1alpha1.ScalingPolicySelect
	Policies []v1alpha1.HPAScalingPolicy
}

// Behavior holds both directions' rules.
type Behavior struct {
	Up, Down Rules
}

// BehaviorOf fills in the HorizontalPodAutoscaler's defaults: scale-up with
// no window and the larger of 100 % or 4 pods per 15 s; scale-down with
// the controller's window (5 minutes unless configured) and 100 % per 15 s.
func BehaviorOf(b *v1alpha1.HorizontalPodAutoscalerBehavior, downWindow time.Duration) Behavior {
	out := Behavior{
		Up: Rules{Select: v1alpha1.MaxChangePolicySelect, Policies: []v1alpha1.HPAScalingPolicy{
			{Type: v1alpha1.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
			{Type: v1alpha1.PodsScalingPolicy, Value: 4, PeriodSeconds: 15},
		}},
		Down: Rules{Window: downWindow, Select: v1alpha1.MaxChangePolicySelect, Policies: []v1alpha1.HPAScalingPolicy{
			{Type: v1alpha1.PercentScalingPolicy, Value: 100, PeriodSeconds: 15},
		}},
	}
	if b != nil {
		fill(&out.Up, b.ScaleUp)
		fill(&out.Down, b.ScaleDown)
	}
	return out
}

func fill(r *Rules, in *v1alpha1.HPAScalingRules) {
	if in == nil {
		return
	}
	if in.StabilizationWindowSeconds != nil {
		r.Window = time.Duration(*in.StabilizationWindowSeconds) * time.Second
	}
	if in.SelectPolicy != nil {
		r.Select = *in.SelectPolicy
	}
	if len(in.Policies) > 0 {
		r.Policies = in.Policies
	}
}

// Recommendation is one past computed (unstabilised) replica count.
type Recommendation struct {
	At       time.Time
	Replicas int32
}

// ScaleEvent is one past change of the replica count, by this autoscaler.
type ScaleEvent struct {
	At     time.Time
	Change int32
}

// History is what one autoscaler remembers between computations; the
// leader keeps it. A new leader starts with the current count as its one
// recommendation (as the upstream controller does after a restart), so it
// does not scale down before a full window of its own observations.
type History struct {
	Recommendations []Recommendation
	Ups, Downs      []ScaleEvent
}

// Seed records current as a recommendation if the history is empty.
func (h *History) Seed(now time.Time, current int32) {
	if len(h.Recommendations) == 0 {
		h.Recommendations = append(h.Recommendations, Recommendation{At: now, Replicas: current})
	}
}

// RecordScale remembers a change of the replica count made at now, and
// forgets events older than the longest policy period of their direction.
func (h *History) RecordScale(now time.Time, b Behavior, from, to int32) {
	switch {
	case to > from:
		h.Ups = append(prune(now, h.Ups, b.Up), ScaleEvent{At: now, Change: to - from})
	case to < from:
		h.Downs = append(prune(now, h.Downs, b.Down), ScaleEvent{At: now, Change: from - to})
	}
}

func prune(now time.Time, evs []ScaleEvent, r Rules) []ScaleEvent {
	cutoff := now.Add(-longestPeriod(r))
	out := evs[:0]
	for _, e := range evs {
		if e.At.After(cutoff) {
			out = append(out, e)
		}
	}
	return out
}

func longestPeriod(r Rules) time.Duration {
	var p int32
	for _, pol := range r.Policies {
		p = max(p, pol.PeriodSeconds)
	}
	return time.Duration(p) * time.Second
}

// stabilise records desired and returns it bounded by the recommendations
// within each window: no lower than the lowest within the scale-up window,
// no higher than the highest within the scale-down window, starting from
// current. Recommendations older than both windows are forgotten.
func (h *History) stabilise(now time.Time, b Behavior, current, desired int32) (int32, string, string) {
	up, down := desired, desired
	upCut, downCut := now.Add(-b.Up.Window), now.Add(-b.Down.Window)
	kept := h.Recommendations[:0]
	for _, r := range h.Recommendations {
		if r.At.After(upCut) {
			up = min(up, r.Replicas)
		}
		if r.At.After(downCut) {
			down = max(down, r.Replicas)
		}
		if r.At.After(upCut) || r.At.After(downCut) {
			kept = append(kept, r)
		}
	}
	h.Recommendations = append(kept, Recommendation{At: now, Replicas: desired})
	rec := max(current, up)
	rec = min(rec, down)
	if desired >= current {
		return rec, "ScaleUpStabilized", "recent recommendations were lower than current one, applying the lowest recent recommendation"
	}
	return rec, "ScaleDownStabilized", "recent recommendations were higher than current one, applying the highest recent recommendation"
}

// changeIn sums the changes within period before now.
func changeIn(now time.Time, period int32, evs []ScaleEvent) int32 {
	cutoff := now.Add(-time.Duration(period) * time.Second)
	var sum int32
	for _, e := range evs {
		if e.At.After(cutoff) {
			sum += e.Change
		}
	}
	return sum
}

// limit bounds desired by the rate policies and min/max, returning the
// ScalingLimited reason and message (DesiredWithinRange when unbounded).
func (h *History) limit(now time.Time, b Behavior, current, desired, minR, maxR int32) (int32, string, string) {
	if desired > current {
		lim := max(h.upLimit(now, b.Up, current), current)
		if maxR > lim {
			if desired > lim {
				return lim, "ScaleUpLimit", "the desired replica count is increasing faster than the maximum scale rate"
			}
		} else if desired > maxR {
			return maxR, "TooManyReplicas", "the desired replica count is more than the maximum replica count"
		}
	} else if desired < current {
		lim := min(h.downLimit(now, b.Down, current), current)
		if minR < lim {
			if desired < lim {
				return lim, "ScaleDownLimit", "the desired replica count is decreasing faster than the maximum scale rate"
			}
		} else if desired < minR {
			return minR, "TooFewReplicas", "the desired replica count is less than the minimum replica count"
		}
	}
	return desired, "DesiredWithinRange", "the desired count is within the acceptable range"
}

func (h *History) upLimit(now time.Time, r Rules, current int32) int32 {
	if r.Select == v1alpha1.DisabledPolicySelect {
		return current
	}
	result := int32(math.MinInt32)
	pick := func(a, b int32) int32 { return max(a, b) }
	if r.Select == v1alpha1.MinChangePolicySelect {
		result, pick = math.MaxInt32, func(a, b int32) int32 { return min(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changeIn(now, p.PeriodSeconds, h.Ups) + changeIn(now, p.PeriodSeconds, h.Downs)
		var proposed int32
		if p.Type == v1alpha1.PodsScalingPolicy {
			proposed = start + p.Value
		} else {
			proposed = ceil32(float64(start) * (1 + float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

func (h *History) downLimit(now time.Time, r Rules, current int32) int32 {
	if r.Select == v1alpha1.DisabledPolicySelect {
		return current
	}
	result := int32(math.MaxInt32)
	pick := func(a, b int32) int32 { return min(a, b) }
	if r.Select == v1alpha1.MinChangePolicySelect {
		result, pick = math.MinInt32, func(a, b int32) int32 { return max(a, b) }
	}
	for _, p := range r.Policies {
		start := current - changeIn(now, p.PeriodSeconds, h.Ups) + changeIn(now, p.PeriodSeconds, h.Downs)
		var proposed int32
		if p.Type == v1alpha1.PodsScalingPolicy {
			proposed = start - p.Value
		} else {
			proposed = int32(float64(start) * (1 - float64(p.Value)/100))
		}
		result = pick(result, proposed)
	}
	return result
}

// quantity renders a milli-value for status, as upstream does.
func quantity(_ corev1.ResourceName, milli int64) *resource.Quantity {
	return resource.NewMilliQuantity(milli, resource.DecimalSI)
}

// Prune forgets the scale events older than the longest policy period of
// their direction.
func (h *History) Prune(now time.Time, b Behavior) {
	h.Ups = prune(now, h.Ups, b.Up)
	h.Downs = prune(now, h.Downs, b.Down)
}

// Events returns the remembered scale events for the status, oldest first:
// scale-ups positive, scale-downs negative.
func (h *History) Events() []v1alpha1.AutoscalerScaleEvent {
	out := make([]v1alpha1.AutoscalerScaleEvent, 0, len(h.Ups)+len(h.Downs))
	for _, e := range h.Ups {
		out = append(out, v1alpha1.AutoscalerScaleEvent{Time: metav1.NewTime(e.At), Change: e.Change})
	}
	for _, e := range h.Downs {
		out = append(out, v1alpha1.AutoscalerScaleEvent{Time: metav1.NewTime(e.At), Change: -e.Change})
	}
	slices.SortStableFunc(out, func(a, b v1alpha1.AutoscalerScaleEvent) int { return a.Time.Compare(b.Time.Time) })
	return out
}

// HistoryFrom starts a history from the scale events a former leader wrote
// into the status, so a new leader's rate policies count them.
func HistoryFrom(events []v1alpha1.AutoscalerScaleEvent) *History {
	h := &History{}
	for _, e := range events {
		switch {
		case e.Change > 0:
			h.Ups = append(h.Ups, ScaleEvent{At: e.Time.Time, Change: e.Change})
		case e.Change < 0:
			h.Downs = append(h.Downs, ScaleEvent{At: e.Time.Time, Change: -e.Change})
		}
	}
	return h
}
