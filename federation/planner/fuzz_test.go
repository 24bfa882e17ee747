package planner

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// FuzzPlan decodes the fuzz bytes into a fleet and an FRS (see genInput) and
// checks that Plan never panics, never violates min/max or the surge bound,
// places every replica when capacity suffices, and ignores member order.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0, 5, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10})
	f.Add([]byte("replicafed planner seed with some longer content to spread choices"))
	f.Add(slices.Repeat([]byte{0xff, 0x00, 0x7f}, 40))
	f.Fuzz(func(t *testing.T, data []byte) {
		src := &byteSource{b: data}
		mode := src.Intn(3)
		o := genOpts{maxMembers: 16, maxReplicas: 200}
		if mode == 0 {
			o.ample, o.allHealthy, o.policy = true, true, v1alpha1.MoveBackNever
		}
		in := genInput(src, o)
		r := Plan(in)
		checkInvariants(t, in, r)
		if mode == 0 && (r.Total() != int64(in.Replicas) || r.Shortfall != 0) {
			t.Fatalf("capacity suffices but total %d shortfall %d for %d replicas\n%s", r.Total(), r.Shortfall, in.Replicas, describe(in))
		}
		rev := in
		rev.Members = slices.Clone(in.Members)
		slices.Reverse(rev.Members)
		if diff := cmp.Diff(r.Targets, Plan(rev).Targets); diff != "" {
			t.Fatalf("member order changed the plan (-in order +reversed):\n%s", diff)
		}
	})
}
