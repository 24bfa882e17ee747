package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

var k1 = Key{Cluster: "m1", Namespace: "ns", Name: "web"}

const ttl = int64(300e9)

func mustApply(t *testing.T, f *FSM, c Command) Result {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	r := f.Apply(&raft.Log{Type: raft.LogCommand, Data: b}).(*Result)
	return *r
}

func reserve(id string, now int64, term uint64, target int32, active, count int) *Reserve {
	return &Reserve{Meta: Meta{ReqID: id, Now: now, Term: term}, Key: k1, Target: target, Active: active, Count: count, Prefix: "web-", TTL: ttl}
}

func TestReserve(t *testing.T) {
	tests := []struct {
		name      string
		committed map[string]int32 // nil: no committed targets
		prior     int              // names reserved before
		target    int32
		active    int
		count     int
		wantNames int
		wantCode  string
	}{
		{name: "grants all", target: 5, count: 3, wantNames: 3},
		{name: "caps at target", target: 5, active: 3, count: 5, wantNames: 2},
		{name: "counts outstanding", target: 5, prior: 3, count: 5, wantNames: 2},
		{name: "refuses when full", target: 5, active: 2, prior: 3, count: 1, wantCode: CodeRefused},
		{name: "committed target lower than caller's", committed: map[string]int32{"m1": 2}, target: 10, count: 5, wantNames: 2},
		{name: "member absent from committed targets", committed: map[string]int32{"m2": 4}, target: 10, count: 5, wantCode: CodeRefused},
		{name: "caller's target lower than committed", committed: map[string]int32{"m1": 9}, target: 1, count: 5, wantNames: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("salt")
			if tc.committed != nil {
				mustApply(t, f, &SetTargets{FRS: FRSRef{Namespace: "ns", Name: "web", UID: "u"}, Generation: 1, Targets: tc.committed})
			}
			if tc.prior > 0 {
				r := mustApply(t, f, reserve("", 0, 1, 100, 0, tc.prior))
				if len(r.Names) != tc.prior {
					t.Fatalf("prior reserve: %+v", r)
				}
				if tc.committed != nil {
					t.Fatal("test setup: prior with committed not supported")
				}
			}
			r := mustApply(t, f, reserve("", 1, 1, tc.target, tc.active, tc.count))
			if r.Code != tc.wantCode || len(r.Names) != tc.wantNames {
				t.Fatalf("got code %q names %v, want code %q and %d names", r.Code, r.Names, tc.wantCode, tc.wantNames)
			}
			if tc.wantCode == CodeRefused && !errors.Is(r.Error(), ErrRefused) {
				t.Fatalf("error %v is not ErrRefused", r.Error())
			}
			for _, n := range r.Names {
				if !strings.HasPrefix(n, "web-") || len(n) != len("web-")+suffixLen {
					t.Fatalf("bad name %q", n)
				}
			}
		})
	}
}

func TestReserveDeterministicAndUnique(t *testing.T) {
	a, b := New("c1"), New("c1")
	seen := map[string]bool{}
	for i := 0; i < 50; i++ {
		c := reserve("", int64(i), 1, 1000, 0, 4)
		ra, rb := mustApply(t, a, c), mustApply(t, b, c)
		if diff := cmp.Diff(ra, rb); diff != "" {
			t.Fatalf("replicas disagree (-a +b):\n%s", diff)
		}
		for _, n := range ra.Names {
			if seen[n] {
				t.Fatalf("name %s reused", n)
			}
			seen[n] = true
			mustApply(t, a, &Settle{Items: []Settlement{{Kind: SettleCreated, Key: k1, Name: n}}})
		}
	}
	other := New("c2")
	if r := mustApply(t, other, reserve("", 0, 1, 10, 0, 1)); seen[r.Names[0]] {
		t.Fatalf("another raft cluster produced a name of the first: %s", r.Names[0])
	}
}

func TestDedupReturnsFirstResult(t *testing.T) {
	f := New("s")
	first := mustApply(t, f, reserve("req-1", 0, 1, 10, 0, 3))
	again := mustApply(t, f, reserve("req-1", 0, 1, 10, 0, 3))
	if diff := cmp.Diff(first, again); diff != "" {
		t.Fatalf("retry got a different result (-first +retry):\n%s", diff)
	}
	if c, _ := f.View(k1).Outstanding(0); c != 3 {
		t.Fatalf("retry reserved again: %d outstanding", c)
	}
}

func TestDedupWindowIsBounded(t *testing.T) {
	f := New("s")
	f.window = 4
	for i := 0; i < 10; i++ {
		mustApply(t, f, &SetHealth{Meta: Meta{ReqID: string(rune('a' + i))}, Cluster: "m", Healthy: true})
	}
	if len(f.st.Dedup) != 4 || len(f.st.dedupIndex) != 4 {
		t.Fatalf("window holds %d entries, index %d", len(f.st.Dedup), len(f.st.dedupIndex))
	}
	if _, ok := f.st.lookupDedup("j"); !ok {
		t.Fatal("newest id forgotten")
	}
	if _, ok := f.st.lookupDedup("a"); ok {
		t.Fatal("oldest id still remembered")
	}
}

func TestSettleExpiryAndForget(t *testing.T) {
	f := New("s")
	r := mustApply(t, f, reserve("", 0, 1, 10, 0, 4))
	mustApply(t, f, &Settle{Meta: Meta{Now: 1}, Items: []Settlement{
		{Kind: SettleCreated, Key: k1, Name: r.Names[0]},
		{Kind: SettleFailed, Key: k1, Name: r.Names[1]},
		{Kind: SettleCreated, Key: k1, Name: "unknown-pod"},
	}})
	if c, _ := f.View(k1).Outstanding(1); c != 2 {
		t.Fatalf("outstanding %d, want 2", c)
	}
	// Expired reservations no longer count and free room.
	if c, _ := f.View(k1).Outstanding(ttl + 1); c != 0 {
		t.Fatalf("expired reservations still count: %d", c)
	}
	if r2 := mustApply(t, f, reserve("", ttl+1, 1, 2, 0, 5)); len(r2.Names) != 2 {
		t.Fatalf("after expiry got %v", r2)
	}
	seq := f.Seq()
	r3 := mustApply(t, f, reserve("", ttl+2, 1, 10, 0, 1))
	// A forget bounded before r3's seq keeps r3.
	mustApply(t, f, &Settle{Meta: Meta{Now: ttl + 3}, Items: []Settlement{{Kind: SettleForgetKey, Key: k1, BeforeSeq: seq + 1}}})
	v := f.View(k1)
	if _, ok := v.Reservations[r3.Names[0]]; !ok || len(v.Reservations) != 1 {
		t.Fatalf("forget removed a later reservation or kept earlier ones: %v", v.Reservations)
	}
	mustApply(t, f, &Settle{Meta: Meta{Now: ttl + 3}, Items: []Settlement{{Kind: SettleForgetCluster, Key: Key{Cluster: "m1"}, BeforeSeq: f.Seq() + 1}}})
	if len(f.Keys()) != 0 {
		t.Fatalf("forget cluster left keys %v", f.Keys())
	}
}

func TestReserveSettlesFirst(t *testing.T) {
	f := New("s")
	r := mustApply(t, f, reserve("", 0, 1, 3, 0, 3))
	c := reserve("", 1, 1, 3, 3, 1)
	c.Settle = []Settlement{{Kind: SettleCreated, Key: k1, Name: r.Names[0]}, {Kind: SettleCreated, Key: k1, Name: r.Names[1]}, {Kind: SettleCreated, Key: k1, Name: r.Names[2]}}
	if got := mustApply(t, f, c); got.Code != CodeRefused {
		t.Fatalf("3 active of target 3 must refuse, got %+v", got)
	}
	c = reserve("", 1, 1, 4, 3, 5)
	if got := mustApply(t, f, c); len(got.Names) != 1 {
		t.Fatalf("got %+v, want one name", got)
	}
}

func TestDeletesAndReconcile(t *testing.T) {
	f := New("s")
	old := mustApply(t, f, reserve("", 0, 1, 10, 0, 3))
	mustApply(t, f, &ExpectDeletes{Meta: Meta{Term: 1}, Key: k1, Pods: []PodRef{{Name: "a", UID: "1"}, {Name: "b", UID: "2"}, {Name: "c", UID: "3"}}, TTL: ttl})
	mustApply(t, f, &Settle{Items: []Settlement{{Kind: SettleDeleted, Key: k1, Name: "a"}}})
	if _, d := f.View(k1).Outstanding(0); d != 2 {
		t.Fatalf("pending deletes %d, want 2", d)
	}
	cur := mustApply(t, f, reserve("", 0, 2, 10, 0, 1))
	r := mustApply(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 5}, Key: k1, TTL: ttl,
		Live: map[string]string{old.Names[0]: "x", "b": "2", "c": "other-uid"}})
	// The pod of old.Names[0] exists; the other two earlier-term names are
	// held for the new term, never released.
	if diff := cmp.Diff([]string{old.Names[0]}, r.Completed); diff != "" {
		t.Fatalf("reconcile completed (-want +got):\n%s", diff)
	}
	if len(r.Held) != 2 || len(r.Released) != 0 {
		t.Fatalf("reconcile result %+v, want 2 held and none released", r)
	}
	v := f.View(k1)
	// Earlier-term deletes are dropped whether or not their pod is live.
	if len(v.Deletes) != 0 || len(v.Reservations) != 3 {
		t.Fatalf("after reconcile: %+v", v)
	}
	if res, ok := v.Reservations[cur.Names[0]]; !ok || res.Held {
		t.Fatal("reconcile touched the current term's reservation")
	}
	for _, n := range r.Held {
		if res := v.Reservations[n]; !res.Held || res.Term != 2 || res.Expiry != 5+ttl {
			t.Fatalf("held reservation %+v", res)
		}
	}
	// Held names do not hold up a sync.
	if c, _ := v.Outstanding(5); c != 1 {
		t.Fatalf("outstanding %d, want 1 (held names do not count)", c)
	}
	// A current-term delete whose pod is gone or replaced is settled by the
	// next reconcile; one whose pod is live stays.
	mustApply(t, f, &ExpectDeletes{Meta: Meta{Term: 2}, Key: k1, Pods: []PodRef{{Name: "b", UID: "2"}, {Name: "c", UID: "3"}, {Name: "d", UID: "4"}}, TTL: ttl})
	mustApply(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 6}, Key: k1, Live: map[string]string{"b": "2", "c": "other-uid"}})
	if v := f.View(k1); len(v.Deletes) != 1 || v.Deletes["b"].UID != "2" {
		t.Fatalf("deletes after same-term reconcile: %+v", v.Deletes)
	}
}

// TestReconcileHoldsDeletes: with HoldDeletes, an earlier term's delete of
// a pod that still runs (same UID, not terminating) is kept for the new
// term and returned; every other pending delete is settled or kept as
// before.
func TestReconcileHoldsDeletes(t *testing.T) {
	tests := []struct {
		name     string
		delTerm  uint64
		uid      string
		live     map[string]string
		deleting []string
		hold     bool
		holdOwn  bool
		wantHeld bool // kept for term 2 and returned
		wantKept bool // still pending after the reconcile
	}{
		{name: "earlier term, pod runs", delTerm: 1, uid: "u", live: map[string]string{"p": "u"}, hold: true, wantHeld: true, wantKept: true},
		{name: "earlier term, pod runs, old entry without HoldDeletes", delTerm: 1, uid: "u", live: map[string]string{"p": "u"}},
		{name: "earlier term, pod terminating", delTerm: 1, uid: "u", live: map[string]string{"p": "u"}, deleting: []string{"p"}, hold: true},
		{name: "earlier term, pod replaced", delTerm: 1, uid: "u", live: map[string]string{"p": "other"}, hold: true},
		{name: "earlier term, pod gone", delTerm: 1, uid: "u", live: map[string]string{}, hold: true},
		{name: "earlier term, no UID recorded", delTerm: 1, uid: "", live: map[string]string{"p": "u"}, hold: true},
		{name: "this term, pod runs", delTerm: 2, uid: "u", live: map[string]string{"p": "u"}, hold: true, wantKept: true},
		{name: "this term, pod runs, HoldOwn", delTerm: 2, uid: "u", live: map[string]string{"p": "u"}, hold: true, holdOwn: true, wantHeld: true, wantKept: true},
		{name: "this term, pod terminating", delTerm: 2, uid: "u", live: map[string]string{"p": "u"}, deleting: []string{"p"}, hold: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			mustApply(t, f, &ExpectDeletes{Meta: Meta{Term: tc.delTerm, Now: 1}, Key: k1, Pods: []PodRef{{Name: "p", UID: tc.uid}}, TTL: ttl})
			r := mustApply(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 7}, Key: k1, TTL: ttl, Live: tc.live, Deleting: tc.deleting, HoldDeletes: tc.hold, HoldOwn: tc.holdOwn})
			if r.Code != CodeOK {
				t.Fatalf("reconcile refused: %+v", r)
			}
			if got := len(r.HeldDeletes) == 1 && r.HeldDeletes[0] == (PodRef{Name: "p", UID: tc.uid}); got != tc.wantHeld {
				t.Fatalf("held deletes %+v, want held %t", r.HeldDeletes, tc.wantHeld)
			}
			d, kept := f.View(k1).Deletes["p"]
			if kept != tc.wantKept {
				t.Fatalf("pending delete kept %t (%+v), want %t", kept, d, tc.wantKept)
			}
			if tc.wantHeld && (d.Term != 2 || d.Expiry != 7+ttl) {
				t.Fatalf("held delete %+v: want term 2, expiry renewed", d)
			}
		})
	}
}

// TestReconcileHoldOwn: with HoldOwn, the current term's reservations
// without a pod are held (not outstanding, reissued first); already held
// ones and those with a pod are handled as without it.
func TestReconcileHoldOwn(t *testing.T) {
	for _, holdOwn := range []bool{false, true} {
		f := New("s")
		got := mustApply(t, f, reserve("", 0, 2, 10, 0, 3))
		r := mustApply(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 1}, Key: k1, TTL: ttl, HoldOwn: holdOwn,
			Live: map[string]string{got.Names[0]: "u"}})
		wantHeld := 0
		if holdOwn {
			wantHeld = 2
		}
		if len(r.Held) != wantHeld {
			t.Fatalf("holdOwn=%t: result %+v, want %d held", holdOwn, r, wantHeld)
		}
		if diff := cmp.Diff([]string{got.Names[0]}, r.Completed); diff != "" {
			t.Fatalf("holdOwn=%t: completed (-want +got):\n%s", holdOwn, diff)
		}
		if c, _ := f.View(k1).Outstanding(1); c != 2-wantHeld {
			t.Fatalf("holdOwn=%t: %d outstanding, want %d", holdOwn, c, 2-wantHeld)
		}
	}
}

func TestHeldNamesReissuedFirst(t *testing.T) {
	f := New("s")
	old := mustApply(t, f, reserve("", 0, 1, 10, 0, 4))
	r := mustApply(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 1}, Key: k1, TTL: ttl, Live: map[string]string{old.Names[0]: "u"}})
	if len(r.Held) != 3 {
		t.Fatalf("held %v", r.Held)
	}
	// One active pod of target 10: 9 free slots, the 3 held names first.
	got := mustApply(t, f, reserve("", 2, 2, 10, 1, 5))
	if len(got.Names) != 5 {
		t.Fatalf("got %+v", got)
	}
	heldSet := map[string]bool{}
	for _, n := range r.Held {
		heldSet[n] = true
	}
	for i, n := range got.Names {
		if (i < 3) != heldSet[n] {
			t.Fatalf("name %d %s: held names must come first, got %v (held %v)", i, n, got.Names, r.Held)
		}
	}
	// A create that timed out is held, not released: the next reserve
	// hands out the same name and no new one.
	mustApply(t, f, &Settle{Meta: Meta{Term: 2}, Items: []Settlement{{Kind: SettleHold, Key: k1, Name: got.Names[4], Term: 2}}})
	again := mustApply(t, f, reserve("", 3, 2, 6, 1, 5))
	if diff := cmp.Diff([]string{got.Names[4]}, again.Names); diff != "" {
		t.Fatalf("after hold, names (-want only the held one +got):\n%s", diff)
	}
	// More held names than free slots: the rest stay held (reserved) and
	// refuse nothing.
	f2 := New("s")
	o2 := mustApply(t, f2, reserve("", 0, 1, 10, 0, 5))
	mustApply(t, f2, &Reconcile{Meta: Meta{Term: 2}, Key: k1, TTL: ttl})
	g2 := mustApply(t, f2, reserve("", 1, 2, 2, 0, 5))
	if len(g2.Names) != 2 || g2.Names[0] != sortedBySeq(f2, o2.Names)[0] {
		t.Fatalf("got %v", g2.Names)
	}
	if v := f2.View(k1); len(v.Reservations) != 5 {
		t.Fatalf("held names beyond the target were dropped: %d left", len(v.Reservations))
	}
}

func sortedBySeq(f *FSM, names []string) []string {
	v := f.View(k1)
	out := append([]string(nil), names...)
	sort.Slice(out, func(i, j int) bool { return v.Reservations[out[i]].Seq < v.Reservations[out[j]].Seq })
	return out
}

// applyAt applies c in a raft entry of term logTerm, as raft would.
func applyAt(t *testing.T, f *FSM, c Command, logTerm uint64) Result {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return *f.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: logTerm}).(*Result)
}

// TestTermFencing: only the leader of the entry's term changes
// expectations; facts (created, deleted, hold) apply in any term.
func TestTermFencing(t *testing.T) {
	f := New("s")
	r := applyAt(t, f, reserve("", 0, 3, 10, 0, 4), 3)
	if len(r.Names) != 4 {
		t.Fatalf("reserve in its own term: %+v", r)
	}
	// A deposed leader's reserve (term 3) committed by the term-4 leader,
	// and a follower's (term 0), are refused.
	for _, term := range []uint64{3, 0} {
		if got := applyAt(t, f, reserve("", 1, term, 10, 0, 1), 4); got.Code != CodeStale {
			t.Fatalf("reserve of term %d in a term-4 entry: %+v", term, got)
		}
		if got := applyAt(t, f, &ExpectDeletes{Meta: Meta{Term: term}, Key: k1, Pods: []PodRef{{Name: "x"}}, TTL: ttl}, 4); got.Code != CodeStale {
			t.Fatalf("expect deletes of term %d in a term-4 entry: %+v", term, got)
		}
		if term != 0 {
			if got := applyAt(t, f, &Reconcile{Meta: Meta{Term: term}, Key: k1}, 4); got.Code != CodeStale {
				t.Fatalf("reconcile of term %d in a term-4 entry: %+v", term, got)
			}
		}
	}
	// Releases and forgets of another term are ignored; facts apply.
	applyAt(t, f, &Settle{Meta: Meta{Now: 2}, Items: []Settlement{
		{Kind: SettleFailed, Key: k1, Name: r.Names[0], Term: 3},
		{Kind: SettleForgetKey, Key: k1, BeforeSeq: 100, Term: 0},
		{Kind: SettleForgetCluster, Key: Key{Cluster: "m1"}, BeforeSeq: 100, Term: 3},
		{Kind: SettleCreated, Key: k1, Name: r.Names[1]},
		{Kind: SettleHold, Key: k1, Name: r.Names[2]},
	}}, 4)
	v := f.View(k1)
	if _, ok := v.Reservations[r.Names[0]]; !ok || len(v.Reservations) != 3 || !v.Reservations[r.Names[2]].Held {
		t.Fatalf("after foreign-term settle: %+v", v.Reservations)
	}
	// The same release in its own term applies.
	applyAt(t, f, &Settle{Items: []Settlement{{Kind: SettleFailed, Key: k1, Name: r.Names[0], Term: 4}}}, 4)
	applyAt(t, f, &Settle{Items: []Settlement{{Kind: SettleForgetCluster, Key: Key{Cluster: "m1"}, BeforeSeq: 100, Term: 5}}}, 5)
	if len(f.Keys()) != 0 {
		t.Fatalf("own-term forget left %v", f.Keys())
	}
}

func TestPruneMembers(t *testing.T) {
	f := New("s")
	for _, m := range []string{"a", "b"} {
		mustApply(t, f, &SetHealth{Cluster: m, Healthy: true})
		r := reserve("", 0, 1, 10, 0, 1)
		r.Key.Cluster = m
		mustApply(t, f, r)
	}
	expired := reserve("", -2*ttl, 1, 10, 0, 1)
	expired.Key.Name = "old"
	mustApply(t, f, expired)
	if got := applyAt(t, f, &PruneMembers{Meta: Meta{Term: 1, Now: 1}, Members: []string{"a", "m1"}}, 2); got.Code != CodeStale {
		t.Fatalf("prune of an earlier term: %+v", got)
	}
	applyAt(t, f, &PruneMembers{Meta: Meta{Term: 2, Now: 1}, Members: []string{"a", "m1"}}, 2)
	if _, ok := f.Health("b"); ok {
		t.Fatal("health of an unregistered member kept")
	}
	if _, ok := f.Health("a"); !ok {
		t.Fatal("health of a registered member dropped")
	}
	keys := f.Keys()
	if len(keys) != 1 || keys[0].Cluster != "a" {
		t.Fatalf("keys after prune %v", keys)
	}
}

func TestDedupBoundedInBytes(t *testing.T) {
	f := New("s")
	f.dedupBytes = 4096
	for i := range 50 {
		mustApply(t, f, reserve(fmt.Sprintf("id-%d", i), 0, 1, 1000, 0, 10))
	}
	if f.st.dedupBytes > 4096 || len(f.st.Dedup) == 0 || len(f.st.Dedup) >= 50 {
		t.Fatalf("dedup holds %d entries, %d bytes", len(f.st.Dedup), f.st.dedupBytes)
	}
	// The newest is still answered from the cache.
	b, _ := Encode(reserve("id-49", 0, 1, 1000, 0, 10))
	seq := f.Seq()
	f.ApplyBytes(b)
	if f.Seq() != seq {
		t.Fatal("newest request ID forgotten")
	}
	// Restore recomputes the size.
	g := New("s")
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if g.st.dedupBytes != f.st.dedupBytes {
		t.Fatalf("restored dedup size %d, want %d", g.st.dedupBytes, f.st.dedupBytes)
	}
}

func TestSnapshotSizeLimit(t *testing.T) {
	var hdr [13]byte
	copy(hdr[:4], snapshotMagic[:])
	hdr[4] = snapshotVersion
	binary.BigEndian.PutUint64(hdr[5:], MaxSnapshotBytes+1)
	if err := New("s").Restore(io.NopCloser(bytes.NewReader(hdr[:]))); err == nil || !strings.Contains(err.Error(), "too large") {
		t.Fatalf("oversized snapshot: %v", err)
	}
}

func TestTargetsAndHealth(t *testing.T) {
	f := New("s")
	frs := FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
	mustApply(t, f, &SetTargets{FRS: frs, Generation: 3, Targets: map[string]int32{"a": 1}})
	if r := mustApply(t, f, &SetTargets{FRS: frs, Generation: 2, Targets: map[string]int32{"a": 5}}); r.Code != CodeStale {
		t.Fatalf("older generation accepted: %+v", r)
	}
	// A recreated FRS (new UID) replaces regardless of generation.
	frs2 := FRSRef{Namespace: "ns", Name: "web", UID: "u2"}
	mustApply(t, f, &SetTargets{FRS: frs2, Generation: 1, Targets: map[string]int32{"b": 2}})
	rec, ok := f.Targets(FRSRef{Namespace: "ns", Name: "web"})
	if !ok || rec.Generation != 1 || rec.Targets["b"] != 2 {
		t.Fatalf("targets %+v %v", rec, ok)
	}
	if _, ok := f.Targets(frs); ok {
		t.Fatal("lookup by old UID found the new record")
	}
	if r := mustApply(t, f, &DeleteTargets{FRS: frs}); r.Code != CodeNotFound {
		t.Fatalf("delete with old UID: %+v", r)
	}
	mustApply(t, f, &DeleteTargets{FRS: frs2})
	if _, ok := f.Targets(frs2); ok {
		t.Fatal("targets not deleted")
	}
	mustApply(t, f, &SetHealth{Cluster: "a", Healthy: false, Since: 42})
	if h, ok := f.Health("a"); !ok || h.Healthy || h.Since != 42 {
		t.Fatalf("health %+v", h)
	}
}

func TestDecodeRejects(t *testing.T) {
	good, _ := Encode(reserve("x", 0, 1, 1, 0, 1))
	tests := map[string][]byte{
		"empty":         nil,
		"one byte":      {1},
		"unknown type":  {99, 1, '{', '}'},
		"bad version":   {1, 9, '{', '}'},
		"bad json":      {1, 1, '{'},
		"invalid value": append([]byte{1, 1}, []byte(`{"key":{"c":"m","ns":"n","n":"x"},"count":-1,"ttl":1}`)...),
		"truncated":     good[:len(good)-3],
	}
	for name, b := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Decode(b); !errors.Is(err, ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
			f := New("s")
			if r := f.ApplyBytes(b); r.Code != CodeInvalid {
				t.Fatalf("apply got %+v", r)
			}
		})
	}
	if _, err := Decode(good); err != nil {
		t.Fatalf("good command: %v", err)
	}
}

func snapshotBytes(t *testing.T, f *FSM) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := s.(*snapshot).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestSnapshotRestore(t *testing.T) {
	f := New("s")
	mustApply(t, f, reserve("r1", 0, 1, 10, 0, 2))
	mustApply(t, f, &ExpectDeletes{Key: k1, Pods: []PodRef{{Name: "a", UID: "1"}}, TTL: ttl})
	mustApply(t, f, &SetTargets{FRS: FRSRef{Namespace: "ns", Name: "web"}, Generation: 1, Targets: map[string]int32{"m1": 10}})
	mustApply(t, f, &SetHealth{Cluster: "m1", Healthy: true, Since: 7})
	data := snapshotBytes(t, f)

	g := New("s")
	mustApply(t, g, &SetHealth{Cluster: "stale", Healthy: true})
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(data, snapshotBytes(t, g)); diff != "" {
		t.Fatalf("restored state differs (-snapshot +restored):\n%s", diff)
	}
	if _, ok := g.Health("stale"); ok {
		t.Fatal("restore kept prior state")
	}
	// Dedup survives the snapshot.
	if r := mustApply(t, g, reserve("r1", 0, 1, 10, 0, 2)); g.Seq() != f.Seq() || len(r.Names) != 2 {
		t.Fatalf("dedup lost on restore: seq %d vs %d", g.Seq(), f.Seq())
	}

	for _, cut := range []int{0, 5, 13, len(data) / 2, len(data) - 1} {
		h := New("s")
		if err := h.Restore(io.NopCloser(bytes.NewReader(data[:cut]))); err == nil {
			t.Fatalf("truncated snapshot (%d of %d bytes) restored", cut, len(data))
		}
	}
	corrupt := bytes.Clone(data)
	corrupt[20] ^= 0xff
	if err := New("s").Restore(io.NopCloser(bytes.NewReader(corrupt))); err == nil {
		t.Fatal("corrupt snapshot restored")
	}
}

func TestKeyViewApply(t *testing.T) {
	v := KeyView{
		Reservations: map[string]Reservation{"a": {Name: "a", Expiry: 10, Seq: 1}, "b": {Name: "b", Expiry: 10, Seq: 5}},
		Deletes:      map[string]PendingDelete{"d": {Name: "d", Expiry: 10, Seq: 2}},
	}
	v.Apply(k1, []Settlement{{Kind: SettleCreated, Key: k1, Name: "a"}, {Kind: SettleForgetKey, Key: k1, BeforeSeq: 3}})
	if c, d := v.Outstanding(0); c != 1 || d != 0 {
		t.Fatalf("outstanding %d/%d", c, d)
	}
}

func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		reserve("x", 1, 1, 3, 1, 2),
		&Settle{Items: []Settlement{{Kind: SettleCreated, Key: k1, Name: "p"}}},
		&ExpectDeletes{Key: k1, Pods: []PodRef{{Name: "p", UID: "u"}}, TTL: 1},
		&Reconcile{Meta: Meta{Term: 2}, Key: k1, Live: map[string]string{"p": "u"}},
		&SetTargets{FRS: FRSRef{Namespace: "a", Name: "b"}, Targets: map[string]int32{"m": 1}},
		&DeleteTargets{FRS: FRSRef{Namespace: "a", Name: "b"}},
		&SetHealth{Cluster: "m"},
	} {
		b, err := Encode(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add([]byte{1, 1, 'n', 'u', 'l', 'l'})
	f.Fuzz(func(t *testing.T, b []byte) {
		cmd, err := Decode(b)
		fsm := New("s")
		r := fsm.ApplyBytes(b)
		if err != nil {
			if r.Code != CodeInvalid {
				t.Fatalf("invalid command applied: %+v", r)
			}
			return
		}
		if _, err := Encode(cmd); err != nil {
			t.Fatalf("decoded command does not re-encode: %v", err)
		}
	})
}

// TestHeldNameSeenCountsOnce: a held name whose pod is seen stays (Seen) and
// is not handed out again; the next Reserve counts it against the target
// once, whether or not the caller's Active included it, and drops it.
func TestHeldNameSeenCountsOnce(t *testing.T) {
	tests := []struct {
		name       string
		active     int // what the next Reserve's caller counted
		wantNames  int
		wantRefuse bool
	}{
		// The caller listed before the held pods appeared: 3 active plus 2
		// seen leave 5 of 10 free.
		{name: "listed before the pods appeared", active: 3, wantNames: 5},
		// The caller counted them too: one sync grants 2 fewer.
		{name: "listed after", active: 5, wantNames: 3},
		{name: "no room left", active: 8, wantRefuse: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := New("s")
			r := mustApply(t, f, reserve("", 0, 1, 10, 0, 5))
			var items []Settlement
			for _, n := range r.Names[:3] {
				items = append(items, Settlement{Kind: SettleCreated, Key: k1, Name: n})
			}
			for _, n := range r.Names[3:] {
				items = append(items, Settlement{Kind: SettleHold, Key: k1, Name: n}, Settlement{Kind: SettleCreated, Key: k1, Name: n})
			}
			mustApply(t, f, &Settle{Meta: Meta{Now: 1}, Items: items})
			v := f.View(k1)
			if len(v.Reservations) != 2 || !v.Reservations[r.Names[3]].Seen {
				t.Fatalf("seen held names not kept: %+v", v.Reservations)
			}
			if c, _ := v.Outstanding(2); c != 0 {
				t.Fatalf("seen held names hold up the key: %d outstanding", c)
			}
			got := mustApply(t, f, reserve("", 2, 1, 10, tt.active, 10))
			if tt.wantRefuse != (got.Code == CodeRefused) {
				t.Fatalf("got %+v, refused want %v", got, tt.wantRefuse)
			}
			if len(got.Names) != tt.wantNames {
				t.Fatalf("got %d names %v, want %d", len(got.Names), got.Names, tt.wantNames)
			}
			for _, n := range got.Names {
				if n == r.Names[3] || n == r.Names[4] {
					t.Fatalf("seen name %s handed out again", n)
				}
			}
			if v := f.View(k1); len(v.Reservations) != tt.wantNames {
				t.Fatalf("seen names not dropped after being counted: %+v", v.Reservations)
			}
		})
	}
}

// TestFailedReissueStaysHeld: a held name handed out again whose create
// then fails (or is never sent, a slow-start skip after a lapsed lease) is
// held again, not released, when both the Reserve that reissued it and the
// command carrying the SettleFailed are marked HoldReissued: the deposed
// leader's paused create of it may still land, and the next Reserve must
// hand out the same name, never a fresh one next to it. Without either mark
// the name is released, exactly as by a version that does not know the
// rule, so replicas of both versions end in the same state. A fresh name's
// failed create is released in every case.
func TestFailedReissueStaysHeld(t *testing.T) {
	tests := []struct {
		name          string
		markReserve   bool // the reissuing Reserve
		markSettle    bool // the command carrying the SettleFailed items
		inNextReserve bool // the items ride in the next Reserve's Settle
		wantHeld      bool // the reissued names are held again
	}{
		{name: "unmarked, as before the rule"},
		{name: "both marked", markReserve: true, markSettle: true, wantHeld: true},
		{name: "marked reserve, unmarked settle", markReserve: true},
		{name: "unmarked reserve, marked settle", markSettle: true},
		{name: "both marked, settled by the next reserve", markReserve: true, markSettle: true, inNextReserve: true, wantHeld: true},
		{name: "unmarked, settled by the next reserve", inNextReserve: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			old := applyAt(t, f, reserve("", 0, 1, 10, 0, 2), 1)
			// The term-2 leader finds neither pod and holds both names.
			if r := applyAt(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 1}, Key: k1, TTL: ttl}, 2); len(r.Held) != 2 {
				t.Fatalf("reconcile held %v, want both names", r.Held)
			}
			re := reserve("", 2, 2, 10, 0, 3)
			re.HoldReissued = tc.markReserve
			got := applyAt(t, f, re, 2)
			if len(got.Names) != 3 || !slicesEqualSet(got.Names[:2], old.Names) {
				t.Fatalf("reserve gave %v, want the held %v first", got.Names, old.Names)
			}
			for _, n := range old.Names {
				if r := f.View(k1).Reservations[n]; r.Reissued != tc.markReserve {
					t.Fatalf("reissued name %s: Reissued %v, want %v (the Reserve's mark)", n, r.Reissued, tc.markReserve)
				}
			}
			// Every create of the sync fails before it is sent.
			var items []Settlement
			for _, n := range got.Names {
				items = append(items, Settlement{Kind: SettleFailed, Key: k1, Name: n, Term: 2})
			}
			var next Result
			if tc.inNextReserve {
				nr := reserve("", 3, 2, 10, 0, 2)
				nr.HoldReissued, nr.Settle = tc.markSettle, items
				next = applyAt(t, f, nr, 2)
			} else {
				applyAt(t, f, &Settle{Meta: Meta{Now: 3, HoldReissued: tc.markSettle}, Items: items}, 2)
			}
			want := map[string]Reservation{}
			if tc.wantHeld {
				for i, n := range old.Names {
					want[n] = Reservation{Name: n, Expiry: 2 + ttl, Term: 2, Seq: uint64(i + 1), Held: true, Reissued: true}
				}
			}
			if !tc.inNextReserve {
				if diff := cmp.Diff(want, f.View(k1).Reservations); diff != "" {
					t.Fatalf("reservations after the failed creates (-want +got):\n%s", diff)
				}
				if c, _ := f.View(k1).Outstanding(3); c != 0 {
					t.Fatalf("%d outstanding, want 0: held names do not hold up the next sync", c)
				}
				next = applyAt(t, f, reserve("", 4, 2, 10, 0, 2), 2)
			}
			// The next sync gets the held names again, or fresh ones once
			// they were released.
			if reused := slicesEqualSet(next.Names, old.Names); reused != tc.wantHeld {
				t.Fatalf("next reserve gave %v (the old names %v): reused %v, want %v", next.Names, old.Names, reused, tc.wantHeld)
			}
		})
	}
}

// TestLocalViewHoldsFailedReissue: the store's local view holds a failed
// reissue (it cannot know the mark of the command that will carry the
// settlement), and releases a fresh name; either way neither is
// outstanding, as in the FSM whichever the mark.
func TestLocalViewHoldsFailedReissue(t *testing.T) {
	f := New("s")
	old := applyAt(t, f, reserve("", 0, 1, 10, 0, 1), 1)
	applyAt(t, f, &Reconcile{Meta: Meta{Term: 2, Now: 1}, Key: k1, TTL: ttl}, 2)
	re := reserve("", 2, 2, 10, 0, 2)
	re.HoldReissued = true
	got := applyAt(t, f, re, 2)
	view := f.View(k1)
	view.Apply(k1, []Settlement{
		{Kind: SettleFailed, Key: k1, Name: got.Names[0], Term: 2},
		{Kind: SettleFailed, Key: k1, Name: got.Names[1], Term: 2},
	})
	want := map[string]Reservation{old.Names[0]: {Name: old.Names[0], Expiry: 2 + ttl, Term: 2, Seq: 1, Held: true, Reissued: true}}
	if diff := cmp.Diff(want, view.Reservations); diff != "" {
		t.Fatalf("local view (-want +got):\n%s", diff)
	}
	if c, _ := view.Outstanding(3); c != 0 {
		t.Fatalf("%d outstanding, want 0", c)
	}
}

// TestHoldReissuedEncoding: the mark survives encoding; a command without
// it encodes as before the field existed (an older replica decodes the same
// bytes), and bytes without it decode unmarked.
func TestHoldReissuedEncoding(t *testing.T) {
	for _, mark := range []bool{false, true} {
		c := reserve("id", 1, 2, 3, 0, 1)
		c.HoldReissued = mark
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte("holdReissued")); got != mark {
			t.Fatalf("mark %v: encoding %s carries the field: %v", mark, b, got)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Command(c), d); diff != "" {
			t.Fatalf("mark %v: decoded (-want +got):\n%s", mark, diff)
		}
	}
}

func slicesEqualSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	in := map[string]bool{}
	for _, s := range a {
		in[s] = true
	}
	for _, s := range b {
		if !in[s] {
			return false
		}
	}
	return true
}
