package expectations_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/types"

	ctrlexp "github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
	tu "github.com/replicafed/replicafed/internal/test/rafttest"
	"github.com/replicafed/replicafed/raftstore/expectations"
	"github.com/replicafed/replicafed/raftstore/fsm"
	"github.com/replicafed/replicafed/raftstore/node"
)

var errAlreadyExists = errors.New("already exists")

// memberAPI stands in for member clusters' pod APIs: it records every create
// (this is a test double of the member, not of the Kubernetes API server).
type memberAPI struct {
	mu         sync.Mutex
	pods       map[fedref.MemberObject]map[string]types.UID
	limit      map[fedref.MemberObject]int32 // highest target ever submitted
	creates    int
	dupRetries int
	violations []string
}

func newMemberAPI() *memberAPI {
	return &memberAPI{pods: map[fedref.MemberObject]map[string]types.UID{}, limit: map[fedref.MemberObject]int32{}}
}

// create is the write; fence is checked under the lock, right before the
// write lands, as a client would check it right before sending.
func (m *memberAPI) create(ctx context.Context, fence func() bool, k fedref.MemberObject, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ctx.Err() != nil || !fence() {
		return context.Canceled
	}
	if m.pods[k] == nil {
		m.pods[k] = map[string]types.UID{}
	}
	if _, ok := m.pods[k][name]; ok {
		m.dupRetries++
		return errAlreadyExists
	}
	m.creates++
	m.pods[k][name] = types.UID(fmt.Sprintf("uid-%d", m.creates))
	if got := int32(len(m.pods[k])); got > m.limit[k] {
		m.violations = append(m.violations, fmt.Sprintf("%s has %d pods, target %d", k, got, m.limit[k]))
	}
	return nil
}

func (m *memberAPI) list(k fedref.MemberObject) map[string]ctrlexp.ListedPod {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]ctrlexp.ListedPod{}
	for n, u := range m.pods[k] {
		out[n] = ctrlexp.ListedPod{UID: u}
	}
	return out
}

func (m *memberAPI) raise(k fedref.MemberObject, t int32) {
	m.mu.Lock()
	m.limit[k] = max(m.limit[k], t)
	m.mu.Unlock()
}

type replica struct {
	node   *node.Node
	store  *expectations.Store
	cancel context.CancelFunc
	done   chan struct{}
}

// fakeEngine is a minimal member worker: reconcile on a new term, then the
// standard sync (satisfied? count, reserve, create, observe).
func fakeEngine(ctx context.Context, r *replica, api *memberAPI, keys []fedref.MemberObject, rng *rand.Rand) {
	defer close(r.done)
	var term uint64
	for ctx.Err() == nil {
		lctx, ok := r.node.Allowed()
		if !ok {
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if _, t, ok := r.node.Leading(); ok && t != term {
			failed := false
			for _, k := range r.store.KeysToReconcile("") {
				if _, err := r.store.ReconcileReservations(lctx, k, api.list(k)); err != nil {
					failed = true
				}
			}
			if failed {
				continue
			}
			term = t
		}
		for _, k := range keys {
			if !r.store.Satisfied(k) {
				continue
			}
			targets, _, ok := r.node.Targets(fsm.FRSRef{Namespace: k.Namespace, Name: k.Name})
			if !ok {
				continue
			}
			target := targets[k.Cluster]
			active := len(api.list(k))
			diff := int(target) - active
			if diff <= 0 {
				continue
			}
			names, err := r.store.ExpectCreations(lctx, k, ctrlexp.CreateIntent{Target: target, Active: active, Count: min(diff, 1+rng.IntN(8)), Prefix: k.Name + "-"})
			if err != nil {
				continue
			}
			var wg sync.WaitGroup
			for _, name := range names {
				retry := rng.IntN(4) == 0
				wg.Add(1)
				go func() {
					defer wg.Done()
					fence := func() bool { _, ok := r.node.Allowed(); return ok }
					err := api.create(lctx, fence, k, name)
					if err == nil && retry {
						err = api.create(lctx, fence, k, name) // a retry after a lost response
					}
					switch {
					case err == nil, errors.Is(err, errAlreadyExists):
						r.store.CreationObserved(k, name)
					default:
						r.store.CreationFailed(k, name)
					}
				}()
			}
			wg.Wait()
		}
	}
}

func TestInvariantUnderLeaderChaos(t *testing.T) { leaderChaos(t, false) }

// TestInvariantUnderLeaderChaosWithGrants is the chaos test with the
// targets shared through the stores (Store.Share), so every key's first
// names are granted by its SetTargets (grant-on-targets) and claimed by
// the engine of the granting leader, while leaders are killed and
// partitioned between the grant and the creates.
func TestInvariantUnderLeaderChaosWithGrants(t *testing.T) { leaderChaos(t, true) }

// leaderChaos runs fake engines on three replicas under leader kills and
// partitions while targets rise, and checks that no key ever exceeds its
// target; shared commits the targets through the stores' Share.
func leaderChaos(t *testing.T, shared bool) {
	if testing.Short() {
		t.Skip("chaos test")
	}
	c := tu.NewCluster(t, 3, func(_ int, cfg *node.NodeConfig) {
		cfg.ObservationFlushInterval = 50 * time.Millisecond
		cfg.ObservationBatchSize = 64
	})
	c.StartAll()
	c.WaitVoters(3, 20*time.Second)
	waitFeatures(t, c)
	api := newMemberAPI()
	var keys []fedref.MemberObject
	for _, m := range []string{"m1", "m2"} {
		for _, f := range []string{"web", "api"} {
			keys = append(keys, fedref.MemberObject{Cluster: m, Namespace: "ns", Name: f})
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var mu sync.Mutex
	replicas := make([]*replica, 3)
	startReplica := func(i int, n *node.Node) {
		rctx, rcancel := context.WithCancel(ctx)
		r := &replica{node: n, store: expectations.New(n, logr.Discard()), cancel: rcancel, done: make(chan struct{})}
		go r.store.Run(rctx)
		go fakeEngine(rctx, r, api, keys, rand.New(rand.NewPCG(uint64(i), uint64(time.Now().UnixNano()))))
		mu.Lock()
		replicas[i] = r
		mu.Unlock()
	}
	for i := range 3 {
		startReplica(i, c.Node(i))
	}
	stopReplica := func(i int) {
		mu.Lock()
		r := replicas[i]
		replicas[i] = nil
		mu.Unlock()
		if r != nil {
			r.cancel()
			<-r.done
		}
	}

	targets := map[string]map[string]int32{"web": {"m1": 0, "m2": 0}, "api": {"m1": 0, "m2": 0}}
	gen := int64(0)
	scale := func() {
		gen++
		for frs, tm := range targets {
			for m := range tm {
				tm[m] += int32(rand.IntN(12))
				api.raise(fedref.MemberObject{Cluster: m, Namespace: "ns", Name: frs}, tm[m])
			}
			for _, n := range c.Live() {
				sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
				mu.Lock()
				r := replicas[c.Index(n)]
				mu.Unlock()
				var err error
				if shared && r != nil {
					_, err = r.store.Share(sctx, &fsm.SetTargets{Meta: n.Meta(), FRS: fsm.FRSRef{Namespace: "ns", Name: frs, UID: "u"}, Generation: gen, Targets: maps.Clone(tm)})
				} else {
					err = n.SetTargets(sctx, fsm.FRSRef{Namespace: "ns", Name: frs, UID: "u"}, gen, tm)
				}
				scancel()
				if err == nil {
					break
				}
			}
		}
	}

	rng := rand.New(rand.NewPCG(1, 2))
	deadline := time.Now().Add(12 * time.Second)
	kills, partitions := 0, 0
	for time.Now().Before(deadline) {
		scale()
		time.Sleep(time.Duration(100+rng.IntN(300)) * time.Millisecond)
		var leader *node.Node
		for _, n := range c.Live() {
			if n.IsLeader() {
				leader = n
			}
		}
		if leader == nil {
			continue
		}
		i := c.Index(leader)
		switch rng.IntN(3) {
		case 0:
			kills++
			stopReplica(i)
			c.Kill(i)
			time.Sleep(time.Duration(200+rng.IntN(400)) * time.Millisecond)
			startReplica(i, c.Start(i))
		case 1:
			partitions++
			leader.SetIsolated(true)
			time.Sleep(time.Duration(300+rng.IntN(700)) * time.Millisecond)
			leader.SetIsolated(false)
		}
	}
	// Quiesce: every key must reach exactly its target.
	tu.Eventually(t, 30*time.Second, func() error {
		for frs, tm := range targets {
			for m, want := range tm {
				k := fedref.MemberObject{Cluster: m, Namespace: "ns", Name: frs}
				if got := len(api.list(k)); got != int(want) {
					return fmt.Errorf("%s has %d pods, want %d", k, got, want)
				}
			}
		}
		return nil
	})
	cancel()
	for i := range replicas {
		stopReplica(i)
	}
	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.violations) > 0 {
		t.Fatalf("over-creation: %v", api.violations)
	}
	t.Logf("%d creates, %d AlreadyExists retries, %d leader kills, %d leader partitions", api.creates, api.dupRetries, kills, partitions)
	if kills+partitions == 0 || api.dupRetries == 0 {
		t.Fatal("chaos did not happen")
	}
}

func TestStoreProtocol(t *testing.T) {
	c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) { cfg.ObservationFlushInterval = time.Hour })
	c.StartAll()
	n := c.WaitLeader(10 * time.Second)
	s := expectations.New(n, logr.Discard())
	ctx := tu.Ctx(t, 10*time.Second)
	k := web
	setTarget(t, ctx, n, 3)
	if !s.Satisfied(k) {
		t.Fatal("fresh key not satisfied")
	}
	// The caller asks for 10 with a stale target; the committed target caps it.
	names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 10, Active: 0, Count: 10, Prefix: "web-"})
	if err != nil || len(names) != 3 {
		t.Fatalf("got %v %v, want 3 names", names, err)
	}
	if s.Satisfied(k) {
		t.Fatal("satisfied with outstanding reservations")
	}
	if _, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 10, Active: 0, Count: 1}); !errors.Is(err, fsm.ErrRefused) {
		t.Fatalf("over-reservation: got %v", err)
	}
	s.CreationObserved(k, names[0])
	s.CreationObserved(k, names[1])
	s.CreationFailed(k, names[2])
	// Observations count locally at once, before any flush.
	if !s.Satisfied(k) {
		t.Fatal("local observations not applied")
	}
	// The next reservation carries them: 2 active + 1 new = target.
	more, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 3, Active: 2, Count: 5, Prefix: "web-"})
	if err != nil || len(more) != 1 || more[0] == names[2] {
		t.Fatalf("got %v %v, want one fresh name", more, err)
	}
	s.CreationObserved(k, more[0])
	if err := s.ExpectDeletions(ctx, k, []ctrlexp.PodRef{{Name: names[0], UID: "u0"}}); err != nil {
		t.Fatal(err)
	}
	if s.Satisfied(k) {
		t.Fatal("satisfied with a pending delete")
	}
	s.DeletionObserved(k, names[0])
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if !s.Satisfied(k) {
		t.Fatal("not satisfied after flush")
	}
	// Delete forgets outstanding entries.
	if _, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 3, Active: 1, Count: 1}); err != nil {
		t.Fatal(err)
	}
	s.Delete(k)
	if !s.Satisfied(k) {
		t.Fatal("Delete did not forget")
	}
	s.DeleteCluster("m1")
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if len(n.FSM().Keys()) != 0 {
		t.Fatalf("keys left: %v %+v", n.FSM().Keys(), n.FSM().View(fsm.KeyOf(k)))
	}
}

// TestReconcileAfterFailover: the new leader takes over the old leader's
// unfulfilled reservations and creates exactly those names, so a late create
// of the old leader collides with its own.
func TestReconcileAfterFailover(t *testing.T) {
	c, _ := threeVoters(t)
	ctx := tu.Ctx(t, 2*time.Minute)
	k := web
	// On whichever replica leads, for its term (as the engine's syncs
	// are): an election on a loaded machine refuses a reservation of the
	// term before, and then nothing is reserved.
	var old *node.Node
	var names []string
	tu.Eventually(t, time.Minute, func() error {
		old = c.WaitLeader(20 * time.Second)
		if err := old.SetTargets(ctx, fsm.FRSRef{Namespace: web.Namespace, Name: web.Name}, 1, map[string]int32{web.Cluster: 4}); err != nil {
			return err
		}
		var err error
		names, err = expectations.New(old, logr.Discard()).ExpectCreations(ctrlexp.WithTerm(ctx, old.LastLeaderTerm()), k, ctrlexp.CreateIntent{Target: 4, Count: 4, Prefix: "web-"})
		if err == nil && len(names) != 4 {
			t.Fatalf("reserved %v, want 4 names", names)
		}
		return err
	})
	c.Kill(c.Index(old)) // it created only the first two pods
	next := c.WaitLeader(30*time.Second, old)
	term := next.LastLeaderTerm()
	ctx = ctrlexp.WithTerm(ctx, term)
	s := expectations.New(next, logr.Discard())
	// Polled: the list is empty while the new leader's lease lapses for a
	// moment.
	tu.Eventually(t, 30*time.Second, func() error {
		if keys := s.KeysToReconcile("m1"); len(keys) != 1 || keys[0] != k {
			return fmt.Errorf("keys to reconcile %v, want [%v]", keys, k)
		}
		return nil
	})
	if s.Satisfied(k) {
		t.Fatal("key satisfied before the reconcile")
	}
	st, err := s.ReconcileReservations(ctx, k, map[string]ctrlexp.ListedPod{names[0]: {UID: "a"}, names[1]: {UID: "b"}})
	if err != nil {
		skipIfLeadershipMoved(t, next, term)
	}
	if err != nil || len(st.Completed) != 2 || len(st.Held) != 2 {
		t.Fatalf("reconcile: %+v %v", st, err)
	}
	if !s.Satisfied(k) {
		t.Fatal("held names hold up the key")
	}
	// Two pods exist; the two missing slots get the old leader's names.
	again, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 4, Active: 2, Count: 2, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, next, term)
		t.Fatal(err)
	}
	want := map[string]bool{names[2]: true, names[3]: true}
	if len(again) != 2 || !want[again[0]] || !want[again[1]] {
		t.Fatalf("new leader got names %v, want the old leader's %v", again, names[2:])
	}
	if len(s.KeysToReconcile("m1")) != 0 {
		t.Fatal("key still has earlier-term entries")
	}
	// The new leader's create of one of them fails before it is sent (a
	// slow-start skip): the old leader's paused create of that name may
	// still land, so the name stays for the slot and the next reservation
	// hands it out again, never a fresh name that would stand next to it.
	s.CreationFailed(k, again[1])
	if err := s.Flush(ctx); err != nil {
		skipIfLeadershipMoved(t, next, term)
		t.Fatal(err)
	}
	retry, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 4, Active: 2, Count: 2, Prefix: "web-"})
	if err != nil {
		skipIfLeadershipMoved(t, next, term)
		t.Fatal(err)
	}
	if len(retry) != 1 || retry[0] != again[1] {
		t.Fatalf("after the failed create of %s the new leader got names %v, want only that name again", again[1], retry)
	}
}

// TestDeletesTakenOverAfterFailover: a new leader keeps the deposed
// leader's deletes of pods that still run, for itself to delete, instead of
// forgetting them and choosing other victims (which removed both sets on a
// scale-down interrupted by a SIGKILL); deletes that landed or whose pod was
// replaced are settled.
func TestDeletesTakenOverAfterFailover(t *testing.T) {
	c, old := threeVoters(t)
	// As generous as the cluster helpers' waits: at load 18 on two cores
	// the first Apply found no leader for 30 s once.
	ctx := tu.Ctx(t, 2*time.Minute)
	k := web
	victims := []ctrlexp.PodRef{{Name: "web-a", UID: "ua"}, {Name: "web-b", UID: "ub"}, {Name: "web-c", UID: "uc"}, {Name: "web-d", UID: "ud"}}
	if err := expectations.New(old, logr.Discard()).ExpectDeletions(ctx, k, victims); err != nil {
		t.Fatal(err)
	}
	c.Kill(c.Index(old)) // before sending any of the deletes
	next := c.WaitLeader(10*time.Second, old)
	s := expectations.New(next, logr.Discard())
	if keys := s.KeysToReconcile("m1"); len(keys) != 1 || keys[0] != k {
		t.Fatalf("keys to reconcile %v", keys)
	}
	// web-a runs, web-b is terminating (its delete landed), web-c was
	// replaced by a pod of the same name, web-d is gone; web-x is another pod.
	st, err := s.ReconcileReservations(ctx, k, map[string]ctrlexp.ListedPod{
		"web-a": {UID: "ua"}, "web-b": {UID: "ub", Deleting: true}, "web-c": {UID: "other"}, "web-x": {UID: "ux"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]ctrlexp.PodRef{{Name: "web-a", UID: "ua"}}, st.HeldDeletes); diff != "" {
		t.Fatalf("deletes taken over (-want +got):\n%s", diff)
	}
	if s.Satisfied(k) {
		t.Fatal("a taken-over delete does not hold up the key")
	}
	if len(s.KeysToReconcile("m1")) != 0 {
		t.Fatal("the taken-over delete still counts as an earlier term's")
	}
	// Every replica agrees on the taken-over delete.
	fk := fsm.KeyOf(web)
	for _, n := range c.Live() {
		tu.Eventually(t, 20*time.Second, func() error {
			if d := n.FSM().View(fk).Deletes; len(d) != 1 || d["web-a"].UID != "ua" {
				return fmt.Errorf("replica %s holds deletes %+v, want only web-a's", n.ServerID(), d)
			}
			return nil
		})
	}
	s.DeletionObserved(k, "web-a")
	if !s.Satisfied(k) {
		t.Fatal("key unsatisfied after the taken-over delete was observed")
	}
}

// TestLostSettlementDoesNotStallTheKey: a leader's reservation whose
// settlement never committed (a create cancelled while the write lease had
// lapsed for a moment was released with no term, which the FSM refuses)
// kept the key unsatisfied until the TTL: a new FRS stopped at 36 of 150
// pods for minutes in make chaos. The reconcile at the next sync holds such
// names, the key is satisfied again, and the names are reissued first.
func TestLostSettlementDoesNotStallTheKey(t *testing.T) {
	_, leader := threeVoters(t)
	// Proposed for the leader's term, as the engine's syncs are: on a
	// loaded machine the write lease lapses for moments, and a store asked
	// for the current term then proposes for none, which is refused.
	term := leader.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 60*time.Second), term)
	fatalf := func(format string, args ...any) {
		t.Helper()
		skipIfLeadershipMoved(t, leader, term)
		t.Fatalf(format, args...)
	}
	k := web
	fk := fsm.KeyOf(web)
	setTarget(t, ctx, leader, 10)
	s := expectations.New(leader, logr.Discard())
	names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 10, Count: 3, Prefix: "web-"})
	if err != nil || len(names) != 3 {
		fatalf("reserve: %v %v", names, err)
	}
	s.CreationObserved(k, names[0])
	// The release of names[1] as the revoked leader used to send it.
	m := leader.Meta()
	m.Term = term
	if _, err := leader.Apply(ctx, &fsm.Settle{Meta: m, Items: []fsm.Settlement{{Kind: fsm.SettleFailed, Key: fk, Name: names[1]}}}); err != nil {
		fatalf("%v", err)
	}
	if err := s.FlushAll(ctx); err != nil {
		fatalf("%v", err)
	}
	if s.Satisfied(k) {
		fatalf("want the key held up by the reservations without a settlement")
	}
	// This leader's own release (the fixed path) carries the reservation's
	// term and applies.
	s.CreationFailed(k, names[2])
	if err := s.FlushAll(ctx); err != nil {
		fatalf("%v", err)
	}
	if _, ok := leader.FSM().ReservationTerm(fk, names[2]); ok {
		fatalf("the leader's own release of an unsent create did not apply")
	}
	st, err := s.ReconcileReservations(ctx, k, map[string]ctrlexp.ListedPod{names[0]: {UID: "u0"}})
	if err != nil {
		fatalf("%v", err)
	}
	if diff := cmp.Diff([]string{names[1]}, st.Held); diff != "" {
		fatalf("held (-want +got):\n%s", diff)
	}
	if !s.Satisfied(k) {
		fatalf("key still unsatisfied after the reconcile")
	}
	again, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 10, Active: 1, Count: 1, Prefix: "web-"})
	if err != nil || len(again) != 1 || again[0] != names[1] {
		fatalf("next reservation %v (%v), want the held name %s first", again, err, names[1])
	}
}

// TestOnlyTheLeaderForgets: a follower's DeleteCluster or Delete, a stopping
// leader's, and a deposed leader's late release all leave the leader's
// reservations and pending deletes intact.
func TestOnlyTheLeaderForgets(t *testing.T) {
	c, leader := threeVoters(t)
	// Longer than the retries below: they can take two minutes under load.
	ctx := tu.Ctx(t, 4*time.Minute)
	k := web
	fk := fsm.KeyOf(web)
	setTarget(t, ctx, leader, 10)
	term := leader.LastLeaderTerm()
	ls := expectations.New(leader, logr.Discard())
	// Retried: under load the write lease can lapse for a moment right
	// after the election, and a reservation proposed then is refused as
	// stale (nothing applied).
	var names []string
	tu.Eventually(t, 2*time.Minute, func() error {
		var err error
		names, err = ls.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: 10, Count: 4, Prefix: "web-"})
		return err
	})
	// A sync of another key owns the pending deletes.
	k2 := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "api"}
	if err := ls.ExpectDeletions(ctx, k2, []ctrlexp.PodRef{{Name: "api-1", UID: "u1"}, {Name: "api-2", UID: "u2"}}); err != nil {
		// The test follows one leader; under load raft may elect another.
		skipIfLeadershipMoved(t, leader, term)
		t.Fatal(err)
	}
	intact := func(n *node.Node, why string) {
		t.Helper()
		forgetsIntact(t, n, fk, names, why)
	}

	var follower *node.Node
	for _, n := range c.Live() {
		if n != leader {
			follower = n
		}
	}
	fs := expectations.New(follower, logr.Discard())
	fs.DeleteCluster("m1")
	fs.Delete(k)
	fs.Delete(k2)
	fs.CreationFailed(k, names[0])
	if err := fs.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	// A process that built forgets before it lost leadership (or never had
	// it) and sends them now: forwarded to the leader, they change nothing.
	for _, term := range []uint64{0, leaderTerm(t, leader) - 1} {
		m := follower.Meta()
		m.Term = term
		if _, err := follower.Apply(ctx, &fsm.Settle{Meta: m, Items: []fsm.Settlement{
			{Kind: fsm.SettleForgetCluster, Key: fsm.Key{Cluster: "m1"}, BeforeSeq: 1 << 40, Term: term},
			{Kind: fsm.SettleForgetKey, Key: fk, BeforeSeq: 1 << 40, Term: term},
			{Kind: fsm.SettleFailed, Key: fk, Name: names[1], Term: term},
		}}); err != nil {
			t.Fatal(err)
		}
		m.ReqID = node.NewRequestID()
		if _, err := follower.Apply(ctx, &fsm.Reserve{Meta: m, Key: fk, Target: 10, Count: 1, Prefix: "web-", TTL: int64(time.Hour)}); !errors.Is(err, fsm.ErrStale) {
			t.Fatalf("reserve proposed for term %d: got %v, want ErrStale", term, err)
		}
	}
	// Make sure the leader applied everything the follower sent.
	if err := leader.SetMemberHealth(ctx, "m1", true, time.Unix(1, 0)); err != nil {
		t.Fatal(err)
	}
	intact(leader, "after a follower's cleanup")

	// The leader stops gracefully: its worker stops first and cleans up;
	// then it steps down, and the process shuts down.
	ls.DeleteCluster("m1")
	if err := leader.StepDown(); err != nil {
		t.Fatalf("step down: %v", err)
	}
	ls.Delete(k) // an owner-delete event arriving during shutdown
	ls.CreationFailed(k, names[2])
	if err := ls.FlushAll(ctx); err != nil {
		t.Fatal(err)
	}
	intact(shutDown(t, c, leader), "after the old leader stopped")
}

// forgetsIntact fails the test unless n still holds names' reservations of
// fk and the two pending deletes of m1/ns/api.
func forgetsIntact(t *testing.T, n *node.Node, fk fsm.Key, names []string, why string) {
	t.Helper()
	v := n.FSM().View(fk)
	for _, name := range names {
		if _, ok := v.Reservations[name]; !ok {
			t.Fatalf("%s: reservation %s erased: %+v", why, name, v.Reservations)
		}
	}
	if d := n.FSM().View(fsm.Key{Cluster: "m1", Namespace: "ns", Name: "api"}).Deletes; len(d) != 2 {
		t.Fatalf("%s: pending deletes erased: %+v", why, d)
	}
}

// shutDown ends a graceful stop of the stepped-down old leader as the
// server does, with Shutdown, and returns the next leader once it has
// applied every entry committed so far (the old leader's late flush among
// them).
func shutDown(t *testing.T, c *tu.Cluster, old *node.Node) *node.Node {
	t.Helper()
	// Whichever node committed the late entries knows that they did.
	var committed uint64
	for _, n := range c.Live() {
		committed = max(committed, n.Raft().CommitIndex())
	}
	if err := old.Shutdown(); err != nil {
		t.Fatalf("shutting down the old leader: %v", err)
	}
	next := c.WaitLeader(20*time.Second, old)
	tu.Eventually(t, 10*time.Second, func() error {
		if applied := next.Raft().AppliedIndex(); applied < committed {
			return fmt.Errorf("new leader applied up to %d, %d committed before the stop", applied, committed)
		}
		return nil
	})
	return next
}

func leaderTerm(t *testing.T, n *node.Node) uint64 {
	t.Helper()
	_, term, ok := n.Leading()
	if !ok {
		t.Fatal("not leading")
	}
	return term
}

func TestBatchingKeepsRaftEntriesLow(t *testing.T) {
	entries := createPods(t, 1000)
	t.Logf("raft entries per 1,000 pod creations: %d", entries)
	if entries > 20 {
		t.Fatalf("%d raft entries for 1,000 creations", entries)
	}
}

// createPods scales one key from 0 to n with slow-start batches (1, 2, 4, ...,
// capped at 500, like the upstream burst) and returns the raft entries used.
func createPods(tb testing.TB, n int) uint64 {
	c := tu.NewCluster(tb, 3, func(i int, cfg *node.NodeConfig) {
		tu.StableTimers(i, cfg)
		cfg.ObservationFlushInterval = 100 * time.Millisecond
		cfg.ObservationBatchSize = 1000
		// One key's reservations are serial (a key is never synced twice
		// at once): nothing can share their entries.
		cfg.ReservationLinger = -1
	})
	c.StartAll()
	l := c.WaitVoters(3, 20*time.Second)
	s := expectations.New(l, logr.Discard())
	// Proposed for the leader's term, as the engine's syncs are (see
	// TestLostSettlementDoesNotStallTheKey).
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(tb, 60*time.Second), term)
	go s.Run(ctx)
	k := web
	setTarget(tb, ctx, l, int32(n))
	before := l.Raft().LastIndex()
	active, batch := 0, 1
	var observed atomic.Int64
	for active < n {
		tu.Eventually(tb, 2*time.Minute, func() error {
			if !s.Satisfied(k) && l.LastLeaderTerm() == term {
				return fmt.Errorf("key unsatisfied at %d of %d pods", active, n)
			}
			return nil
		})
		names, err := s.ExpectCreations(ctx, k, ctrlexp.CreateIntent{Target: int32(n), Active: active, Count: min(batch, n-active, 500), Prefix: "web-"})
		if err != nil {
			skipIfLeadershipMoved(tb, l, term)
			tb.Fatal(err)
		}
		for _, name := range names {
			s.CreationObserved(k, name)
			observed.Add(1)
		}
		active += len(names)
		batch *= 2
	}
	if err := s.Flush(ctx); err != nil {
		tb.Fatal(err)
	}
	skipIfLeadershipMoved(tb, l, term)
	return l.Raft().LastIndex() - before
}

// TestPendingObservationsBounded: uncommitted observations beyond the bound
// are dropped and the epoch changes, so the engine re-lists every key.
func TestPendingObservationsBounded(t *testing.T) {
	c := tu.NewCluster(t, 1, func(_ int, cfg *node.NodeConfig) { cfg.ObservationFlushInterval = time.Hour })
	c.StartAll()
	n := c.WaitLeader(10 * time.Second)
	s := expectations.New(n, logr.Discard())
	k := web
	if s.Epoch() != 0 {
		t.Fatalf("fresh store at epoch %d", s.Epoch())
	}
	const bound = 10000 // minMaxPending: the default batch size gives no larger bound
	for i := range bound {
		s.CreationObserved(k, fmt.Sprintf("web-%d", i))
	}
	if s.Epoch() != 0 {
		t.Fatal("dropped observations within the bound")
	}
	s.CreationObserved(k, "one-too-many")
	if s.Epoch() != 1 {
		t.Fatalf("epoch %d after exceeding the bound, want 1", s.Epoch())
	}
	// What is left is committed normally.
	if err := s.FlushAll(tu.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
}

// TestFollowerRecordsNothing: a follower neither keeps nor commits
// observations; a new leader settles from a quorum list instead.
func TestFollowerRecordsNothing(t *testing.T) {
	c, leader := threeVoters(t)
	var follower *node.Node
	for _, n := range c.Live() {
		if n != leader {
			follower = n
		}
	}
	s := expectations.New(follower, logr.Discard())
	k := web
	before := leader.Raft().LastIndex()
	s.CreationFailed(k, "web-1")
	s.CreationUnknown(k, "web-2")
	s.DeletionObserved(k, "web-3")
	if err := s.FlushAll(tu.Ctx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	if after := leader.Raft().LastIndex(); after != before {
		t.Fatalf("a follower's observations reached the log: index %d -> %d", before, after)
	}
}

// web is the key most tests work on: FederatedReplicaSet ns/web in member m1.
var web = fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "web"}

// skipIfLeadershipMoved skips the test when n no longer leads in term: an
// election on a loaded machine refuses the test's commands (they are
// fenced by term), and then there is nothing to check.
func skipIfLeadershipMoved(tb testing.TB, n *node.Node, term uint64) {
	tb.Helper()
	if n.LastLeaderTerm() != term || !n.IsLeader() {
		tb.Skipf("leadership moved during the test (led term %d, now last led %d, leading %v); nothing to check", term, n.LastLeaderTerm(), n.IsLeader())
	}
}

// threeVoters starts three raft replicas with stable timers and returns them
// and their leader once all three vote and know each other's features.
func threeVoters(tb testing.TB) (*tu.Cluster, *node.Node) {
	tb.Helper()
	c := tu.NewCluster(tb, 3, tu.StableTimers)
	c.StartAll()
	l := c.WaitVoters(3, 20*time.Second)
	waitFeatures(tb, c)
	return c, l
}

// waitFeatures waits until every replica knows that every server applies
// the reissue rule, as replicas of one version do soon after the cluster
// forms: a leader elected before that writes its commands unmarked
// (fsm.Meta.HoldReissued), and a failed reissue is then released.
func waitFeatures(tb testing.TB, c *tu.Cluster) {
	tb.Helper()
	tu.Eventually(tb, 30*time.Second, func() error {
		for _, n := range c.Live() {
			if !n.AllServersHave(node.FeatureHoldReissued) {
				return fmt.Errorf("%s does not know yet that every server holds failed reissues", n.ServerID())
			}
		}
		return nil
	})
}

// setTarget commits target as web's target in m1.
func setTarget(tb testing.TB, ctx context.Context, n *node.Node, target int32) {
	tb.Helper()
	if err := n.SetTargets(ctx, fsm.FRSRef{Namespace: web.Namespace, Name: web.Name}, 1, map[string]int32{web.Cluster: target}); err != nil {
		tb.Fatal(err)
	}
}

// TestReservationsShareEntries: reservations of many keys that arrive
// within the linger take one raft entry between them, each with its own
// names, and the pending observations of other keys ride along in it.
func TestReservationsShareEntries(t *testing.T) {
	c := tu.NewCluster(t, 3, func(i int, cfg *node.NodeConfig) {
		tu.StableTimers(i, cfg)
		// Long enough for every goroutine below to queue on a loaded
		// machine; the periodic flush never runs.
		cfg.ReservationLinger = 3 * time.Second
		cfg.ObservationFlushInterval = time.Hour
	})
	c.StartAll()
	l := c.WaitVoters(3, 20*time.Second)
	tu.Eventually(t, 30*time.Second, func() error {
		if !l.CombinesCommands() {
			return errors.New("the servers do not all say they apply batch entries yet")
		}
		return nil
	})
	s := expectations.New(l, logr.Discard())
	ctx := tu.Ctx(t, 60*time.Second)
	const keys = 30
	key := func(i int) fedref.MemberObject {
		return fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("small%d", i)}
	}
	targets := map[string]int32{"m1": 3}
	for i := range keys + 1 {
		if err := l.SetTargets(ctx, fsm.FRSRef{Namespace: "ns", Name: fmt.Sprintf("small%d", i)}, 1, targets); err != nil {
			t.Fatal(err)
		}
	}
	// An observation of another key, waiting for a flush.
	other := key(keys)
	var first []string
	tu.Eventually(t, 30*time.Second, func() error {
		// A leader change right after the start refuses the command.
		var err error
		if first, err = s.ExpectCreations(ctx, other, ctrlexp.CreateIntent{Target: 3, Count: 1, Prefix: "small30-"}); err != nil || len(first) != 1 {
			return fmt.Errorf("reserving for %s: %v %w", other, first, err)
		}
		return nil
	})
	if !l.IsLeader() {
		t.Skip("leadership moved at the start; nothing to check")
	}
	s.CreationObserved(other, first[0])

	before := l.Raft().LastIndex()
	names := make([][]string, keys)
	errs := make([]error, keys)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() {
			<-start
			names[i], errs[i] = s.ExpectCreations(ctx, key(i), ctrlexp.CreateIntent{Target: 3, Count: 3, Prefix: fmt.Sprintf("small%d-", i)})
		})
	}
	term := l.LastLeaderTerm()
	close(start)
	wg.Wait()
	if l.LastLeaderTerm() != term || !l.IsLeader() {
		t.Skipf("leadership moved during the test (term %d -> %d); nothing to check", term, l.LastLeaderTerm())
	}
	for i := range keys {
		if errors.Is(errs[i], fsm.ErrStale) {
			t.Skipf("the leader's lease lapsed during the test (%v); nothing to check", errs[i])
		}
		if errs[i] != nil || len(names[i]) != 3 {
			t.Fatalf("key %d: %v %v, want 3 names", i, names[i], errs[i])
		}
	}
	entries := l.Raft().LastIndex() - before
	t.Logf("%d reservations took %d raft entries", keys, entries)
	if entries > 3 {
		t.Fatalf("%d reservations took %d raft entries, want them to share", keys, entries)
	}
	// The observation rode along: committed without a flush.
	if v := l.FSM().View(fsm.KeyOf(other)); len(v.Reservations) != 0 {
		t.Fatalf("%s still has reservations %+v: the observation did not ride along", other, v.Reservations)
	}
}

// lingeringLeader starts three replicas whose reservation rounds linger
// for linger and whose store flushes every flush, and returns the leader
// once it combines commands, with a store on it.
func lingeringLeader(t *testing.T, linger, flush time.Duration) (*node.Node, *expectations.Store) {
	t.Helper()
	return crowdedLeader(t, linger, 0, flush)
}

// crowdedLeader is lingeringLeader with a crowded linger too (0: the
// default).
func crowdedLeader(t *testing.T, linger, crowded, flush time.Duration) (*node.Node, *expectations.Store) {
	t.Helper()
	c := tu.NewCluster(t, 3, func(i int, cfg *node.NodeConfig) {
		tu.StableTimers(i, cfg)
		cfg.ReservationLinger = linger
		cfg.CrowdedReservationLinger = crowded
		cfg.ObservationFlushInterval = flush
	})
	c.StartAll()
	l := c.WaitVoters(3, 20*time.Second)
	tu.Eventually(t, 30*time.Second, func() error {
		if !l.CombinesCommands() {
			return errors.New("the servers do not all say they apply batch entries yet")
		}
		return nil
	})
	return l, expectations.New(l, logr.Discard())
}

// TestSharedCommandsRideReservationRounds: commands handed to Share (the
// hub's SetTargets) join the reservations' rounds: targets of many
// FederatedReplicaSets and reservations of many keys that arrive within
// the linger take one raft entry between them, each with its own result;
// a stale command is refused alone.
func TestSharedCommandsRideReservationRounds(t *testing.T) {
	// Long enough for every goroutine below to queue on a loaded machine;
	// the periodic flush never runs.
	l, s := lingeringLeader(t, 3*time.Second, time.Hour)
	ctx := tu.Ctx(t, 60*time.Second)
	const n = 10
	ref := func(i int) fsm.FRSRef { return fsm.FRSRef{Namespace: "ns", Name: fmt.Sprintf("frs%d", i)} }
	key := func(i int) fedref.MemberObject {
		return fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: fmt.Sprintf("res%d", i)}
	}
	for i := range n {
		if err := l.SetTargets(ctx, fsm.FRSRef{Namespace: "ns", Name: key(i).Name}, 1, map[string]int32{"m1": 2}); err != nil {
			t.Fatal(err)
		}
	}
	// Generation 5 of frs0 is committed; a pass of generation 4 is stale.
	if err := l.SetTargets(ctx, ref(0), 5, map[string]int32{"m1": 1}); err != nil {
		t.Fatal(err)
	}
	term := l.LastLeaderTerm()
	before := l.Raft().LastIndex()
	shareErrs, names, resErrs := make([]error, n+1), make([][]string, n), make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n + 1 {
		wg.Go(func() {
			<-start
			gen := int64(6)
			if i == n {
				gen = 4 // frs0, stale
			}
			target := ref(i % n)
			_, shareErrs[i] = s.Share(ctx, &fsm.SetTargets{Meta: l.Meta(), FRS: target, Generation: gen, Targets: map[string]int32{"m1": int32(i), "m2": 1}})
		})
	}
	for i := range n {
		wg.Go(func() {
			<-start
			names[i], resErrs[i] = s.ExpectCreations(ctx, key(i), ctrlexp.CreateIntent{Target: 2, Count: 2, Prefix: key(i).Name + "-"})
		})
	}
	close(start)
	wg.Wait()
	skipIfLeadershipMoved(t, l, term)
	for i := range n {
		if shareErrs[i] != nil {
			t.Fatalf("targets of %s: %v", ref(i), shareErrs[i])
		}
		tg, gen, ok := l.Targets(ref(i))
		if diff := cmp.Diff(map[string]int32{"m1": int32(i), "m2": 1}, tg); !ok || gen != 6 || diff != "" {
			t.Fatalf("targets of %s at generation %d (-want +got):\n%s", ref(i), gen, diff)
		}
		if errors.Is(resErrs[i], fsm.ErrStale) {
			t.Skipf("the leader's lease lapsed during the test (%v); nothing to check", resErrs[i])
		}
		if resErrs[i] != nil || len(names[i]) != 2 {
			t.Fatalf("reservation of %s: %v %v, want 2 names", key(i), names[i], resErrs[i])
		}
	}
	if !errors.Is(shareErrs[n], fsm.ErrStale) {
		t.Fatalf("targets of an older generation: %v, want ErrStale", shareErrs[n])
	}
	entries := l.Raft().LastIndex() - before
	t.Logf("%d SetTargets and %d reservations took %d raft entries", n+1, n, entries)
	if entries > 3 {
		t.Fatalf("%d SetTargets and %d reservations took %d raft entries, want them to share", n+1, n, entries)
	}
}

// TestFlushLeavesObservationsToRounds: a periodic flush that finds a round
// of reservations under way leaves the pending observations to it (they
// ride along in its entry) instead of waiting for the round and holding up
// the reservations that arrive meanwhile, which would then need a round of
// their own; once no round runs, the flush commits them itself.
func TestFlushLeavesObservationsToRounds(t *testing.T) {
	// The round lingers for a hundred flush intervals. On a loaded
	// machine a goroutine can miss that window and split the round: the
	// case is then replayed once with a linger four times as long, and
	// fails only if it splits again. (The split seen in CI came from a
	// periodic flush queued behind the round, holding d out until the
	// round ended: flushGate's yielding flush, and
	// TestWaitingYieldingFlushGivesWayWhenARoundStarts.)
	if got := flushLeavesObservations(t, 2*time.Second); got != 1 {
		t.Logf("two reservations and an observation took %d raft entries with a 2s linger; replaying with 8s", got)
		if got := flushLeavesObservations(t, 8*time.Second); got != 1 {
			t.Fatalf("two reservations and an observation, all within one linger, took %d raft entries, want 1", got)
		}
	}
}

// flushLeavesObservations reserves for two keys within one round's
// linger while an observation waits and flush ticks pass, and returns the
// raft entries they took; then it checks that the periodic flush commits
// an observation when no round runs.
func flushLeavesObservations(t *testing.T, linger time.Duration) uint64 {
	const flush = 20 * time.Millisecond
	l, s := lingeringLeader(t, linger, flush)
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 60*time.Second), term)
	go s.Run(ctx)
	k := func(name string) fedref.MemberObject {
		return fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: name}
	}
	a, b, c, d := k("a"), k("b"), k("c"), k("d")
	reserved := map[fedref.MemberObject][]string{}
	for _, key := range []fedref.MemberObject{a, b, c, d} {
		if err := l.SetTargets(ctx, fsm.FRSRef{Namespace: key.Namespace, Name: key.Name}, 1, map[string]int32{key.Cluster: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for _, key := range []fedref.MemberObject{a, b} {
		got, err := s.ExpectCreations(ctx, key, ctrlexp.CreateIntent{Target: 1, Count: 1, Prefix: key.Name + "-"})
		if err != nil || len(got) != 1 {
			skipIfLeadershipMoved(t, l, term)
			t.Fatalf("reserving for %s: %v %v", key, got, err)
		}
		reserved[key] = got
	}
	before := l.Raft().LastIndex()
	done := make(chan error, 2)
	reserve := func(key fedref.MemberObject) {
		_, err := s.ExpectCreations(ctx, key, ctrlexp.CreateIntent{Target: 1, Count: 1, Prefix: key.Name + "-"})
		done <- err
	}
	go reserve(c)
	tu.Eventually(t, 30*time.Second, func() error {
		if !s.RoundsRunning() {
			return errors.New("no round under way yet")
		}
		return nil
	})
	s.CreationObserved(a, reserved[a][0])
	// Flush ticks pass while the round lingers; then another key reserves.
	<-time.After(5 * flush)
	go reserve(d)
	for range 2 {
		if err := <-done; err != nil {
			skipIfLeadershipMoved(t, l, term)
			t.Fatal(err)
		}
	}
	skipIfLeadershipMoved(t, l, term)
	if v := l.FSM().View(fsm.KeyOf(a)); len(v.Reservations) != 0 {
		t.Fatalf("%s still has reservations %+v: the observation was not committed", a, v.Reservations)
	}
	entries := l.Raft().LastIndex() - before
	// No round now: the periodic flush commits the next observation.
	s.CreationObserved(b, reserved[b][0])
	tu.Eventually(t, 30*time.Second, func() error {
		if v := l.FSM().View(fsm.KeyOf(b)); len(v.Reservations) != 0 {
			return fmt.Errorf("%s still has reservations %+v", b, v.Reservations)
		}
		return nil
	})
	return entries
}

func TestLingerFor(t *testing.T) {
	const ms = time.Millisecond
	type want struct {
		Wait   time.Duration
		OnTick bool
	}
	tests := []struct {
		name                 string
		linger, crowded      time.Duration
		wasCrowded           bool
		sincePrev, untilTick time.Duration
		want                 want
	}{
		{"alone", 100 * ms, 500 * ms, false, 10 * ms, 120 * ms, want{100 * ms, false}},
		{"crowded, just now: the next tick", 100 * ms, 500 * ms, true, 0, 500 * ms, want{500 * ms, true}},
		{"crowded, a while ago: the next tick", 100 * ms, 500 * ms, true, 300 * ms, 200 * ms, want{200 * ms, true}},
		{"crowded, the next tick sooner than the linger", 100 * ms, 500 * ms, true, 450 * ms, 50 * ms, want{50 * ms, true}},
		{"crowded, longer ago than a crowded linger", 100 * ms, 500 * ms, true, 600 * ms, 400 * ms, want{100 * ms, false}},
		{"crowded linger shorter than the linger", 3000 * ms, 500 * ms, true, 0, 2000 * ms, want{3000 * ms, false}},
		{"crowded linger unset", 100 * ms, 0, true, 0, 100 * ms, want{100 * ms, false}},
		{"no linger", -1, 500 * ms, true, 0, 300 * ms, want{0, false}},
		{"no linger, alone", -1, 500 * ms, false, time.Hour, 300 * ms, want{0, false}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			wait, onTick := expectations.LingerFor(tc.linger, tc.crowded, tc.wasCrowded, tc.sincePrev, tc.untilTick)
			if diff := cmp.Diff(tc.want, want{wait, onTick}); diff != "" {
				t.Errorf("LingerFor(%s, %s, %v, %s, %s) (-want +got):\n%s", tc.linger, tc.crowded, tc.wasCrowded, tc.sincePrev, tc.untilTick, diff)
			}
		})
	}
}

// TestCrowdedRoundsLingerLonger: after a round that carried reservations
// of several keys, the next round waits for the next tick of the crowded
// linger (a multiple of it since the Unix epoch, where every replica's
// crowded rounds begin) for company; after a round alone, the short
// linger.
func TestCrowdedRoundsLingerLonger(t *testing.T) {
	const linger, crowded = 500 * time.Millisecond, 6 * time.Second
	l, s := crowdedLeader(t, linger, crowded, time.Hour)
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 60*time.Second), term)
	k := func(name string) fedref.MemberObject {
		return fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: name}
	}
	for _, name := range []string{"k1", "k2", "k3", "k4"} {
		if err := l.SetTargets(ctx, fsm.FRSRef{Namespace: "ns", Name: name}, 1, map[string]int32{"m1": 1}); err != nil {
			t.Fatal(err)
		}
	}
	reserve := func(key fedref.MemberObject) time.Duration {
		t.Helper()
		start := time.Now()
		got, err := s.ExpectCreations(ctx, key, ctrlexp.CreateIntent{Target: 1, Count: 1, Prefix: key.Name + "-"})
		if err != nil || len(got) != 1 {
			skipIfLeadershipMoved(t, l, term)
			t.Fatalf("reserving for %s: %v %v", key, got, err)
		}
		return time.Since(start)
	}
	// Two keys at once: a crowded round (unless the second came too late
	// on a loaded machine; then nothing is crowded and there is nothing
	// to check). It starts just after a tick, so the next tick is most of
	// a crowded linger away, far beyond the short linger.
	time.Sleep(node.UntilAligned(time.Now(), crowded))
	before := l.Raft().LastIndex()
	var wg sync.WaitGroup
	for _, name := range []string{"k1", "k2"} {
		wg.Go(func() { reserve(k(name)) })
	}
	wg.Wait()
	if got := l.Raft().LastIndex() - before; got != 1 {
		t.Skipf("the two reservations took %d entries; no crowded round to check", got)
	}
	// The next round begins at the next tick.
	afterCrowd := time.Now()
	tick := afterCrowd.Add(node.UntilAligned(afterCrowd, crowded))
	reserve(k("k3"))
	if done := time.Now(); done.Before(tick) {
		t.Errorf("the round after a crowded one committed at %s, before the next tick of the crowded linger at %s (%s after the crowded round)",
			done.Format(time.StampMilli), tick.Format(time.StampMilli), tick.Sub(afterCrowd))
	}
	// k3 was alone: the next round lingers the short linger again.
	if took := reserve(k("k4")); took >= crowded {
		t.Errorf("a reservation after a round alone took %s, want the short linger (%s), well below %s", took, linger, crowded)
	}
}

func TestCrowdedRound(t *testing.T) {
	res := func(cluster, name string) fsm.Command {
		return &fsm.Reserve{Key: fsm.Key{Cluster: cluster, Namespace: "ns", Name: name}}
	}
	targets := &fsm.SetTargets{FRS: fsm.FRSRef{Namespace: "ns", Name: "x"}}
	tests := []struct {
		name string
		cmds []fsm.Command
		want bool
	}{
		{"one reservation", []fsm.Command{res("m1", "a")}, false},
		{"one workload in several members", []fsm.Command{res("m1", "a"), res("m2", "a"), res("m3", "a")}, false},
		{"two workloads in one member", []fsm.Command{res("m1", "a"), res("m2", "a"), res("m1", "b")}, true},
		{"one FRS's targets are no crowd", []fsm.Command{targets, res("m1", "a")}, false},
		{"several FRS's targets are a crowd", []fsm.Command{targets, targets, res("m1", "a")}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, expectations.CrowdedRound(tc.cmds...)); diff != "" {
				t.Errorf("CrowdedRound (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFlushWaitsForCrowdedRounds: after a round crowded with several
// FRS's targets, the periodic flush leaves the observations to the next
// round, which carries them; when no round comes it still flushes.
func TestFlushWaitsForCrowdedRounds(t *testing.T) {
	const linger, crowded, flush = 500 * time.Millisecond, 4 * time.Second, 20 * time.Millisecond
	l, s := crowdedLeader(t, linger, crowded, flush)
	term := l.LastLeaderTerm()
	ctx := ctrlexp.WithTerm(tu.Ctx(t, 60*time.Second), term)
	go s.Run(ctx)
	share := func(names ...string) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make([]error, len(names))
		for i, name := range names {
			wg.Go(func() {
				m := l.Meta()
				m.Term = term
				_, errs[i] = s.Share(ctx, &fsm.SetTargets{Meta: m, FRS: fsm.FRSRef{Namespace: "ns", Name: name}, Generation: 1, Targets: map[string]int32{"m1": 1}})
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				skipIfLeadershipMoved(t, l, term)
				t.Fatal(err)
			}
		}
	}
	quiet := func(what string) {
		t.Helper()
		idx := l.Raft().LastIndex()
		<-time.After(10 * flush)
		if got := l.Raft().LastIndex(); got != idx {
			skipIfLeadershipMoved(t, l, term)
			t.Fatalf("%s: %d raft entries within ten flush intervals, want none", what, got-idx)
		}
	}
	before, t0 := l.Raft().LastIndex(), time.Now()
	share("a", "b")
	if got := l.Raft().LastIndex() - before; got != 1 {
		t.Skipf("the two targets took %d entries; no crowded round to check", got)
	}
	// The committer goes idle a crowded linger after the crowded round
	// began; the flush still waits for the next round.
	tu.Eventually(t, 30*time.Second, func() error {
		if s.RoundsRunning() {
			return errors.New("the committer is still waiting for company")
		}
		return nil
	})
	if took := time.Since(t0); took > crowded+crowded/2 {
		t.Skipf("the crowded round and its linger took %s on a loaded machine; too late to check the wait (two crowded lingers)", took)
	}
	s.CreationObserved(web, "web-x")
	quiet("an observation after a crowded round")
	before = l.Raft().LastIndex()
	share("c")
	if got := l.Raft().LastIndex() - before; got != 1 {
		t.Fatalf("the next round took %d entries, want 1 carrying the observation", got)
	}
	quiet("nothing left to flush after the round carried the observation")
	// No more rounds: the next observation is flushed at the crowd's
	// pace (within two crowded lingers of the last round).
	before = l.Raft().LastIndex()
	s.CreationObserved(web, "web-y")
	tu.Eventually(t, 30*time.Second, func() error {
		if l.Raft().LastIndex() == before {
			return errors.New("the observation after a round alone is not flushed yet")
		}
		return nil
	})
}
