package rollout_test

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/rollout"
)

// The example of docs/rollout.md: 12 replicas over three members, maxSurge
// 2, maxUnavailable 0; one canary pod in member-c baked for 10 minutes and
// promoted by hand, then the rest of member-c, then every member. A pod is
// Available 30 seconds (one tick) after the step that asked for it.
func Example() {
	stages, err := rollout.Resolve(&v1alpha1.UpdateStrategy{Type: v1alpha1.UpdateRolling, Stages: []v1alpha1.RolloutStage{
		{Name: "canary", Clusters: []string{"member-c"}, Canary: ptr.To(intstr.FromInt32(1)), BakeTime: v1alpha1.DurationOf(10 * time.Minute), Promotion: v1alpha1.PromotionManual},
		{Name: "member-c", Clusters: []string{"member-c"}},
		{Name: "rest"},
	}})
	if err != nil {
		panic(err)
	}
	policy := rollout.Policy{Stages: stages, ProgressDeadline: 300 * time.Second, OnFailure: v1alpha1.FailureRollback}
	type pods struct{ target, replicas, available int32 }
	fleet := map[string]map[string]*pods{}
	names := []string{"member-a", "member-b", "member-c"}
	for _, n := range names {
		fleet[n] = map[string]*pods{"web-v1": {4, 4, 4}, "web-v2": {}}
	}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	s, _ := rollout.Start(rollout.State{}, "web-v1", now)
	s, _ = rollout.Start(s, "web-v2", now)
	mostPods, fewestAvailable := int32(0), int32(12)
	last := ""
	for range 200 {
		now = now.Add(30 * time.Second)
		in := rollout.Input{Replicas: 12, MaxSurge: 2, UpdateRevision: s.UpdateRevision, StableRevision: s.StableRevision, Order: []string{"web-v1", "web-v2"}}
		var ms []rollout.MemberShare
		for _, n := range names {
			ms = append(ms, rollout.MemberShare{Name: n, Target: 4})
		}
		index := s.Stage
		if s.Covering() {
			index = len(stages)
		}
		shares := rollout.Shares(stages, index, ms)
		for _, n := range names {
			m := rollout.Member{Name: n, Target: 4, UpdateShare: shares[n], Reachable: true}
			for _, rev := range []string{"web-v1", "web-v2"} {
				p := fleet[n][rev]
				m.Revisions = append(m.Revisions, rollout.Pods{Revision: rev, Target: p.target, Replicas: p.replicas, Available: p.available})
			}
			in.Members = append(in.Members, m)
		}
		out := rollout.Step(in)
		var total, available int32
		for _, mt := range out.Members {
			for _, t := range mt.Targets {
				p := fleet[mt.Name][t.Revision]
				p.available = min(p.replicas, t.Replicas) // last tick's pods are Available now; deletions go first
				p.target, p.replicas = t.Replicas, t.Replicas
				total += p.replicas
				available += p.available
			}
		}
		mostPods, fewestAvailable = max(mostPods, total), min(fewestAvailable, available)
		obs := rollout.Observation{Now: now, Settled: out.Settled, UpdatedAvailable: out.UpdatedAvailable, Health: rollout.HealthPassed}
		if s.Phase == v1alpha1.PhaseAwaitingPromotion {
			obs.Promote = "canary" // kubectl annotate frs web replicafed.io/promote=canary
		}
		s, _ = rollout.Advance(s, policy, obs)
		if step := fmt.Sprintf("%s %s", s.Phase, s.StageName(stages)); step != last {
			c := fleet["member-c"]
			fmt.Printf("%-30s member-c v1=%d v2=%d\n", step, c["web-v1"].replicas, c["web-v2"].replicas)
			last = step
		}
		if s.Phase == v1alpha1.PhaseComplete {
			break
		}
	}
	fmt.Printf("most pods %d, fewest Available %d\n", mostPods, fewestAvailable)
	// Output:
	// Progressing canary             member-c v1=4 v2=1
	// Baking canary                  member-c v1=3 v2=1
	// AwaitingPromotion canary       member-c v1=3 v2=1
	// Progressing member-c           member-c v1=3 v2=1
	// Progressing rest               member-c v1=0 v2=4
	// Complete                       member-c v1=0 v2=4
	// most pods 14, fewest Available 12
}
