package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/replicafed/replicafed/hack/bench/fleet/promtext"
)

// mOwnedEpoch is the gauge a replica exposes for each member it owns with
// sharding on.
const mOwnedEpoch = "replicafed_member_owned_epoch"

// shardingOn reports whether the benchmark's replica configuration turns
// sharding on.
func shardingOn(cfg map[string]any) bool {
	sh, _ := cfg["sharding"].(map[string]any)
	on, _ := sh["enabled"].(bool)
	return on
}

// ownersBalanced reports whether every member has exactly one owner and
// the replicas own equal shares (the counts differ by at most one), from
// each replica's count of owned members; else it says why. Until then
// the leader still moves members to a replica that has just come up (once
// it has renewed for the damping time), and each move stalls that
// member's writes for a handover: a run started earlier measures the
// start-up, not the steady state.
func ownersBalanced(owned map[string]int, members int) (bool, string) {
	total, lo, hi := 0, members, 0
	ids := make([]string, 0, len(owned))
	for id, n := range owned {
		total += n
		lo, hi = min(lo, n), max(hi, n)
		ids = append(ids, id)
	}
	slices.Sort(ids)
	parts := make([]string, 0, len(ids))
	for _, id := range ids {
		parts = append(parts, fmt.Sprintf("%s %d", id, owned[id]))
	}
	state := strings.Join(parts, ", ")
	switch {
	case len(owned) == 0:
		return false, "no replica answered"
	case total != members:
		return false, fmt.Sprintf("%d of %d members owned (%s)", total, members, state)
	case hi-lo > 1:
		return false, fmt.Sprintf("unequal shares (%s)", state)
	}
	return true, state
}

// awaitBalancedOwners waits, with sharding on, until the members' owners
// are balanced (ownersBalanced), so that no handover falls inside the run.
func (b *bench) awaitBalancedOwners(ctx context.Context) error {
	if !shardingOn(b.s.Config) {
		return nil
	}
	t := time.Now()
	var state string
	err := waitFor(ctx, 3*time.Minute, "the members' owners to be balanced", func() (bool, error) {
		owned := map[string]int{}
		for id, addr := range b.probe.replicas {
			s, err := b.probe.scrapeReplica(ctx, addr)
			if err != nil {
				return false, err
			}
			owned[id] = countSamples(s, mOwnedEpoch)
		}
		ok, why := ownersBalanced(owned, len(b.members))
		state = why
		if !ok {
			return false, fmt.Errorf("%s", why)
		}
		return true, nil
	})
	if err != nil {
		return err
	}
	say("  owners balanced in %s (%s)", time.Since(t).Round(time.Second), state)
	return nil
}

// countSamples counts the samples called name.
func countSamples(s promtext.Samples, name string) int {
	n := 0
	for _, x := range s {
		if x.Name == name {
			n++
		}
	}
	return n
}
