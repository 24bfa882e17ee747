package planner

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// source is what the random fleet generator draws from: math/rand for the
// property tests, fuzz bytes for FuzzPlan.
type source interface {
	Intn(n int) int
}

// byteSource turns fuzz bytes into choices; once exhausted it returns 0, so
// every byte string decodes to some input.
type byteSource struct {
	b []byte
}

func (s *byteSource) Intn(n int) int {
	if n <= 1 {
		return 0
	}
	var v int
	for k := 0; k < 2 && len(s.b) > 0; k++ {
		v = v<<8 | int(s.b[0])
		s.b = s.b[1:]
	}
	return v % n
}

// genOpts narrows the generated fleets for properties that need it.
type genOpts struct {
	allHealthy  bool // every member Healthy
	ample       bool // no capacity limits, no max on at least one member
	noHistory   bool // no previous targets, no pods
	policy      v1alpha1.MoveBackPolicy
	maxMembers  int
	maxReplicas int
}

// genInput draws a random fleet and FRS.
func genInput(src source, o genOpts) Input {
	if o.maxMembers == 0 {
		o.maxMembers = 12
	}
	if o.maxReplicas == 0 {
		o.maxReplicas = 80
	}
	in := Input{
		UID:      fmt.Sprintf("uid-%d", src.Intn(1<<16)),
		Replicas: int32(src.Intn(o.maxReplicas + 1)),
		Now:      now,
		Previous: map[string]int32{},
	}
	n := 1 + src.Intn(o.maxMembers)
	if src.Intn(3) == 0 {
		in.Placement.Strategy = v1alpha1.StrategyAvailableCapacity
	}
	in.Failover.MoveBack = o.policy
	if o.policy == "" && src.Intn(2) == 0 {
		in.Failover.MoveBack = v1alpha1.MoveBackOnRecovery
	}
	if src.Intn(2) == 0 {
		in.MoveBudget = budget(src.Intn(6), src.Intn(3))
	}
	listAll := src.Intn(4) != 0
	for i := range n {
		name := fmt.Sprintf("m%02d", i)
		m := Member{Name: name, Health: Healthy, Labels: map[string]string{"zone": fmt.Sprint(i % 3)}}
		if !o.allHealthy {
			switch src.Intn(8) {
			case 0:
				m.Health = Unhealthy
				m.UnhealthySince = now.Add(-time.Duration(src.Intn(120)) * time.Second)
			case 1:
				m.Health = HealthUnknown
			}
		}
		if !o.noHistory {
			m.Current = int32(src.Intn(20))
			m.Ready = int32(src.Intn(int(m.Current) + 1))
			if src.Intn(4) == 0 && !o.ample {
				m.Unschedulable = int32(src.Intn(int(m.Current-m.Ready) + 1))
				m.UnschedulableSince = now.Add(-time.Duration(src.Intn(120)) * time.Second)
			}
			if src.Intn(3) != 0 {
				in.Previous[name] = int32(src.Intn(20))
			}
		}
		if !o.ample && src.Intn(2) == 0 {
			m.FreeCapacity = ptr(int32(src.Intn(15)))
		}
		in.Members = append(in.Members, m)
		if listAll || src.Intn(2) == 0 {
			p := pref(name)
			if src.Intn(3) != 0 {
				p.Weight = ptr(int32(src.Intn(6)))
				if o.ample && i == 0 && *p.Weight == 0 {
					p.Weight = ptr[int32](1)
				}
			}
			if src.Intn(4) == 0 {
				p.MinReplicas = ptr(int32(src.Intn(6)))
			}
			if src.Intn(4) == 0 && !(o.ample && i == 0) {
				p.MaxReplicas = ptr(int32(src.Intn(12)))
			}
			if src.Intn(3) == 0 {
				p.DeletionCost = ptr(int32(src.Intn(3)))
			}
			in.Placement.Clusters = append(in.Placement.Clusters, p)
		}
	}
	if !listAll {
		in.Placement.Clusters = append(in.Placement.Clusters, pref("ghost"))
	}
	if o.ample {
		// Member 0 must be a candidate: list it explicitly.
		found := false
		for _, p := range in.Placement.Clusters {
			found = found || p.Name == "m00"
		}
		if !found {
			in.Placement.Clusters = append(in.Placement.Clusters, pref("m00"))
		}
	}
	return in
}

func describe(in Input) string {
	s := fmt.Sprintf("replicas=%d strategy=%q moveBack=%q budget=%v/%v prev=%v\n", in.Replicas, in.Placement.Strategy,
		in.Failover.MoveBack, ioStr(in.MoveBudget.MaxSurge), ioStr(in.MoveBudget.MaxUnavailable), in.Previous)
	for _, p := range in.Placement.Clusters {
		s += fmt.Sprintf("  pref %s w=%v min=%v max=%v cost=%v\n", p.Name, deref(p.Weight), deref(p.MinReplicas), deref(p.MaxReplicas), deref(p.DeletionCost))
	}
	for _, m := range in.Members {
		s += fmt.Sprintf("  member %s %v cur=%d ready=%d unsched=%d free=%v\n", m.Name, m.Health, m.Current, m.Ready, m.Unschedulable, deref(m.FreeCapacity))
	}
	return s
}

func deref(p *int32) string {
	if p == nil {
		return "-"
	}
	return fmt.Sprint(*p)
}

func ioStr(v *intstr.IntOrString) string {
	if v == nil {
		return "-"
	}
	return v.String()
}
