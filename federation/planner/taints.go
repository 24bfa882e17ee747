package planner

import (
	"fmt"
	"math"
	"time"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// tolerates reports whether toleration t matches taint x, with the meaning of
// a pod toleration: an empty effect matches both effects, an empty key with
// Exists matches every key, Exists matches any value and Equal (or an empty
// operator) the same value.
func tolerates(t *v1alpha1.ClusterToleration, x *Taint) bool {
	if t.Effect != "" && t.Effect != x.Effect {
		return false
	}
	if t.Key != "" && t.Key != x.Key {
		return false
	}
	switch t.Operator {
	case v1alpha1.TolerationExists:
		return true
	case v1alpha1.TolerationEqual, "":
		return t.Key != "" && t.Value == x.Value
	default:
		return false
	}
}

// taintVerdict is what a member's taints do to one placement.
type taintVerdict struct {
	// evict: an untolerated NoExecute taint, or a toleration that ran out.
	evict bool
	// cordon: an untolerated NoSchedule taint, or a NoExecute taint
	// tolerated for a while.
	cordon bool
	// until is when the earliest limited toleration runs out (zero if none
	// is running).
	until time.Time
	// taint is the taint that decided the verdict, for the note.
	taint *Taint
}

// judgeTaints applies the tolerations to a member's taints at now. A NoExecute
// taint matched by several tolerations is tolerated for the shortest of their
// tolerationSeconds (for ever when one has none), as the Kubernetes taint
// manager does for pods; 0 or less means not at all.
func judgeTaints(taints []Taint, tolerations []v1alpha1.ClusterToleration, now time.Time) taintVerdict {
	var v taintVerdict
	for k := range taints {
		x := &taints[k]
		if x.Effect != v1alpha1.TaintNoSchedule && x.Effect != v1alpha1.TaintNoExecute {
			continue
		}
		matched, forever := false, false
		var seconds int64
		for j := range tolerations {
			t := &tolerations[j]
			if !tolerates(t, x) {
				continue
			}
			switch {
			case t.TolerationSeconds == nil:
				forever = true
			case !matched || *t.TolerationSeconds < seconds:
				seconds = *t.TolerationSeconds
			}
			matched = true
			if forever {
				break
			}
		}
		switch {
		case forever || (matched && x.Effect == v1alpha1.TaintNoSchedule):
			// Tolerated; tolerationSeconds only limits NoExecute.
		case !matched && x.Effect == v1alpha1.TaintNoSchedule:
			if !v.evict && !v.cordon {
				v.taint = x
			}
			v.cordon = true
		case !matched || seconds <= 0:
			if !v.evict {
				v.taint = x
			}
			v.evict = true
		case x.TimeAdded.IsZero() || seconds > maxTolerationSeconds:
			// The window has not started, or is too long to ever end (it
			// would overflow time.Duration and wrap into the past): never
			// evicted, no new replicas, nothing to come back for.
			if !v.evict && !v.cordon {
				v.taint = x
			}
			v.cordon = true
		default:
			end := tolerationEnd(x.TimeAdded, seconds)
			if !now.Before(end) {
				if !v.evict {
					v.taint = x
				}
				v.evict = true
				continue
			}
			if !v.evict && !v.cordon {
				v.taint = x
			}
			v.cordon = true
			if v.until.IsZero() || end.Before(v.until) {
				v.until = end
			}
		}
	}
	return v
}

// maxTolerationSeconds is the longest toleration time.Duration can count;
// a longer one never runs out.
const maxTolerationSeconds = int64(math.MaxInt64 / int64(time.Second))

// tolerationEnd returns when a toleration of seconds for a taint added at
// added runs out, saturating: seconds <= 0 end at added, seconds beyond
// maxTolerationSeconds at the latest time time.Duration can reach from
// added, so the multiplication never wraps into the past.
func tolerationEnd(added time.Time, seconds int64) time.Time {
	if seconds > maxTolerationSeconds {
		return added.Add(time.Duration(math.MaxInt64))
	}
	return added.Add(time.Duration(max(seconds, 0)) * time.Second)
}

// applyTaints cordons or evicts the slots whose members' taints the
// placement does not tolerate, and returns the earliest time a limited
// toleration runs out. heldLike keeps a cordoned member's pods the way a
// held member's are kept.
func (p *planner) applyTaints(tolerations []v1alpha1.ClusterToleration, now time.Time, heldLike bool) time.Time {
	var next time.Time
	for i := range p.slots {
		s := &p.slots[i]
		m := &p.members[s.member]
		if len(m.Taints) == 0 || s.state == StateFailedOver {
			continue
		}
		v := judgeTaints(m.Taints, tolerations, now)
		switch {
		case v.evict:
			s.state = StateEvicted
			s.clear()
		case v.cordon && s.state == StateActive:
			// Keep what runs, within the previous target; add nothing.
			s.state = StateCordoned
			s.ceiling = s.keepAll
			s.floor = min(s.floor, s.keepAll)
			if heldLike {
				// Under moveBack OnRecovery its pods are kept as a held
				// member's are, all alike, so no move-back touches them.
				s.keepReady, s.keepScheduled = s.keepAll, s.keepAll
			}
		}
		if !v.evict && !v.until.IsZero() && (next.IsZero() || v.until.Before(next)) {
			next = v.until
		}
	}
	return next
}

// clear leaves a slot with no floor, nothing kept and no room.
func (s *slot) clear() {
	s.floor, s.ceiling = 0, 0
	s.keepReady, s.keepScheduled, s.keepAll = 0, 0, 0
}

// taintNote describes why a member is cordoned or evicted.
func taintNote(m *Member, tolerations []v1alpha1.ClusterToleration, now time.Time, state TargetState) string {
	v := judgeTaints(m.Taints, tolerations, now)
	if v.taint == nil {
		return ""
	}
	x := v.taint
	name := x.Key
	if x.Value != "" {
		name += "=" + x.Value
	}
	name += ":" + string(x.Effect)
	switch {
	case state == StateEvicted && x.Effect == v1alpha1.TaintNoExecute && !x.TimeAdded.IsZero() && isTolerated(x, tolerations):
		return fmt.Sprintf("taint %s added %s ago, longer than tolerated: replicas planned elsewhere",
			name, now.Sub(x.TimeAdded).Round(time.Second))
	case state == StateEvicted:
		return fmt.Sprintf("taint %s not tolerated: replicas planned elsewhere", name)
	case !v.until.IsZero():
		return fmt.Sprintf("taint %s tolerated until %s: no new replicas", name, v.until.UTC().Format(time.RFC3339))
	case x.Effect == v1alpha1.TaintNoExecute && x.TimeAdded.IsZero():
		return fmt.Sprintf("taint %s tolerated for a limited time (added at an unknown time): no new replicas", name)
	case x.Effect == v1alpha1.TaintNoExecute:
		return fmt.Sprintf("taint %s tolerated for longer than can be counted: no new replicas", name)
	default:
		return fmt.Sprintf("taint %s not tolerated: no new replicas", name)
	}
}

func isTolerated(x *Taint, tolerations []v1alpha1.ClusterToleration) bool {
	for j := range tolerations {
		if tolerates(&tolerations[j], x) {
			return true
		}
	}
	return false
}
