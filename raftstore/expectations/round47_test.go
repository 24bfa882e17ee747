package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

// r47Key is the key of the chaos suite's round 47.
var r47Key = fedref.MemberObject{Cluster: "member-a", Namespace: "e2e-chaos", Name: "chaos-1"}

const (
	r47Prefix = "chaos-1-"
	r47Target = 100
	r47Base   = 50 // pods before the scale-up
	r47Landed = 14 // the old leader's pods in the takeover's quorum list
	r47OK     = 30 // step 4: created and observed
	r47Unsent = 5  // step 4: never sent (slow-start skip)
)

// round47 is one replay of round 47 on a three-replica raft cluster: the
// term-41 leader's store and the member's pods as the replay knows them.
type round47 struct {
	t    *testing.T
	n    *node.Node
	s    *expectations.Store
	ctx  context.Context
	term uint64
	// reissued are step 3's names: the old leader's held names again.
	reissued []string
	created  []string // step 4: created and observed
	timedOut string   // step 4: the create that timed out (outcome unknown)
	unsent   []string // step 4: never sent
	// pods exist now; late are names whose create may still land (the
	// timed-out one, the old leader's in-flight ones).
	pods map[string]bool
	late []string
}

// round47Case is one ordering of what happens between the new leader's
// slow-start failure (step 4) and its next reservation (step 5).
type round47Case struct {
	name string
	// before runs the step-4 settlements and whatever else happens before
	// the step-5 sync lists its pods; it returns the active pods it lists.
	before func(r *round47) int
	// during runs while the step-5 reservation lingers: after it drained
	// the key's pending observations, before its entry is proposed.
	during func(r *round47)
	// want are the right numbers of names for step 5 to grant (the log: 6
	// at active 94). A pod seen while step 5 lingers may be counted (5) or
	// its name handed out again (6, none fresh): either is safe.
	want []int
}

// TestRound47Replay replays the chaos suite's round 47 (member-a, 50 -> 100;
// the term-40 leader SIGKILLed mid slow start; its successor reissued the 36
// held names, created 30, timed out on 1, skipped 5, then reserved 6 more,
// all created, and ran 101 pods) through the real store and FSM, once per
// ordering of the step-4 settlements, the timed-out pod's observation, the
// old leader's late creates and a quorum-list reconcile. Each case checks
// that step 5 never grants a fresh name while a name whose create may
// still land was released: the pods, step 5's names and every late name
// together stay within the target, and step 5 grants what its inputs
// allow. The two "while the reservation lingers" cases failed before the
// ride-along Settle moved behind the round's reservations.
func TestRound47Replay(t *testing.T) {
	cases := []round47Case{
		{name: "settlements flushed first", before: func(r *round47) int { r.step4(); r.flush(); return 94 }, want: []int{6}},
		{name: "settlements carried by the reservation", before: func(r *round47) int { r.step4(); return 94 }, want: []int{6}},
		{name: "a: timed-out pod seen before CreationUnknown, listed", before: func(r *round47) int {
			r.observe(r.created...)
			r.observe(r.timedOut)
			r.timeOut()
			r.skipUnsent()
			return 95
		}, want: []int{5}},
		{name: "b: seen after CreationUnknown, not listed, carried", before: func(r *round47) int { r.step4(); r.observe(r.timedOut); return 94 }, want: []int{5}},
		{name: "b: seen after CreationUnknown, not listed, flushed", before: func(r *round47) int { r.step4(); r.flush(); r.observe(r.timedOut); r.flush(); return 94 }, want: []int{5}},
		{name: "b: seen after CreationUnknown, listed", before: func(r *round47) int { r.step4(); r.observe(r.timedOut); return 95 }, want: []int{4}},
		{name: "c: seen while the reservation lingers, step 4 flushed", before: func(r *round47) int {
			// One pod's observation arrives after the flush: its drain
			// shows that step 5 has taken the key's observations.
			r.observe(r.created[:r47OK-1]...)
			r.timeOut()
			r.skipUnsent()
			r.flush()
			r.observe(r.created[r47OK-1])
			return 94
		}, during: func(r *round47) { r.observe(r.timedOut) }, want: []int{5, 6}},
		{name: "c: seen while the reservation lingers, step 4 pending", before: func(r *round47) int { r.step4(); return 94 },
			during: func(r *round47) { r.observe(r.timedOut) }, want: []int{5, 6}},
		// d: every case counts the old leader's creates of the unsent names
		// as landing after step 5 (r.late); these two let one land earlier.
		{name: "d: old leader's create of an unsent name seen before step 5, not listed", before: func(r *round47) int { r.step4(); r.observe(r.unsent[0]); return 94 }, want: []int{5}},
		{name: "d: old leader's create of an unsent name seen while the reservation lingers", before: func(r *round47) int { r.step4(); return 94 },
			during: func(r *round47) { r.observe(r.unsent[0]) }, want: []int{5, 6}},
		{name: "e: quorum-list reconcile before step 5, settlements pending", before: func(r *round47) int { r.step4(); r.reconcile(); return 94 }, want: []int{6}},
		{name: "e: reconcile lists the timed-out pod, settlements pending", before: func(r *round47) int {
			r.step4()
			r.pods[r.timedOut] = true // landed, not observed yet
			r.reconcile()
			return 95
		}, want: []int{5}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			linger := 100 * time.Millisecond
			if c.during != nil {
				linger = 5 * time.Second
			}
			for {
				r := startRound47(t, linger)
				active := c.before(r)
				granted, raced := r.reserve(active, c.during)
				if raced {
					r.check(c, active, granted)
					return
				}
				// A loaded machine let the linger run out before the
				// observation could race it: replay with a longer one.
				if linger *= 2; linger > 40*time.Second {
					t.Fatal("step 5 committed before the observation it was to race, even with a 40s linger")
				}
				t.Logf("step 5 committed before the observation it was to race; replaying with a %v linger", linger)
			}
		})
	}
}

// startRound47 runs steps 1 to 3: the term-40 leader reserves 50 names and
// is killed; the term-41 leader settles them from a quorum list (14 pods,
// 36 held) and reserves the 36 held names again.
func startRound47(t *testing.T, linger time.Duration) *round47 {
	c := tu.NewCluster(t, 3, func(i int, cfg *node.NodeConfig) {
		tu.StableTimers(i, cfg)
		cfg.ObservationFlushInterval = time.Hour
		cfg.ReservationLinger = linger
	})
	c.StartAll()
	c.WaitVoters(3, 20*time.Second)
	waitFeatures(t, c)
	ctx := tu.Ctx(t, 3*time.Minute)
	var old *node.Node
	var names []string
	tu.Eventually(t, time.Minute, func() error {
		old = c.WaitLeader(20 * time.Second)
		if err := old.SetTargets(ctx, fsm.FRSRef{Namespace: r47Key.Namespace, Name: r47Key.Name}, 1, map[string]int32{r47Key.Cluster: r47Target}); err != nil {
			return err
		}
		var err error
		names, err = expectations.New(old, logr.Discard()).ExpectCreations(ctrlexp.WithTerm(ctx, old.LastLeaderTerm()), r47Key,
			ctrlexp.CreateIntent{Target: r47Target, Active: r47Base, Count: r47Target - r47Base, Prefix: r47Prefix})
		if err == nil && len(names) != r47Target-r47Base {
			t.Fatalf("old leader reserved %d names, want %d", len(names), r47Target-r47Base)
		}
		return err
	})
	c.Kill(c.Index(old)) // SIGKILL with creates in flight
	next := c.WaitLeader(30*time.Second, old)
	r := &round47{t: t, n: next, s: expectations.New(next, logr.Discard()), term: next.LastLeaderTerm(), pods: map[string]bool{}}
	r.ctx = ctrlexp.WithTerm(ctx, r.term)
	for i := range r47Base {
		r.pods[fmt.Sprintf("%sbase-%02d", r47Prefix, i)] = true
	}
	for _, nm := range names[:r47Landed] {
		r.pods[nm] = true
	}
	r.takeOver(names[r47Landed:])
	return r
}

// takeOver is the term-41 leader's first sync: the quorum-list reconcile
// holds the names without pods, and step 3 hands exactly those out again.
func (r *round47) takeOver(held []string) {
	tu.Eventually(r.t, 30*time.Second, func() error {
		if keys := r.s.KeysToReconcile(r47Key.Cluster); len(keys) != 1 {
			return fmt.Errorf("keys to reconcile %v, want [%v]", keys, r47Key)
		}
		return nil
	})
	st, err := r.s.ReconcileReservations(r.ctx, r47Key, r.listed())
	if err != nil {
		r.moved(err)
	}
	if len(st.Completed) != r47Landed || len(st.Held) != len(held) {
		r.t.Fatalf("takeover settled %d completed, %d held; want %d, %d", len(st.Completed), len(st.Held), r47Landed, len(held))
	}
	active := len(r.pods)
	names, err := r.s.ExpectCreations(r.ctx, r47Key, ctrlexp.CreateIntent{Target: r47Target, Active: active, Count: r47Target - active, Prefix: r47Prefix})
	if err != nil {
		r.moved(err)
	}
	if !sameSet(names, held) {
		r.t.Fatalf("step 3 got %d names, want the %d held names again", len(names), len(held))
	}
	r.reissued = names
	r.created, r.timedOut, r.unsent = names[:r47OK], names[r47OK], names[r47OK+1:]
	if len(r.unsent) != r47Unsent {
		r.t.Fatalf("%d unsent names, want %d", len(r.unsent), r47Unsent)
	}
	// The timed-out create may land at any time, and so may the old
	// leader's in-flight creates of any name it reserved.
	r.late = append([]string{r.timedOut}, r.unsent...)
}

// step4 settles the slow start in the engine's order: the 30 created pods
// are observed, then the sync ends with CreationUnknown for the timed-out
// create and CreationFailed for the 5 never sent.
func (r *round47) step4() {
	r.observe(r.created...)
	r.timeOut()
	r.skipUnsent()
}

func (r *round47) timeOut() { r.s.CreationUnknown(r47Key, r.timedOut) }

func (r *round47) skipUnsent() {
	for _, nm := range r.unsent {
		r.s.CreationFailed(r47Key, nm)
	}
}

// observe records that names' pods exist and the informer reported them.
func (r *round47) observe(names ...string) {
	for _, nm := range names {
		r.pods[nm] = true
		r.s.CreationObserved(r47Key, nm)
	}
}

func (r *round47) flush() {
	if err := r.s.FlushAll(r.ctx); err != nil {
		r.moved(err)
	}
}

// reconcile settles the key from a quorum list of the pods that exist, as
// a sync's re-verification does; pending observations stay pending.
func (r *round47) reconcile() {
	if _, err := r.s.ReconcileReservations(r.ctx, r47Key, r.listed()); err != nil {
		r.moved(err)
	}
}

func (r *round47) listed() map[string]ctrlexp.ListedPod {
	out := make(map[string]ctrlexp.ListedPod, len(r.pods))
	for nm := range r.pods {
		out[nm] = ctrlexp.ListedPod{UID: types.UID("uid-" + nm)}
	}
	return out
}

// reserve is step 5's ExpectCreations at active pods. With during, it runs
// during once the reservation has drained the key's pending observations
// (the committed view then shows the created names outstanding again) and
// before the lingering entry is proposed; raced is false when the entry
// was proposed first (the linger ran out on a loaded machine), and the
// case must be replayed.
func (r *round47) reserve(active int, during func(*round47)) (names []string, raced bool) {
	if !r.s.Satisfied(r47Key) {
		r.t.Fatal("key unsatisfied before step 5: the engine would not have reserved")
	}
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		names, err := r.s.ExpectCreations(r.ctx, r47Key, ctrlexp.CreateIntent{Target: r47Target, Active: active, Count: r47Target - active, Prefix: r47Prefix})
		done <- result{names, err}
	}()
	if during != nil {
		tu.Eventually(r.t, 30*time.Second, func() error {
			if r.s.Satisfied(r47Key) {
				return errors.New("step 5 has not drained the key's observations yet")
			}
			return nil
		})
		during(r)
		select {
		case <-done:
			return nil, false
		default:
		}
	}
	res := <-done
	if res.err != nil {
		r.moved(res.err)
	}
	return res.names, true
}

// check asserts the invariant: the pods, step 5's names and every name
// whose create may still land stay within the target (a late name released
// and replaced by a fresh one exceeds it), and step 5 granted want names.
func (r *round47) check(c round47Case, active int, granted []string) {
	all := maps.Clone(r.pods)
	for _, nm := range slices.Concat(r.late, granted) {
		all[nm] = true
	}
	var fresh []string
	for _, nm := range granted {
		if !slices.Contains(r.reissued, nm) {
			fresh = append(fresh, nm)
		}
	}
	if len(all) > r47Target {
		r.t.Errorf("%d pods can exist for a target of %d: step 5 (active %d) granted %d names, %d of them fresh %v, while the late names %v may still land",
			len(all), r47Target, active, len(granted), len(fresh), fresh, r.late)
	}
	if !slices.Contains(c.want, len(granted)) {
		r.t.Errorf("step 5 (active %d) granted %d names (%d fresh), want %v", active, len(granted), len(fresh), c.want)
	}
}

// moved skips when the leader lost its term (nothing to check), else fails.
func (r *round47) moved(err error) {
	r.t.Helper()
	skipIfLeadershipMoved(r.t, r.n, r.term)
	r.t.Fatal(err)
}

func sameSet(a, b []string) bool {
	return len(a) == len(b) && !slices.ContainsFunc(a, func(s string) bool { return !slices.Contains(b, s) })
}
