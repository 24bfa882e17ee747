package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// FinalStageName names the implicit last stage that updates every member in
// full (status.rollout.stageName). It is not a valid stage name, so it never
// collides with one.
const FinalStageName = "(all)"

// Stage is one resolved stage of a rollout.
type Stage struct {
	// Name of the stage.
	Name string
	// Clusters are the members the stage names.
	Clusters map[string]bool
	// Selector selects members by label; nil selects none by label.
	Selector labels.Selector
	// All is true for a stage without clusters and selector: every member.
	All bool
	// Canary limits the stage to part of its members' targets; nil is all.
	Canary *intstr.IntOrString
	// BakeTime is how long the stage's new pods must stay Available.
	BakeTime time.Duration
	// Manual is true when the stage waits for a promotion once baked.
	Manual bool
}

// Selects reports whether the stage takes in the named member.
func (s *Stage) Selects(name string, lbls map[string]string) bool {
	return s.All || s.Clusters[name] || (s.Selector != nil && s.Selector.Matches(labels.Set(lbls)))
}

// Resolve turns an update strategy's stages into Stages and appends the
// implicit final stage (FinalStageName: every member, no canary, no bake,
// automatic) unless the last stage already is one. The count of stages so
// depends on the spec only, never on which members exist.
func Resolve(u *v1alpha1.UpdateStrategy) ([]Stage, error) {
	var out []Stage
	if u != nil {
		for i := range u.Stages {
			s, err := resolveStage(&u.Stages[i])
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
	}
	if n := len(out); n == 0 || !out[n-1].All || out[n-1].Canary != nil {
		out = append(out, Stage{Name: FinalStageName, All: true})
	}
	return out, nil
}

func resolveStage(in *v1alpha1.RolloutStage) (Stage, error) {
	s := Stage{Name: in.Name, Canary: in.Canary, Manual: in.Promotion == v1alpha1.PromotionManual}
	if len(in.Clusters) > 0 {
		s.Clusters = make(map[string]bool, len(in.Clusters))
		for _, c := range in.Clusters {
			s.Clusters[c] = true
		}
	}
	if in.ClusterSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(in.ClusterSelector.LabelSelector())
		if err != nil {
			return Stage{}, fmt.Errorf("stage %q: clusterSelector: %w", in.Name, err)
		}
		s.Selector = sel
	}
	s.All = len(in.Clusters) == 0 && in.ClusterSelector == nil
	if in.BakeTime != nil {
		d, err := in.BakeTime.Check()
		if err != nil {
			return Stage{}, fmt.Errorf("stage %q: bakeTime: %w", in.Name, err)
		}
		s.BakeTime = d
	}
	if s.Canary != nil {
		if _, err := canaryCount(s.Canary, 1); err != nil {
			return Stage{}, fmt.Errorf("stage %q: %w", in.Name, err)
		}
	}
	return s, nil
}

// MemberShare is what Shares needs of one member.
type MemberShare struct {
	// Name and Labels identify the member for the stages' selection.
	Name   string
	Labels map[string]string
	// Target is the member's planned target (all revisions).
	Target int32
}

// Shares returns, for each member, how many of its target the stage at
// index puts on the update revision. A member takes what the last stage up
// to index that selects it says: all of its target, or its part of that
// stage's canary; a member no stage has selected yet gets 0. An index past
// the last stage gives every member its whole target.
//
// A canary of n pods (or p% of the stage's members' targets, rounded up) is
// split among the stage's members in proportion to their targets, largest
// remainder first and ties by name, so the split is deterministic.
func Shares(stages []Stage, index int, members []MemberShare) map[string]int32 {
	out := make(map[string]int32, len(members))
	last := make([]int, len(members))
	for i := range members {
		last[i] = -1
		for j := min(index, len(stages)-1); j >= 0; j-- {
			if stages[j].Selects(members[i].Name, members[i].Labels) {
				last[i] = j
				break
			}
		}
		switch {
		case index >= len(stages):
			out[members[i].Name] = max(members[i].Target, 0)
		case last[i] < 0:
			out[members[i].Name] = 0
		case stages[last[i]].Canary == nil:
			out[members[i].Name] = max(members[i].Target, 0)
		}
	}
	if index >= len(stages) {
		return out
	}
	for j := 0; j <= index && j < len(stages); j++ {
		if stages[j].Canary == nil {
			continue
		}
		var in []MemberShare
		for i := range members {
			if stages[j].Selects(members[i].Name, members[i].Labels) {
				in = append(in, members[i])
			}
		}
		parts := splitCanary(stages[j].Canary, in)
		for i := range members {
			if last[i] == j {
				out[members[i].Name] = parts[members[i].Name]
			}
		}
	}
	return out
}

// canaryCount resolves a canary against the total target of its members.
func canaryCount(c *intstr.IntOrString, total int32) (int32, error) {
	if c.Type == intstr.Int {
		if c.IntVal < 1 {
			return 0, fmt.Errorf("canary %d is not a positive number of pods", c.IntVal)
		}
		return min(c.IntVal, total), nil
	}
	if !strings.HasSuffix(c.StrVal, "%") {
		return 0, fmt.Errorf("canary %q is neither a number nor a percentage", c.StrVal)
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(c, int(total), true)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("canary %q is not a percentage from 1%% to 100%%", c.StrVal)
	}
	return int32(min(n, int(total))), nil
}

func splitCanary(c *intstr.IntOrString, members []MemberShare) map[string]int32 {
	var total int64
	for _, m := range members {
		total += int64(max(m.Target, 0))
	}
	out := make(map[string]int32, len(members))
	if total == 0 {
		return out
	}
	n, err := canaryCount(c, int32(min(total, v1alpha1.MaxReplicas)))
	if err != nil {
		return out // Resolve refuses such stages; nothing updates here.
	}
	type rem struct {
		name string
		r    int64
	}
	rems := make([]rem, 0, len(members))
	given := int64(0)
	for _, m := range members {
		share := int64(n) * int64(max(m.Target, 0))
		out[m.Name] = int32(share / total)
		given += share / total
		rems = append(rems, rem{m.Name, share % total})
	}
	slices.SortFunc(rems, func(a, b rem) int {
		if a.r != b.r {
			if a.r > b.r {
				return -1
			}
			return 1
		}
		return strings.Compare(a.name, b.name)
	})
	for i := 0; given < int64(n) && i < len(rems); i++ {
		out[rems[i].name]++
		given++
	}
	return out
}
