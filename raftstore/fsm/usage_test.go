package fsm

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func usageOf(member, owner string, epoch uint64, blob string) *SetMemberUsage {
	return &SetMemberUsage{Meta: Meta{Now: 1}, Member: member, Fence: OwnerFence{Owner: owner, Epoch: epoch}, Usage: []byte(blob)}
}

// TestSetMemberUsage: a usage applies only from the member's committed
// owner at exactly its epoch, and is stored with that owner, epoch and the
// index of its entry; any other sender changes nothing and is told why.
func TestSetMemberUsage(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a"), own("m2", "b")), 2) // m1: a@1, m2: b@2
	tests := []struct {
		name     string
		cmd      *SetMemberUsage
		index    uint64
		wantCode string
		wantMsg  string
		want     map[string]MemberUsage
	}{
		{"owner at its epoch", usageOf("m1", "a", 1, "u1"), 10, CodeOK, "",
			map[string]MemberUsage{"m1": {Usage: []byte("u1"), Owner: "a", Epoch: 1, Index: 10}}},
		{"a later usage replaces it", usageOf("m1", "a", 1, "u2"), 11, CodeOK, "",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11}}},
		{"wrong owner", usageOf("m1", "b", 1, "x"), 12, CodeStale, "owned by a@1",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11}}},
		{"stale epoch", usageOf("m2", "b", 1, "x"), 13, CodeStale, "the owner's epoch is 2",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11}}},
		{"future epoch", usageOf("m2", "b", 3, "x"), 14, CodeStale, "the owner's epoch is 2",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11}}},
		{"unowned member", usageOf("m9", "a", 1, "x"), 15, CodeStale, "has no owner",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11}}},
		{"empty usage of the second member", usageOf("m2", "b", 2, ""), 16, CodeOK, "",
			map[string]MemberUsage{"m1": {Usage: []byte("u2"), Owner: "a", Epoch: 1, Index: 11},
				"m2": {Owner: "b", Epoch: 2, Index: 16}}},
	}
	for _, tc := range tests {
		r := applyEntryAt(t, f, tc.cmd, 2, tc.index)
		if r.Code != tc.wantCode || !strings.Contains(r.Msg, tc.wantMsg) {
			t.Fatalf("%s: result %q %q, want %q containing %q", tc.name, r.Code, r.Msg, tc.wantCode, tc.wantMsg)
		}
		if tc.wantCode == CodeStale && !errors.Is(r.Error(), ErrStale) {
			t.Fatalf("%s: error %v does not wrap ErrStale", tc.name, r.Error())
		}
		if diff := cmp.Diff(tc.want, f.AllMemberUsage()); diff != "" {
			t.Fatalf("%s: usage (-want +got):\n%s", tc.name, diff)
		}
	}
	got, ok := f.MemberUsage("m1")
	if !ok || string(got.Usage) != "u2" {
		t.Fatalf("MemberUsage(m1) = %+v, %v", got, ok)
	}
	got.Usage[0] = 'X'
	if again, _ := f.MemberUsage("m1"); string(again.Usage) != "u2" {
		t.Fatalf("MemberUsage returned the FSM's own bytes: %q after a caller's change", again.Usage)
	}
	if _, ok := f.MemberUsage("m9"); ok {
		t.Fatal("usage of a member nobody published for")
	}
}

// TestSetMemberUsageInvalid: an empty member name, a missing fence and an
// oversized blob are refused when encoding (and decoding).
func TestSetMemberUsageInvalid(t *testing.T) {
	tests := []struct {
		name    string
		cmd     *SetMemberUsage
		wantErr error
	}{
		{"empty member", usageOf("", "a", 1, "u"), nil},
		{"no owner", usageOf("m1", "", 1, "u"), nil},
		{"no epoch", usageOf("m1", "a", 0, "u"), nil},
		{"oversize", &SetMemberUsage{Member: "m1", Fence: OwnerFence{Owner: "a", Epoch: 1},
			Usage: make([]byte, MaxUsageBytes+1)}, ErrUsageTooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Encode(tc.cmd)
			if err == nil {
				t.Fatal("encoded")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			js, _ := frame(TypeSetMemberUsage, tc.cmd)
			if _, err := Decode(js); !errors.Is(err, ErrMalformed) {
				t.Fatalf("decode: %v, want %v", err, ErrMalformed)
			}
		})
	}
	if _, err := Encode(&SetMemberUsage{Member: "m1", Fence: OwnerFence{Owner: "a", Epoch: 1},
		Usage: make([]byte, MaxUsageBytes)}); err != nil {
		t.Fatalf("a usage of exactly MaxUsageBytes: %v", err)
	}
}

// TestMemberUsageCleared: a member's usage goes when its owner changes or
// it leaves the ownership table (or is pruned), and stays when the leader
// assigns it to the owner it has.
func TestMemberUsageCleared(t *testing.T) {
	setup := func(t *testing.T) *FSM {
		f := New("s")
		applyAt(t, f, assign(2, own("m1", "a"), own("m2", "b")), 2)
		for _, c := range []*SetMemberUsage{usageOf("m1", "a", 1, "u1"), usageOf("m2", "b", 2, "u2")} {
			if r := applyAt(t, f, c, 2); r.Code != CodeOK {
				t.Fatalf("usage: %+v", r)
			}
		}
		return f
	}
	tests := []struct {
		name string
		cmd  Command
		want []string // members that keep a usage
	}{
		{"same owner again", assign(2, own("m1", "a")), []string{"m1", "m2"}},
		{"moved", assign(2, own("m1", "b")), []string{"m2"}},
		{"dropped", &AssignOwners{Meta: Meta{Term: 2, Now: 1}, Drop: []string{"m2"}}, []string{"m1"}},
		{"pruned", &PruneMembers{Meta: Meta{Term: 2, Now: 1}, Members: []string{"m1"}}, []string{"m1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := setup(t)
			if r := applyAt(t, f, tc.cmd, 2); r.Code != CodeOK {
				t.Fatalf("apply: %+v", r)
			}
			var got []string
			for _, m := range []string{"m1", "m2"} {
				if _, ok := f.MemberUsage(m); ok {
					got = append(got, m)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("members with usage (-want +got):\n%s", diff)
			}
		})
	}
	f := setup(t)
	applyAt(t, f, assign(2, own("m1", "b")), 2)
	if r := applyAt(t, f, usageOf("m1", "a", 1, "late"), 2); r.Code != CodeStale {
		t.Fatalf("the previous owner's late usage: %+v, want %q", r, CodeStale)
	}
	if r := applyAt(t, f, usageOf("m1", "b", 3, "fresh"), 2); r.Code != CodeOK {
		t.Fatalf("the new owner's usage: %+v", r)
	}
}

// TestMemberUsageSnapshot: usages survive a snapshot and restore, and a
// snapshot written before usages existed restores with none, after which
// usages apply.
func TestMemberUsageSnapshot(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a")), 2)
	applyEntryAt(t, f, usageOf("m1", "a", 1, "u1"), 2, 7)
	g := New("s")
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(f.AllMemberUsage(), g.AllMemberUsage()); diff != "" {
		t.Fatalf("restored usage (-want +got):\n%s", diff)
	}

	// The state of a version without usages: no "usage" field at all.
	old := `{"seq":0,"keys":{},"targets":{},"health":{},"dedup":[],"owners":{"m1":{"o":"a","e":1}},"ownerEpoch":1}`
	var buf bytes.Buffer
	if _, err := (&snapshot{body: []byte(old)}).WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	h := New("s")
	if err := h.Restore(io.NopCloser(&buf)); err != nil {
		t.Fatalf("restoring a snapshot without usages: %v", err)
	}
	if got := h.AllMemberUsage(); len(got) != 0 {
		t.Fatalf("usage %v from a snapshot without any", got)
	}
	if r := applyEntryAt(t, h, usageOf("m1", "a", 1, "u"), 3, 9); r.Code != CodeOK {
		t.Fatalf("usage after restoring an older snapshot: %+v", r)
	}
	if u, ok := h.MemberUsage("m1"); !ok || u.Index != 9 || string(u.Usage) != "u" {
		t.Fatalf("usage %+v %v", u, ok)
	}
}

// TestMemberUsageNotifies: the apply hooks hear of an accepted usage, not
// of a refused one.
func TestMemberUsageNotifies(t *testing.T) {
	f := New("s")
	applyAt(t, f, assign(2, own("m1", "a")), 2)
	var heard []string
	f.OnApply(func(c Command) {
		if u, ok := c.(*SetMemberUsage); ok {
			heard = append(heard, string(u.Usage))
		}
	})
	applyAt(t, f, usageOf("m1", "b", 1, "refused"), 2)
	applyAt(t, f, usageOf("m1", "a", 1, "accepted"), 2)
	if diff := cmp.Diff([]string{"accepted"}, heard); diff != "" {
		t.Fatalf("hooks heard (-want +got):\n%s", diff)
	}
	if !UsesOwnership(usageOf("m1", "a", 1, "")) {
		t.Error("SetMemberUsage does not need ownership")
	}
	b, err := Encode(usageOf("m1", "a", 1, ""))
	if err != nil || !MayUseOwnership(b) {
		t.Errorf("MayUseOwnership of an encoded SetMemberUsage: false (%v)", err)
	}
}
