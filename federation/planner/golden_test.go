package planner

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// goldenPlansFile holds one short hash per plan TestPlanOutputsStable makes,
// in the order it makes them. It pins the seat sequence (tie-breaks
// included) so that optimisations cannot change a plan by accident, and it
// says which plans changed when one does.
//
// When a change to the planner's results is intended, run
//
//	go test ./federation/planner/ -run TestPlanOutputsStable -update
//
// read the changed plans the failure printed first, and commit the file with
// the change.
var goldenPlansFile = filepath.Join("testdata", "plans.golden")

var updateGolden = flag.Bool("update", false, "rewrite testdata/plans.golden from the current planner")

// goldenPlan is one planned input and its output in text form.
type goldenPlan struct {
	in  Input
	out string
}

// Plans thousands of seeded random inputs (the property-test generator with
// several shapes, plus the benchmark fleet fresh, settled and rescaled) and
// compares each output with its hash in goldenPlansFile.
func TestPlanOutputsStable(t *testing.T) {
	plans := goldenPlans()
	got := make([]string, len(plans))
	for i, p := range plans {
		sum := sha256.Sum256([]byte(p.out))
		got[i] = hex.EncodeToString(sum[:6])
	}
	if *updateGolden {
		if err := os.WriteFile(goldenPlansFile, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatalf("writing %s: %v", goldenPlansFile, err)
		}
		return
	}
	want, err := readLines(goldenPlansFile)
	if err != nil {
		t.Fatalf("reading %s: %v", goldenPlansFile, err)
	}
	if len(want) != len(got) {
		t.Fatalf("%s holds %d plans, the test makes %d: regenerate it with -update", goldenPlansFile, len(want), len(got))
	}
	var changed []int
	for i := range got {
		if got[i] != want[i] {
			changed = append(changed, i)
		}
	}
	if len(changed) == 0 {
		return
	}
	var b strings.Builder
	for _, i := range changed[:min(len(changed), 3)] {
		fmt.Fprintf(&b, "\nplan %d, input:\n%snow plans:\n%s", i, describe(plans[i].in), plans[i].out)
	}
	t.Fatalf("%d of %d plans changed (first: %v); the first ones as they are now:%s\n"+
		"If the change is intended, regenerate %s with -update (see goldenPlansFile).",
		len(changed), len(plans), changed[:min(len(changed), 10)], b.String(), goldenPlansFile)
}

// goldenPlans makes the plans of TestPlanOutputsStable, in a fixed order.
func goldenPlans() []goldenPlan {
	var out []goldenPlan
	plan := func(in Input) Result {
		r := Plan(in)
		var b bytes.Buffer
		writeResult(&b, r)
		out = append(out, goldenPlan{in: in, out: b.String()})
		return r
	}
	shapes := []genOpts{
		{},
		{allHealthy: true},
		{noHistory: true},
		{ample: true, allHealthy: true, policy: v1alpha1.MoveBackNever},
		{maxMembers: 40, maxReplicas: 2000},
		{maxMembers: 40, maxReplicas: 2000, noHistory: true, allHealthy: true},
		{maxMembers: 30, maxReplicas: 500, ample: true, policy: v1alpha1.MoveBackOnRecovery},
	}
	rng := rand.New(rand.NewSource(20260501))
	for _, o := range shapes {
		for range 600 {
			in := genInput(rng, o)
			r := plan(in)
			// The next plan after the pods reached their targets, then a
			// rescale from there (keep bands, cost groups, scale-down order).
			next := settle(in, r)
			plan(next)
			next.Replicas = int32(rng.Intn(2*int(in.Replicas) + 2))
			plan(next)
		}
	}
	fleet := benchFleet(false)[:1500]
	for _, in := range fleet {
		r := plan(in)
		next := settle(in, r)
		plan(next)
		next.Replicas = int32(1 + rng.Intn(300))
		plan(next)
	}
	return out
}

func readLines(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines, sc.Err()
}

// writeResult writes every field of r to w in a fixed textual form.
func writeResult(w io.Writer, r Result) {
	fmt.Fprintf(w, "T%d", len(r.Targets))
	for _, t := range r.Targets {
		fmt.Fprintf(w, "|%s,%d,%d,%d,%d", t.Cluster, t.Replicas, t.Previous, t.State, t.OverCapacity)
	}
	fmt.Fprintf(w, "\nC%d", len(r.Changes))
	for _, c := range r.Changes {
		fmt.Fprintf(w, "|%s,%d,%d,%s", c.Cluster, c.From, c.To, c.Reason)
	}
	fmt.Fprintf(w, "\nS%d U%d G%d M%d X%t", r.Shortfall, r.Unplaced, r.Surge, r.MovesPending, r.MinimumsExceedReplicas)
	fmt.Fprintf(w, "\nR%q", r.Unregistered)
	if r.SelectorError != nil {
		fmt.Fprintf(w, "\nE%q", r.SelectorError.Error())
	}
	for _, n := range r.MemberNotes {
		fmt.Fprintf(w, "\nN%q %q", n.Cluster, n.Message)
	}
	fmt.Fprintf(w, "\nW%q\n", r.Notes)
}
