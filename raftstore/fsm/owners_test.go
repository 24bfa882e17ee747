package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

func assign(term uint64, set ...OwnerAssignment) *AssignOwners {
	return &AssignOwners{Meta: Meta{Term: term, Now: 1}, Set: set}
}

func own(member, owner string) OwnerAssignment { return OwnerAssignment{Member: member, Owner: owner} }

// applyEntry applies c as the raft entry (term, index).
func applyEntryAt(t *testing.T, f *FSM, c Command, term, index uint64) Result {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return *f.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: term, Index: index}).(*Result)
}

// TestAssignOwners: a member whose owner changes gets the next epoch of one
// counter, so epochs never go down or repeat, also across removal and
// re-adding; assigning the current owner changes nothing; the command is
// refused unless proposed in the entry's term.
func TestAssignOwners(t *testing.T) {
	f := New("s")
	steps := []struct {
		name     string
		cmd      *AssignOwners
		term     uint64
		wantCode string
		want     map[string]Ownership
	}{
		{"initial", assign(2, own("m1", "a"), own("m2", "b")), 2, CodeOK,
			map[string]Ownership{"m1": {"a", 1, false, 1, ""}, "m2": {"b", 2, false, 1, ""}}},
		{"same owner keeps its epoch", assign(2, own("m1", "a")), 2, CodeOK,
			map[string]Ownership{"m1": {"a", 1, false, 1, ""}, "m2": {"b", 2, false, 1, ""}}},
		{"a move takes the next epoch", assign(2, OwnerAssignment{Member: "m1", Owner: "b", Handover: true}), 2, CodeOK,
			map[string]Ownership{"m1": {"b", 3, true, 1, "a"}, "m2": {"b", 2, false, 1, ""}}},
		{"a deposed leader's assignment is stale", assign(1, own("m1", "c")), 2, CodeStale,
			map[string]Ownership{"m1": {"b", 3, true, 1, "a"}, "m2": {"b", 2, false, 1, ""}}},
		{"a follower's (term 0) is stale", assign(0, own("m1", "c")), 2, CodeInvalid,
			map[string]Ownership{"m1": {"b", 3, true, 1, "a"}, "m2": {"b", 2, false, 1, ""}}},
		{"drop", &AssignOwners{Meta: Meta{Term: 3, Now: 1}, Drop: []string{"m1"}}, 3, CodeOK,
			map[string]Ownership{"m2": {"b", 2, false, 1, ""}}},
		{"re-added to its old owner: a higher epoch than ever", assign(3, own("m1", "b")), 3, CodeOK,
			map[string]Ownership{"m1": {"b", 4, false, 1, ""}, "m2": {"b", 2, false, 1, ""}}},
	}
	for _, s := range steps {
		var r Result
		if s.cmd.Term == 0 {
			// Encode refuses it; what the FSM would do with such bytes.
			if _, err := Encode(s.cmd); err == nil {
				t.Fatalf("%s: an assignment without a term was encoded", s.name)
			}
			r.Code = CodeInvalid
		} else {
			r = applyAt(t, f, s.cmd, s.term)
		}
		if r.Code != s.wantCode {
			t.Fatalf("%s: code %q (%s), want %q", s.name, r.Code, r.Msg, s.wantCode)
		}
		if diff := cmp.Diff(s.want, f.Owners()); diff != "" {
			t.Fatalf("%s: owners (-want +got):\n%s", s.name, diff)
		}
	}
}

// TestRenewOwnership: a renewal records where it committed, and names the
// pairs its owner does not hold.
func TestRenewOwnership(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a"), own("m2", "b")), 2)
	r := applyEntryAt(t, f, &RenewOwnership{Meta: Meta{Now: 5}, Owner: "a",
		Held: []MemberEpoch{{"m1", 1}, {"m2", 2}, {"m3", 7}}}, 2, 40)
	if diff := cmp.Diff([]MemberEpoch{{"m2", 2}, {"m3", 7}}, r.NotOwned); diff != "" {
		t.Errorf("not owned (-want +got):\n%s", diff)
	}
	applyEntryAt(t, f, &RenewOwnership{Meta: Meta{Now: 6}, Owner: "b"}, 3, 41)
	want := map[string]Renewal{"a": {Index: 40, Term: 2, Now: 5}, "b": {Index: 41, Term: 3, Now: 6}}
	if diff := cmp.Diff(want, f.Renewals()); diff != "" {
		t.Errorf("renewals (-want +got):\n%s", diff)
	}
	applyAt(t, f, &AssignOwners{Meta: Meta{Term: 3}, ForgetOwners: []string{"b"}}, 3)
	if _, ok := f.Renewals()["b"]; ok {
		t.Error("the renewal of a forgotten owner is kept")
	}
}

// TestOwnerFence: a command with an owner fence applies only while the
// fence is the member's committed owner and epoch, whatever the term; one
// without a fence is refused for a member that has an owner
// (TestUnfencedWriteToOwnedMember).
func TestOwnerFence(t *testing.T) {
	fa := &OwnerFence{Owner: "a", Epoch: 1}
	tests := []struct {
		name     string
		fence    *OwnerFence
		cmdTerm  uint64
		wantCode string
	}{
		{"owner at its epoch, no term", fa, 0, CodeOK},
		{"owner at its epoch, an old term", fa, 1, CodeOK},
		{"old epoch", &OwnerFence{Owner: "a", Epoch: 9}, 5, CodeStale},
		{"another replica", &OwnerFence{Owner: "b", Epoch: 1}, 5, CodeStale},
		{"no fence, the entry's term: the member has an owner", nil, 5, CodeStale},
		{"no fence, another term", nil, 4, CodeStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, cmd := range []Command{
				&Reserve{Meta: Meta{Term: tc.cmdTerm, Now: 1}, Key: k1, Target: 5, Count: 1, Prefix: "web-", TTL: ttl, Fence: tc.fence},
				&ExpectDeletes{Meta: Meta{Term: tc.cmdTerm, Now: 1}, Key: k1, Pods: []PodRef{{"p", "u"}}, TTL: ttl, Fence: tc.fence},
			} {
				f := New("s")
				applyAt(t, f, assign(5, own("m1", "a")), 5)
				if r := applyAt(t, f, cmd, 5); r.Code != tc.wantCode {
					t.Errorf("%T: code %q (%s), want %q", cmd, r.Code, r.Msg, tc.wantCode)
				}
			}
			// A release (SettleFailed) is fenced the same way.
			f := New("s")
			applyAt(t, f, assign(5, own("m1", "a")), 5)
			name := applyAt(t, f, &Reserve{Meta: Meta{Term: 5, Now: 1}, Key: k1, Target: 5, Count: 1, Prefix: "web-", TTL: ttl, Fence: fa}, 5).Names[0]
			applyAt(t, f, &Settle{Meta: Meta{Now: 2}, Items: []Settlement{{Kind: SettleFailed, Key: k1, Name: name, Term: tc.cmdTerm, Fence: tc.fence}}}, 5)
			_, kept := f.View(k1).Reservations[name]
			if released := !kept; released != (tc.wantCode == CodeOK) {
				t.Errorf("settle failed: released %v, want %v", released, tc.wantCode == CodeOK)
			}
		})
	}
}

// TestHandoverKeepsReservedNames: the names an owner reserved under epoch E
// and did not settle are held when the member moves; the old owner can
// neither reserve nor release any more; the new owner gets exactly those
// names before any fresh one, and a failed create of one of them holds it
// again: no name of epoch E ever goes to a different pod, and no fresh name
// is granted beside one whose create may still land.
func TestHandoverKeepsReservedNames(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a")), 2)
	fa := &OwnerFence{Owner: "a", Epoch: 1}
	res := func(fence *OwnerFence, count int, settle ...Settlement) Result {
		return applyAt(t, f, &Reserve{Meta: Meta{Now: 1}, Key: k1, Target: 3, Count: count, Prefix: "web-", TTL: ttl, Fence: fence, Settle: settle}, 2)
	}
	old := res(fa, 3)
	if len(old.Names) != 3 {
		t.Fatalf("owner a reserved %v, want 3 names", old.Names)
	}
	applyAt(t, f, assign(2, OwnerAssignment{Member: "m1", Owner: "b", From: "a"}), 2)
	fb := &OwnerFence{Owner: "b", Epoch: 2}
	if o, _ := f.Owner("m1"); o != (Ownership{Owner: "b", Epoch: 2, Since: 1}) {
		t.Fatalf("owner %v, want b@2", o)
	}
	if r := res(fa, 1); r.Code != CodeStale {
		t.Fatalf("the old owner's reserve: code %q, want stale", r.Code)
	}
	failed := func(fence *OwnerFence, names ...string) []Settlement {
		var out []Settlement
		for _, n := range names {
			out = append(out, Settlement{Kind: SettleFailed, Key: k1, Name: n, Fence: fence})
		}
		return out
	}
	applyAt(t, f, &Settle{Items: failed(fa, old.Names...)}, 2)
	for _, n := range old.Names {
		if r, ok := f.View(k1).Reservations[n]; !ok || !r.Held {
			t.Fatalf("name %s after the old owner's release: %+v (kept %v), want held", n, r, ok)
		}
	}
	got := res(fb, 3)
	if !slicesEqualSet(got.Names, old.Names) {
		t.Fatalf("the new owner got %v, want exactly the old owner's %v", got.Names, old.Names)
	}
	// Its create of the first fails: the name is held again, not released,
	// and the next reserve hands it out again rather than a fresh name.
	next := res(fb, 1, failed(fb, got.Names[0])...)
	if len(next.Names) != 1 || next.Names[0] != got.Names[0] {
		t.Fatalf("after a failed reissue the new owner got %v, want %s again", next.Names, got.Names[0])
	}
	if f.Seq() != 3 {
		t.Fatalf("seq %d: a fresh name was granted", f.Seq())
	}
}

// TestOwnershipSnapshot: owners, the epoch counter and renewals survive a
// snapshot, so a restored replica fences alike and never reuses an epoch.
func TestOwnershipSnapshot(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a"), own("m2", "b")), 2)
	applyAt(t, f, &AssignOwners{Meta: Meta{Term: 2}, Drop: []string{"m2"}}, 2)
	applyEntryAt(t, f, &RenewOwnership{Meta: Meta{Now: 3}, Owner: "a", Held: []MemberEpoch{{"m1", 1}}}, 2, 9)
	data := snapshotBytes(t, f)
	g := New("s")
	if err := g.Restore(io.NopCloser(bytes.NewReader(data))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.Owners(), g.Owners()); diff != "" {
		t.Fatalf("owners (-saved +restored):\n%s", diff)
	}
	if diff := cmp.Diff(f.Renewals(), g.Renewals()); diff != "" {
		t.Fatalf("renewals (-saved +restored):\n%s", diff)
	}
	applyAt(t, g, assign(2, own("m2", "b")), 2)
	if o, _ := g.Owner("m2"); o.Epoch != 3 {
		t.Fatalf("re-added member after restore has epoch %d, want 3 (the counter was restored)", o.Epoch)
	}
	if !bytes.Equal(snapshotBytes(t, New("s")), snapshotBytes(t, New("s"))) {
		t.Fatal("empty snapshots differ")
	}
}

// TestOwnershipInBatch: the sharding commands and fenced writes apply in a
// batch entry exactly as in separate entries of the same term and index.
func TestOwnershipInBatch(t *testing.T) {
	fa := &OwnerFence{Owner: "a", Epoch: 1}
	cmds := []Command{
		assign(3, own("m1", "a")),
		&RenewOwnership{Meta: Meta{ReqID: "r", Now: 1}, Owner: "a", Held: []MemberEpoch{{"m1", 1}, {"m2", 1}}},
		&Reserve{Meta: Meta{Now: 1}, Key: k1, Target: 3, Count: 2, Prefix: "web-", TTL: ttl, Fence: fa},
		&Reserve{Meta: Meta{Now: 1}, Key: k1, Target: 3, Count: 1, Prefix: "web-", TTL: ttl, Fence: &OwnerFence{Owner: "b", Epoch: 1}},
		assign(2, own("m1", "b")), // stale term
	}
	var enc [][]byte
	separate := New("s")
	var want []Result
	for _, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		enc = append(enc, b)
		want = append(want, *separate.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: 3, Index: 7}).(*Result))
	}
	if want[3].Code != CodeStale || want[4].Code != CodeStale || len(want[2].Names) != 2 {
		t.Fatalf("separate entries gave unexpected results: %+v", want)
	}
	batched := New("s")
	b, err := EncodeBatch(enc)
	if err != nil {
		t.Fatal(err)
	}
	got := batched.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: 3, Index: 7}).(*BatchResult)
	if diff := cmp.Diff(want, got.Results); diff != "" {
		t.Fatalf("batch results (-separate +batched):\n%s", diff)
	}
	if !bytes.Equal(snapshotBytes(t, batched), snapshotBytes(t, separate)) {
		t.Fatal("state after the batch differs from the state after separate entries")
	}
}

// TestUsesOwnership pins which commands need every replica to know
// ownership, and the term fence of AssignOwners.
func TestUsesOwnership(t *testing.T) {
	fa := &OwnerFence{Owner: "a", Epoch: 1}
	tests := []struct {
		cmd  Command
		want bool
	}{
		{&AssignOwners{}, true}, {&RenewOwnership{}, true},
		{&Reserve{}, false}, {&Reserve{Fence: fa}, true}, {&Reserve{Settle: []Settlement{{Fence: fa}}}, true},
		{&ExpectDeletes{}, false}, {&ExpectDeletes{Fence: fa}, true},
		{&Settle{Items: []Settlement{{}}}, false}, {&Settle{Items: []Settlement{{}, {Fence: fa}}}, true},
		{&SetTargets{}, false}, {&Reconcile{}, false}, {&Reconcile{Fence: fa}, true},
	}
	for _, tc := range tests {
		if got := UsesOwnership(tc.cmd); got != tc.want {
			t.Errorf("UsesOwnership(%T %+v) = %v, want %v", tc.cmd, tc.cmd, got, tc.want)
		}
	}
	if !fencedType(&AssignOwners{}) || fencedType(&RenewOwnership{}) {
		t.Error("AssignOwners must be term-fenced, RenewOwnership not")
	}
}

// TestFencedReconcile: the new owner's takeover reconcile holds what the
// earlier owner reserved or chose to delete and has not happened, compares
// epochs instead of terms, and is refused with an old fence.
func TestFencedReconcile(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a")), 2)
	fa, fb := &OwnerFence{Owner: "a", Epoch: 1}, &OwnerFence{Owner: "b", Epoch: 2}
	old := applyAt(t, f, &Reserve{Meta: Meta{Now: 1}, Key: k1, Target: 5, Count: 3, Prefix: "web-", TTL: ttl, Fence: fa}, 2)
	applyAt(t, f, &ExpectDeletes{Meta: Meta{Now: 1}, Key: k1, Pods: []PodRef{{"run", "u1"}, {"gone", "u2"}}, TTL: ttl, Fence: fa}, 2)
	applyAt(t, f, assign(2, own("m1", "b")), 2)
	// b reissues the oldest held name; the old owner's late create of the
	// second landed; the third is still unknown.
	mine := applyAt(t, f, &Reserve{Meta: Meta{Now: 1}, Key: k1, Target: 5, Count: 1, Prefix: "web-", TTL: ttl, Fence: fb}, 2)
	if len(mine.Names) != 1 || mine.Names[0] != old.Names[0] {
		t.Fatalf("b got %v, want %s", mine.Names, old.Names[0])
	}
	rec := func(fence *OwnerFence) Result {
		return applyAt(t, f, &Reconcile{Meta: Meta{Now: 2}, Key: k1, HoldDeletes: true, TTL: ttl, Fence: fence,
			Live: map[string]string{old.Names[1]: "x", "run": "u1"}}, 7)
	}
	if r := rec(fa); r.Code != CodeStale {
		t.Fatalf("the old owner's reconcile: code %q, want stale", r.Code)
	}
	r := rec(fb)
	if r.Code != CodeOK {
		t.Fatalf("reconcile: %s %s", r.Code, r.Msg)
	}
	// b's own reissue (epoch 2) is left alone without HoldOwn.
	want := Result{Completed: []string{old.Names[1]}, Held: []string{old.Names[2]}, HeldDeletes: []PodRef{{"run", "u1"}}}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("reconcile (-want +got):\n%s", diff)
	}
	v := f.View(k1)
	if d, ok := v.Deletes["run"]; !ok || d.Epoch != 2 {
		t.Fatalf("the earlier owner's delete of a running pod: %+v (kept %v), want held at epoch 2", d, ok)
	}
	if _, ok := v.Deletes["gone"]; ok {
		t.Fatal("the delete of a gone pod was kept")
	}
	if r, ok := v.Reservations[old.Names[0]]; !ok || r.Held || r.Epoch != 2 {
		t.Fatalf("the new owner's own reissue: %+v (kept %v), want outstanding at epoch 2", r, ok)
	}
	if r := v.Reservations[old.Names[2]]; !r.Held || r.Epoch != 2 {
		t.Fatalf("the earlier owner's unknown name: %+v, want held at epoch 2", r)
	}
}

// TestAssignOwnersHandoverOnNewerRenewal: a move decided on an owner's
// renewal at index i, or on an owner that is no longer the owner, makes the
// new owner wait (Handover) when the entry finds a newer renewal or another
// owner: that renewal may have extended the old owner's lease past the
// leader's decision.
func TestAssignOwnersHandoverOnNewerRenewal(t *testing.T) {
	tests := []struct {
		name string
		a    OwnerAssignment
		want bool
	}{
		{"the renewal the leader saw", OwnerAssignment{Member: "m1", Owner: "b", From: "a", FromRenewal: 10}, false},
		{"a newer renewal committed meanwhile", OwnerAssignment{Member: "m1", Owner: "b", From: "a", FromRenewal: 9}, true},
		{"another owner than the leader saw", OwnerAssignment{Member: "m1", Owner: "b", From: "c", FromRenewal: 10}, true},
		{"asked for", OwnerAssignment{Member: "m1", Owner: "b", From: "a", FromRenewal: 10, Handover: true}, true},
		{"a new member", OwnerAssignment{Member: "m2", Owner: "b"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			applyAt(t, f, assign(2, own("m1", "a")), 2)
			applyEntryAt(t, f, &RenewOwnership{Owner: "a", Held: []MemberEpoch{{"m1", 1}}}, 2, 10)
			applyAt(t, f, assign(2, tc.a), 2)
			if o, _ := f.Owner(tc.a.Member); o.Owner != "b" || o.Handover != tc.want {
				t.Fatalf("owner %+v, want b with handover %v", o, tc.want)
			}
		})
	}
}

// TestUnfencedWriteToOwnedMember: when replicas disagree on sharding, a
// write without an owner fence (a replica running unsharded) is refused
// for a member that has an owner, whatever its term, and its releases and
// forgets are skipped, while facts apply and members without an owner are
// written as before; dropping the member from the table (the way back,
// node.RunUnsharded) holds what its owner reserved and lets unfenced
// writes apply again.
func TestUnfencedWriteToOwnedMember(t *testing.T) {
	k2 := Key{Cluster: "m2", Namespace: "ns", Name: "web"}
	fa := &OwnerFence{Owner: "a", Epoch: 1}
	meta := Meta{Term: 5, Now: 1}
	reserve := func(k Key, fence *OwnerFence) *Reserve {
		return &Reserve{Meta: meta, Key: k, Target: 5, Count: 1, Prefix: "web-", TTL: ttl, Fence: fence}
	}
	tests := []struct {
		name     string
		cmd      func(k Key) Command
		wantCode string // for the owned member; the unowned one is OK
	}{
		{"reserve", func(k Key) Command { return reserve(k, nil) }, CodeStale},
		{"expect deletes", func(k Key) Command {
			return &ExpectDeletes{Meta: meta, Key: k, Pods: []PodRef{{"p", "u"}}, TTL: ttl}
		}, CodeStale},
		{"reconcile", func(k Key) Command { return &Reconcile{Meta: meta, Key: k, Live: map[string]string{}} }, CodeStale},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			applyAt(t, f, assign(5, own("m1", "a")), 5)
			if r := applyAt(t, f, tc.cmd(k1), 5); r.Code != tc.wantCode {
				t.Errorf("owned member: code %q (%s), want %q", r.Code, r.Msg, tc.wantCode)
			}
			if r := applyAt(t, f, tc.cmd(k2), 5); r.Code != CodeOK {
				t.Errorf("member without an owner: code %q (%s), want ok", r.Code, r.Msg)
			}
		})
	}
	settlements := []struct {
		name string
		kind SettleKind
		kept bool
	}{
		{"release", SettleFailed, true},
		{"forget key", SettleForgetKey, true},
		{"forget cluster", SettleForgetCluster, true},
		{"a fact: pod seen", SettleCreated, false},
	}
	for _, tc := range settlements {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			applyAt(t, f, assign(5, own("m1", "a")), 5)
			name := applyAt(t, f, reserve(k1, fa), 5).Names[0]
			it := Settlement{Kind: tc.kind, Key: k1, Name: name, Term: 5, BeforeSeq: 100}
			applyAt(t, f, &Settle{Meta: meta, Items: []Settlement{it}}, 5)
			if _, kept := f.View(k1).Reservations[name]; kept != tc.kept {
				t.Errorf("unfenced settlement in a Settle: kept %v, want %v", kept, tc.kept)
			}
			// The same settlement carried by an owner's Reserve.
			f = New("s")
			applyAt(t, f, assign(5, own("m1", "a")), 5)
			name = applyAt(t, f, reserve(k1, fa), 5).Names[0]
			r := reserve(k1, fa)
			r.Settle = []Settlement{it}
			applyAt(t, f, r, 5)
			if _, kept := f.View(k1).Reservations[name]; kept != tc.kept {
				t.Errorf("unfenced settlement in a Reserve: kept %v, want %v", kept, tc.kept)
			}
		})
	}
	t.Run("dropped from the table", func(t *testing.T) {
		f := New("s")
		applyAt(t, f, assign(5, own("m1", "a")), 5)
		name := applyAt(t, f, reserve(k1, fa), 5).Names[0]
		applyAt(t, f, &AssignOwners{Meta: meta, Drop: []string{"m1"}}, 5)
		if r := f.View(k1).Reservations[name]; !r.Held {
			t.Fatalf("the owner's reservation after the drop: %+v, want held", r)
		}
		if r := applyAt(t, f, reserve(k1, fa), 5); r.Code != CodeStale {
			t.Fatalf("the old owner's fenced reserve: code %q, want stale", r.Code)
		}
		r := applyAt(t, f, reserve(k1, nil), 5)
		if r.Code != CodeOK || len(r.Names) != 1 || r.Names[0] != name {
			t.Fatalf("unfenced reserve after the drop: %+v, want the held %s", r, name)
		}
	})
}

// TestReleaseOwnership: the previous owner's release ends the handover wait
// of the assignment that moved the member from it, and nothing else does.
func TestReleaseOwnership(t *testing.T) {
	tests := []struct {
		name      string
		release   *ReleaseOwnership
		wantEnded bool
		want      Ownership
	}{
		{"the previous owner, at the move's epoch", &ReleaseOwnership{Owner: "a", Member: "m1", Epoch: 3}, true,
			Ownership{"b", 3, false, 1, ""}},
		{"another replica", &ReleaseOwnership{Owner: "c", Member: "m1", Epoch: 3}, false,
			Ownership{"b", 3, true, 1, "a"}},
		{"an older epoch", &ReleaseOwnership{Owner: "a", Member: "m1", Epoch: 1}, false,
			Ownership{"b", 3, true, 1, "a"}},
		{"the new owner itself", &ReleaseOwnership{Owner: "b", Member: "m1", Epoch: 3}, false,
			Ownership{"b", 3, true, 1, "a"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			applyAt(t, f, assign(2, own("m1", "a"), own("m2", "b")), 2)
			applyAt(t, f, assign(2, OwnerAssignment{Member: "m1", Owner: "b", Handover: true}), 2)
			r := applyAt(t, f, tc.release, 2)
			if r.Code != CodeOK || r.HandoverEnded != tc.wantEnded {
				t.Fatalf("result %+v, want OK with HandoverEnded %v", r, tc.wantEnded)
			}
			if diff := cmp.Diff(tc.want, f.Owners()["m1"]); diff != "" {
				t.Errorf("m1 (-want +got):\n%s", diff)
			}
			if o := f.Owners()["m2"]; o.Handover {
				t.Errorf("m2 changed: %v", o)
			}
		})
	}
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a")), 2)
	if r := applyAt(t, f, &ReleaseOwnership{Owner: "a", Member: "m1", Epoch: 1}, 2); r.HandoverEnded {
		t.Error("a release ended a handover where there was none")
	}
	if !UsesOwnership(&ReleaseOwnership{Owner: "a", Member: "m1", Epoch: 1}) {
		t.Error("ReleaseOwnership does not count as an ownership command")
	}
}
