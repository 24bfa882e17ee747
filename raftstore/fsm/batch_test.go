package fsm

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/raft"
)

// TestBatchEqualsSeparateEntries: a batch entry changes the state exactly as
// its commands would in separate entries of the same term, and returns the
// same result for each (fencing, dedup and refusals are per command).
func TestBatchEqualsSeparateEntries(t *testing.T) {
	k2 := Key{Cluster: "m2", Namespace: "ns", Name: "web"}
	cmds := []Command{
		reserve("a", 1, 3, 10, 0, 4),
		&Reserve{Meta: Meta{ReqID: "b", Now: 1, Term: 3}, Key: k2, Target: 2, Count: 2, Prefix: "web-", TTL: ttl},
		reserve("a", 1, 3, 10, 0, 4), // duplicate of the first
		reserve("", 1, 2, 10, 0, 1),  // a deposed leader's: stale
		&SetTargets{FRS: FRSRef{Namespace: "ns", Name: "web"}, Generation: 2, Targets: map[string]int32{"m1": 10, "m2": 2}},
		&SetTargets{FRS: FRSRef{Namespace: "ns", Name: "web"}, Generation: 1, Targets: map[string]int32{"m1": 1}}, // older generation: stale
		&Settle{Meta: Meta{Now: 2}, Items: []Settlement{{Kind: SettleCreated, Key: k1, Name: "nonexistent"}}},
	}
	encoded := make([][]byte, len(cmds))
	for i, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		encoded[i] = b
	}

	separate := New("s")
	want := make([]Result, len(cmds))
	for i, b := range encoded {
		want[i] = *separate.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: 3}).(*Result)
	}
	if want[3].Code != CodeStale || want[5].Code != CodeStale || len(want[0].Names) != 4 {
		t.Fatalf("separate entries gave unexpected results: %+v", want)
	}
	if diff := cmp.Diff(want[0], want[2]); diff != "" {
		t.Fatalf("the retried reserve got a different result (-first +retry):\n%s", diff)
	}

	batched := New("s")
	b, err := EncodeBatch(encoded)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := batched.Apply(&raft.Log{Type: raft.LogCommand, Data: b, Term: 3}).(*BatchResult)
	if !ok {
		t.Fatal("batch entry did not return a BatchResult")
	}
	if diff := cmp.Diff(want, got.Results); diff != "" {
		t.Fatalf("batch results (-separate +batched):\n%s", diff)
	}
	if !bytes.Equal(snapshotBytes(t, batched), snapshotBytes(t, separate)) {
		t.Fatal("state after the batch differs from the state after separate entries")
	}
}

func TestBatchRefused(t *testing.T) {
	one, err := Encode(reserve("x", 1, 3, 10, 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	nested, err := EncodeBatch([][]byte{one})
	if err != nil {
		t.Fatal(err)
	}
	tooMany := make([][]byte, MaxBatchCommands+1)
	for i := range tooMany {
		tooMany[i] = one
	}
	for name, cmds := range map[string][][]byte{
		"empty":     nil,
		"nested":    {one, nested},
		"too short": {one, {byte(TypeReserve)}},
		"too many":  tooMany,
	} {
		if _, err := EncodeBatch(cmds); err == nil {
			t.Errorf("%s: EncodeBatch accepted it", name)
		}
	}

	// Entries that are not valid batches change nothing.
	f := New("s")
	before := snapshotBytes(t, f)
	for name, data := range map[string][]byte{
		"bad version": append([]byte{byte(TypeBatch), 9}, nested[2:]...),
		"bad json":    append([]byte{byte(TypeBatch), Version1}, `{"cmds":`...),
		"nested":      append([]byte{byte(TypeBatch), Version1}, []byte(`{"cmds":["CQE="]}`)...),
		"empty":       append([]byte{byte(TypeBatch), Version1}, `{"cmds":[]}`...),
		"type only":   {byte(TypeBatch)},
	} {
		r, ok := f.Apply(&raft.Log{Type: raft.LogCommand, Data: data, Term: 3}).(*BatchResult)
		if !ok || len(r.Results) != 0 {
			t.Errorf("%s: result %+v, want an empty BatchResult", name, r)
		}
	}
	if !bytes.Equal(snapshotBytes(t, f), before) {
		t.Fatal("an invalid batch changed the state")
	}
}
