package planner

import (
	"fmt"
	"math/rand"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// benchFleet builds 100 members (sorted by name, as the registry keeps them)
// and 10,000 FRS: 40% over every member, 30% over a region selector (about a
// third of the fleet), 30% over 3-10 listed members with weights and bounds;
// replicas 1-100. With settled true, every FRS already runs its previous plan
// (the steady state a leader re-plans on every status report); otherwise
// nothing runs yet (first placement after a leader starts).
func benchFleet(settled bool) []Input {
	rng := rand.New(rand.NewSource(42))
	members := make([]Member, 100)
	for i := range members {
		members[i] = Member{
			Name:   fmt.Sprintf("member-%03d", i),
			Labels: map[string]string{"region": fmt.Sprint("r", i%3), "tier": []string{"reserved", "spot"}[i%2]},
			Health: Healthy,
		}
		if i%4 == 0 {
			members[i].FreeCapacity = ptr(int32(50 + rng.Intn(500)))
		}
	}
	ins := make([]Input, 10000)
	for k := range ins {
		in := Input{UID: fmt.Sprintf("0000-frs-%05d", k), Replicas: int32(1 + rng.Intn(100)), Now: now, Members: members}
		switch r := rng.Intn(10); {
		case r < 4:
		case r < 7:
			in.Placement.ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"region": fmt.Sprint("r", rng.Intn(3))}}
		default:
			n := 3 + rng.Intn(8)
			for _, j := range rng.Perm(100)[:n] {
				p := pref(members[j].Name, weight(int32(1+rng.Intn(5))))
				if rng.Intn(3) == 0 {
					p.MinReplicas = ptr[int32](1)
				}
				if rng.Intn(4) == 0 {
					p.MaxReplicas = ptr(int32(5 + rng.Intn(30)))
				}
				in.Placement.Clusters = append(in.Placement.Clusters, p)
			}
		}
		if rng.Intn(5) == 0 {
			in.Failover.MoveBack = v1alpha1.MoveBackOnRecovery
		}
		ins[k] = in
	}
	if settled {
		// Each FRS sees its own pods: give it its own member slice running
		// the first plan's targets.
		for k := range ins {
			r := Plan(ins[k])
			ms := make([]Member, len(members))
			copy(ms, members)
			for i := range ms {
				tg := r.Target(ms[i].Name)
				ms[i].Current, ms[i].Ready = tg, tg
			}
			ins[k].Members = ms
			ins[k].Previous = r.TargetMap()
		}
	}
	return ins
}

func benchmarkFleet(b *testing.B, settled bool) {
	ins := benchFleet(settled)
	b.ReportAllocs()
	b.ResetTimer()
	var placed int64
	cpu0 := processCPU()
	for b.Loop() {
		for k := range ins {
			r := Plan(ins[k])
			placed += r.Total()
		}
	}
	// CPU time (incl. GC) per op: comparable across runs on a shared machine.
	b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
	if placed == 0 {
		b.Fatal("nothing placed")
	}
}

// BenchmarkPlan10kFRSx100Members plans 10,000 FRS over 100 members; one op is
// the whole fleet. Goal: under 100 ms per op on the 2-core build machine.
func BenchmarkPlan10kFRSx100Members(b *testing.B) {
	b.Run("settled", func(b *testing.B) { benchmarkFleet(b, true) })
	b.Run("fresh", func(b *testing.B) { benchmarkFleet(b, false) })
}
