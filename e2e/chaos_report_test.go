package e2e

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/replicafed/replicafed/internal/test/loadavg"
)

// chaosTable renders the measured results, one row per disruption kind.
func chaosTable(plan chaosPlan, results []*roundResult, took time.Duration) string {
	var b strings.Builder
	leaderRounds, failed := 0, 0
	for _, r := range results {
		if r.spec.kind.leader() {
			leaderRounds++
		}
		if r.failed() {
			failed++
		}
	}
	fmt.Fprintf(&b, "Chaos %s form, %s: %d rounds (%d leader disruptions), scaling %d <-> %d replicas at weights 1:1:1, maxSurge %d; %d rounds failed; %s in all.\n",
		plan.mode, time.Now().UTC().Format("2006-01-02 15:04 MST"), len(results), leaderRounds, plan.low, plan.high, chaosSurge, failed, took.Round(time.Second))
	fmt.Fprintf(&b, "Machine: %d CPUs, load average %s, test binary race=%v. Converge bound %s from the scale request.\n\n",
		runtime.NumCPU(), loadavg.Read(), raceEnabled, convergeBound)
	b.WriteString("| disruption | rounds (up/down) | failed rounds | over-target samples | duplicate creates | deletes below target | below-target samples | not converged | time to converge (median, max) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, k := range allDisruptions {
		var up, down, fails, over, dup, below, belowS, notConv int
		var times []time.Duration
		for _, r := range results {
			if r.spec.kind != k {
				continue
			}
			if r.spec.up {
				up++
			} else {
				down++
			}
			if r.failed() {
				fails++
			}
			over += r.findings.overSamples
			dup += r.findings.duplicates
			below += r.findings.extraDeletes
			belowS += r.findings.belowSamples
			if r.converged {
				times = append(times, r.convergeIn)
			} else {
				notConv++
			}
		}
		if up+down == 0 {
			continue
		}
		conv := "-"
		if len(times) > 0 {
			slices.Sort(times)
			conv = fmt.Sprintf("%.1f s, %.1f s", median(times).Seconds(), times[len(times)-1].Seconds())
		}
		fmt.Fprintf(&b, "| %s | %d (%d/%d) | %d | %d | %d | %d | %d | %d | %s |\n", k, up+down, up, down, fails, over, dup, below, belowS, notConv, conv)
	}
	b.WriteString("\nOver-target samples: 100 ms samples in which a member ran more than max(old, new target) + maxSurge active pods, or the fleet more than max(old, new replicas) + maxSurge. ")
	b.WriteString("Duplicate creates: distinct pods created beyond the missing replicas (watched in every member), plus any create on a scale-down. ")
	b.WriteString("Deletes below target: deletes beyond the surplus on a scale-down, or any delete on a scale-up. ")
	b.WriteString("Below-target samples: samples in which a member ran fewer active pods than its new target, or the fleet fewer than the new replicas, on a scale-down. ")
	b.WriteString("Time to converge: from the scale request until every member runs its target, all Ready, and the hub status says so (converged rounds only).\n")
	return b.String()
}

func median(ds []time.Duration) time.Duration {
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}
