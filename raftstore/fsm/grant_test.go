package fsm

import (
	"bytes"
	"io"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

var webFRS = FRSRef{Namespace: "ns", Name: "web", UID: "u1"}

// setTargets is a SetTargets of webFRS proposed in term, marked Grant
// grant (0: unmarked).
func setTargets(id string, now int64, term uint64, gen int64, grant int32, targets map[string]int32) *SetTargets {
	c := &SetTargets{Meta: Meta{ReqID: id, Now: now, Term: term}, FRS: webFRS, Generation: gen, Targets: targets, Grant: grant}
	if grant > 0 {
		c.GrantTTL = ttl
	}
	return c
}

// granted lists k's granted names in f, oldest first.
func granted(f *FSM, k Key) []string {
	var rs []Reservation
	for _, r := range f.View(k).Reservations {
		if r.Granted && !r.Held {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b Reservation) int { return int(a.Seq - b.Seq) })
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

// TestGrantOnTargets: a marked SetTargets, in its own term, grants the
// first names of members raised from zero whose keys hold nothing, as a
// Reserve of the same term would name them; nothing else grants.
func TestGrantOnTargets(t *testing.T) {
	k2 := Key{Cluster: "m2", Namespace: "ns", Name: "web"}
	tests := []struct {
		name     string
		prepare  func(f *FSM)
		cmd      *SetTargets
		logTerm  uint64
		want     map[Key]int // granted names per key
		wantCode string
	}{
		{name: "new FRS: every member, capped by Grant", cmd: setTargets("a", 1, 2, 1, 3, map[string]int32{"m1": 2, "m2": 5}), logTerm: 2,
			want: map[Key]int{k1: 2, k2: 3}},
		{name: "unmarked: as before", cmd: setTargets("a", 1, 2, 1, 0, map[string]int32{"m1": 2}), logTerm: 2, want: map[Key]int{}},
		{name: "zero target grants nothing", cmd: setTargets("a", 1, 2, 1, 5, map[string]int32{"m1": 0}), logTerm: 2, want: map[Key]int{}},
		{name: "another term's command grants nothing", cmd: setTargets("a", 1, 2, 1, 5, map[string]int32{"m1": 2}), logTerm: 3, want: map[Key]int{}},
		{name: "a follower's (term 0) grants nothing", cmd: setTargets("a", 1, 0, 1, 5, map[string]int32{"m1": 2}), logTerm: 3, want: map[Key]int{}},
		{name: "a raised member only", prepare: func(f *FSM) {
			applyAt(t, f, setTargets("p", 0, 2, 1, 0, map[string]int32{"m1": 2, "m2": 0}), 2)
		}, cmd: setTargets("a", 1, 2, 2, 5, map[string]int32{"m1": 4, "m2": 3}), logTerm: 2, want: map[Key]int{k2: 3}},
		{name: "something in flight: a Reserve decides", prepare: func(f *FSM) {
			applyAt(t, f, reserve("r", 0, 2, 1, 0, 1), 2)
		}, cmd: setTargets("a", 1, 2, 1, 5, map[string]int32{"m1": 3}), logTerm: 2, want: map[Key]int{}},
		{name: "expired leftovers do not stop it", prepare: func(f *FSM) {
			applyAt(t, f, reserve("r", 0, 2, 1, 0, 1), 2)
		}, cmd: setTargets("a", ttl+1, 2, 1, 5, map[string]int32{"m1": 3}), logTerm: 2, want: map[Key]int{k1: 3}},
		{name: "rolling object: no grant", prepare: func(f *FSM) {
			applyAt(t, f, &SetRollout{Meta: Meta{Term: 2}, FRS: webFRS, Record: []byte(`{}`)}, 2)
		}, cmd: setTargets("a", 1, 2, 1, 5, map[string]int32{"m1": 3}), logTerm: 2, want: map[Key]int{}},
		{name: "an owned member: no grant (sharding keeps its fenced protocol)", prepare: func(f *FSM) {
			applyAt(t, f, assign(2, own("m1", "a")), 2)
		}, cmd: setTargets("a", 1, 2, 1, 5, map[string]int32{"m1": 3, "m2": 2}), logTerm: 2, want: map[Key]int{k2: 2}},
		{name: "stale generation: no grant", prepare: func(f *FSM) {
			applyAt(t, f, setTargets("p", 0, 2, 5, 0, map[string]int32{"m1": 0}), 2)
		}, cmd: setTargets("a", 1, 2, 4, 5, map[string]int32{"m1": 3}), logTerm: 2, want: map[Key]int{}, wantCode: CodeStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			if tc.prepare != nil {
				tc.prepare(f)
			}
			if r := applyAt(t, f, tc.cmd, tc.logTerm); r.Code != tc.wantCode {
				t.Fatalf("apply: %+v, want code %q", r, tc.wantCode)
			}
			got := map[Key]int{}
			for _, k := range f.Keys() {
				if n := len(granted(f, k)); n > 0 {
					got[k] = n
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("granted names per key (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGrantedNamesAreReservedNames: granted names are what a Reserve of
// the same term would have named; they do not hold up the key; a repeated
// or re-planned SetTargets grants nothing more; a Reserve (another term's
// leader) hands them out first, marked reissued, and no fresh name beside
// them; their settlements apply as to reserved names.
func TestGrantedNamesAreReservedNames(t *testing.T) {
	f, g := New("s"), New("s")
	applyAt(t, f, setTargets("a", 1, 2, 1, 10, map[string]int32{"m1": 3}), 2)
	applyAt(t, g, setTargets("a", 1, 2, 1, 0, map[string]int32{"m1": 3}), 2)
	want := applyAt(t, g, reserve("r", 1, 2, 3, 0, 3), 2).Names
	names := granted(f, k1)
	if diff := cmp.Diff(want, names); diff != "" {
		t.Fatalf("granted names differ from a Reserve's (-reserve +granted):\n%s", diff)
	}
	if c, _ := f.View(k1).Outstanding(2); c != 0 {
		t.Fatalf("granted names hold up the key: %d outstanding", c)
	}
	for _, r := range f.View(k1).Reservations {
		if r.Term != 2 || r.Expiry != 1+ttl {
			t.Fatalf("granted reservation %+v: want term 2, expiry %d", r, 1+ttl)
		}
	}
	// Idempotent: the same command again (its request ID), and a re-plan
	// with the member already raised, grant nothing more.
	applyAt(t, f, setTargets("a", 1, 2, 1, 10, map[string]int32{"m1": 3}), 2)
	applyAt(t, f, setTargets("b", 2, 2, 2, 10, map[string]int32{"m1": 5}), 2)
	if seq := f.Seq(); seq != 3 || len(f.View(k1).Reservations) != 3 {
		t.Fatalf("repeated SetTargets granted more: seq %d, %d reservations", seq, len(f.View(k1).Reservations))
	}
	// A pod seen settles its name; the next term's Reserve reissues the
	// other two (marked) before any fresh name.
	applyAt(t, f, &Settle{Meta: Meta{Now: 3}, Items: []Settlement{{Kind: SettleCreated, Key: k1, Name: names[0]}}}, 3)
	r := applyAt(t, f, &Reserve{Meta: Meta{Now: 4, Term: 3, HoldReissued: true}, Key: k1, Target: 5, Active: 1, Count: 2, Prefix: "web-", TTL: ttl}, 3)
	if diff := cmp.Diff(names[1:], r.Names); diff != "" {
		t.Fatalf("next term's Reserve (-granted +got):\n%s", diff)
	}
	for _, n := range r.Names {
		if res := f.View(k1).Reservations[n]; res.Granted || res.Held || !res.Reissued || res.Term != 3 {
			t.Fatalf("reissued granted name %+v: want reserved for term 3, reissued", res)
		}
	}
	if c, _ := f.View(k1).Outstanding(5); c != 2 {
		t.Fatalf("reissued names: %d outstanding, want 2", c)
	}
}

// TestGrantedNamesReconciled: a takeover reconcile completes a granted
// name whose pod exists and holds one whose pod is missing; SettleHold
// holds one; SettleFailed of its own term releases one.
func TestGrantedNamesReconciled(t *testing.T) {
	f := New("s")
	applyAt(t, f, setTargets("a", 1, 2, 1, 10, map[string]int32{"m1": 4}), 2)
	names := granted(f, k1)
	applyAt(t, f, &Settle{Meta: Meta{Now: 2}, Items: []Settlement{
		{Kind: SettleHold, Key: k1, Name: names[2]},
		{Kind: SettleFailed, Key: k1, Name: names[3], Term: 2},
	}}, 2)
	r := applyAt(t, f, &Reconcile{Meta: Meta{Now: 3, Term: 3}, Key: k1, Live: map[string]string{names[0]: "u"}, HoldOwn: true}, 3)
	if diff := cmp.Diff([]string{names[0]}, r.Completed); diff != "" {
		t.Fatalf("completed (-want +got):\n%s", diff)
	}
	v := f.View(k1)
	if len(v.Reservations) != 2 || !v.Reservations[names[1]].Held || !v.Reservations[names[2]].Held {
		t.Fatalf("after the reconcile: %+v, want %s and %s held", v.Reservations, names[1], names[2])
	}
}

// TestGrantInBatchAndSnapshot: a batch entry grants as separate entries
// of its term do, and granted names survive a snapshot.
func TestGrantInBatchAndSnapshot(t *testing.T) {
	cmds := []Command{
		setTargets("a", 1, 4, 1, 10, map[string]int32{"m1": 2}),
		&Reserve{Meta: Meta{ReqID: "r", Now: 1, Term: 4}, Key: Key{Cluster: "m1", Namespace: "ns", Name: "db"}, Target: 1, Count: 1, Prefix: "db-", TTL: ttl},
	}
	one, sep := New("s"), New("s")
	var enc [][]byte
	for _, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, b)
		sep.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: 4})
	}
	batch, err := EncodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	one.Apply(&raft.Log{Type: raft.LogCommand, Data: batch, Term: 4})
	if diff := cmp.Diff(snapshotBytes(t, sep), snapshotBytes(t, one)); diff != "" {
		t.Fatalf("batch differs from separate entries (-separate +batch):\n%s", diff)
	}
	if len(granted(one, k1)) != 2 {
		t.Fatalf("batch granted %v", granted(one, k1))
	}
	g := New("s")
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, one)))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(granted(one, k1), granted(g, k1)); diff != "" {
		t.Fatalf("granted names after restore (-before +after):\n%s", diff)
	}
}

// TestGrantEncoding: the mark and its TTL travel only when set, and a
// mark without a TTL is refused.
func TestGrantEncoding(t *testing.T) {
	for _, grant := range []int32{0, 7} {
		c := setTargets("id", 1, 2, 1, grant, map[string]int32{"m1": 1})
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(b, []byte(`"grant"`)); got != (grant > 0) {
			t.Fatalf("grant %d: encoding %s carries the field: %v", grant, b, got)
		}
		d, err := Decode(b)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(Command(c), d); diff != "" {
			t.Fatalf("grant %d: decoded (-want +got):\n%s", grant, diff)
		}
	}
	bad := setTargets("id", 1, 2, 1, 3, map[string]int32{"m1": 1})
	bad.GrantTTL = 0
	if _, err := Encode(bad); err == nil {
		t.Fatal("a grant without a TTL was encoded")
	}
}

func TestNamedWith(t *testing.T) {
	n := PodName("s", k1, "web-", 1)
	for _, tc := range []struct {
		prefix string
		want   bool
	}{{"web-", true}, {"we", false}, {"db-", false}, {"web-x", false}} {
		if got := NamedWith(n, tc.prefix); got != tc.want {
			t.Errorf("NamedWith(%q, %q) = %v, want %v", n, tc.prefix, got, tc.want)
		}
	}
}
