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
	mode := plan.mode
	if plan.sharded {
		mode = "sharded " + mode
	}
	fmt.Fprintf(&b, "Chaos %s form, %s: %d rounds (%d leader disruptions), scaling %d <-> %d replicas at weights 1:1:1, maxSurge %d; %d rounds failed; %s in all.\n",
		mode, time.Now().UTC().Format("2006-01-02 15:04 MST"), len(results), leaderRounds, plan.low, plan.high, chaosSurge, failed, took.Round(time.Second))
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
		fmt.Fprintf(&b, "| %s | %d (%d/%d) | %d | %d | %d | %d | %d | %d | %s |\n", k, up+down, up, down, fails, over, dup, below, belowS, notConv, medianMax(times))
	}
	b.WriteString("\nOver-target samples: 100 ms samples in which a member ran more than max(old, new target) + maxSurge active pods, or the fleet more than max(old, new replicas) + maxSurge. ")
	b.WriteString("Duplicate creates: distinct pods created beyond the missing replicas (watched in every member), plus any create on a scale-down. ")
	b.WriteString("Deletes below target: deletes beyond the surplus on a scale-down, or any delete on a scale-up. ")
	b.WriteString("Below-target samples: samples in which a member ran fewer active pods than its new target, or the fleet fewer than the new replicas, on a scale-down. ")
	b.WriteString("Time to converge: from the scale request until every member runs its target, all Ready, and the hub status says so (converged rounds only).\n")
	handoverTable(&b, plan, results)
	if plan.sharded {
		moveTable(&b, plan, results)
	}
	return b.String()
}

// memberQPS is controller.memberQPS as the e2e fleet runs it (the default):
// the pace of the QPS ideal below.
const memberQPS = 20

// qpsIdeal is how long each member's change of a round takes at memberQPS.
func qpsIdeal(plan chaosPlan) time.Duration {
	return time.Duration(float64(plan.high-plan.low) / 3 / memberQPS * float64(time.Second))
}

// handoverTable adds one row per leader disruption: how long the election
// and the new leader's first member write took, and the convergence time
// against the QPS ideal (each member's change at memberQPS, as if nothing
// had been disrupted).
func handoverTable(b *strings.Builder, plan chaosPlan, results []*roundResult) {
	ideal := qpsIdeal(plan)
	fmt.Fprintf(b, "\nHandover, leader disruptions (and follower SIGTERM rounds as a reference). QPS ideal %.2f s: each member's %d pods at memberQPS %d.\n\n", ideal.Seconds(), (plan.high-plan.low)/3, memberQPS)
	b.WriteString("| disruption | rounds measured | elected after the disruption (median, max) | first member write after the election (median, max) | converged after the scale (median, max) | over the QPS ideal (median, max) | hub status after the pods (median, max) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, k := range allDisruptions {
		if !k.leader() {
			continue
		}
		var elected, first []time.Duration
		var c convergeTimes
		rounds := 0
		for _, r := range results {
			if r.spec.kind == k {
				rounds++
			}
			if r.spec.kind != k || r.handover == nil {
				continue
			}
			elected = append(elected, r.handover.elected)
			if r.handover.firstWrite >= 0 {
				first = append(first, r.handover.firstWrite)
			}
			c.add(r, ideal)
		}
		if rounds == 0 {
			// Not in this plan (the sharded set has two leader disruptions).
			continue
		}
		fmt.Fprintf(b, "| %s | %d | %s | %s | %s |\n", k, len(elected), medianMax(elected), medianMax(first), c.columns())
	}
	referenceRow(b, ideal, results)
	b.WriteString("\nElected: from the disruption (signal or transfer request) to the time raft made the round's final leader leader, as that replica's admin status reports it. First member write: from that election to the first pod create or delete it let leave for a member (the write lease's first grant of the term). Hub status after the pods: from the first poll (every 250 ms plus the poll's own time) that saw every member's pods at the target to the first that also saw the hub status say so.\n")
}

// referenceRow adds the follower SIGTERM rounds as a reference: the same
// scale changes with no leadership change, so what the machine's load
// alone adds over the QPS ideal, and what a handover adds beyond it, can
// be read off the table.
func referenceRow(b *strings.Builder, ideal time.Duration, results []*roundResult) {
	var c convergeTimes
	for _, r := range results {
		if r.spec.kind == followerTerm {
			c.add(r, ideal)
		}
	}
	if len(c.conv) == 0 {
		return
	}
	fmt.Fprintf(b, "| reference: %s (no leadership change) | %d | - | - | %s |\n", followerTerm, len(c.conv), c.columns())
}

// convergeTimes collects the converged rounds' times for the handover
// table: after the scale, over the QPS ideal, and the hub status's lag.
type convergeTimes struct{ conv, over, lag []time.Duration }

// add records r if it converged.
func (c *convergeTimes) add(r *roundResult, ideal time.Duration) {
	if !r.converged {
		return
	}
	c.conv = append(c.conv, r.convergeIn)
	c.over = append(c.over, r.convergeIn-ideal)
	c.lag = append(c.lag, r.statusLag)
}

// columns formats the three "median, max" cells of the table.
func (c *convergeTimes) columns() string {
	return fmt.Sprintf("%s | %s | %s", medianMax(c.conv), medianMax(c.over), medianMax(c.lag))
}

// medianMax formats "median, max" of ds in seconds, or "-" if empty.
func medianMax(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return fmt.Sprintf("%.2f s, %.2f s", median(ds).Seconds(), ds[len(ds)-1].Seconds())
}

func median(ds []time.Duration) time.Duration {
	n := len(ds)
	if n%2 == 1 {
		return ds[n/2]
	}
	return (ds[n/2-1] + ds[n/2]) / 2
}
