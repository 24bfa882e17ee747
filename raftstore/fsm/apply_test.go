package fsm

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The tests below cover, one table each, the applyX methods of the commands
// that used to be applied inline in the dispatch switch. Reserve, Settle,
// Reconcile and PruneMembers have their own tests in fsm_test.go.

func TestApplySetTargets(t *testing.T) {
	web := FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
	webNew := FRSRef{Namespace: "ns", Name: "web", UID: "u2"}
	tests := []struct {
		name     string
		prior    *SetTargets
		cmd      SetTargets
		wantCode string
		want     TargetRecord
	}{
		{name: "first record", cmd: SetTargets{FRS: web, Generation: 1, Targets: map[string]int32{"a": 2}},
			want: TargetRecord{FRS: web, Generation: 1, Targets: map[string]int32{"a": 2}}},
		{name: "newer generation replaces",
			prior: &SetTargets{FRS: web, Generation: 1, Targets: map[string]int32{"a": 2}},
			cmd:   SetTargets{FRS: web, Generation: 2, Targets: map[string]int32{"b": 3}},
			want:  TargetRecord{FRS: web, Generation: 2, Targets: map[string]int32{"b": 3}}},
		{name: "same generation replaces (replanned after a member change)",
			prior: &SetTargets{FRS: web, Generation: 2, Targets: map[string]int32{"a": 2}},
			cmd:   SetTargets{FRS: web, Generation: 2, Targets: map[string]int32{"a": 1, "b": 1}},
			want:  TargetRecord{FRS: web, Generation: 2, Targets: map[string]int32{"a": 1, "b": 1}}},
		{name: "older generation of the same object is stale",
			prior:    &SetTargets{FRS: web, Generation: 3, Targets: map[string]int32{"a": 2}},
			cmd:      SetTargets{FRS: web, Generation: 2, Targets: map[string]int32{"a": 9}},
			wantCode: CodeStale,
			want:     TargetRecord{FRS: web, Generation: 3, Targets: map[string]int32{"a": 2}}},
		{name: "recreated object replaces whatever its generation",
			prior: &SetTargets{FRS: web, Generation: 7, Targets: map[string]int32{"a": 2}},
			cmd:   SetTargets{FRS: webNew, Generation: 1, Targets: map[string]int32{"c": 4}},
			want:  TargetRecord{FRS: webNew, Generation: 1, Targets: map[string]int32{"c": 4}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			if tc.prior != nil {
				mustApply(t, f, tc.prior)
			}
			if r := mustApply(t, f, &tc.cmd); r.Code != tc.wantCode {
				t.Fatalf("code %q (%s), want %q", r.Code, r.Msg, tc.wantCode)
			}
			got, ok := f.Targets(tc.cmd.FRS)
			if !ok {
				t.Fatalf("no record for %s", tc.cmd.FRS)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("record (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplySetTargetsCopiesTheMap(t *testing.T) {
	f := New("s")
	frs := FRSRef{Namespace: "ns", Name: "web", UID: "u"}
	targets := map[string]int32{"a": 1}
	mustApplyDirect(t, f, &SetTargets{FRS: frs, Generation: 1, Targets: targets})
	targets["a"] = 99
	if rec, _ := f.Targets(frs); rec.Targets["a"] != 1 {
		t.Fatalf("the FSM kept the caller's map: target %d after the caller changed it", rec.Targets["a"])
	}
}

func TestApplyDeleteTargets(t *testing.T) {
	web := FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
	tests := []struct {
		name      string
		prior     bool
		cmd       DeleteTargets
		wantCode  string
		wantAfter bool
	}{
		{name: "deletes by UID", prior: true, cmd: DeleteTargets{FRS: web}},
		{name: "deletes without UID", prior: true, cmd: DeleteTargets{FRS: FRSRef{Namespace: "ns", Name: "web"}}},
		{name: "other UID leaves the record", prior: true, cmd: DeleteTargets{FRS: FRSRef{Namespace: "ns", Name: "web", UID: "old"}},
			wantCode: CodeNotFound, wantAfter: true},
		{name: "nothing to delete", cmd: DeleteTargets{FRS: web}, wantCode: CodeNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			if tc.prior {
				mustApply(t, f, &SetTargets{FRS: web, Generation: 1, Targets: map[string]int32{"a": 1}})
			}
			if r := mustApply(t, f, &tc.cmd); r.Code != tc.wantCode {
				t.Fatalf("code %q (%s), want %q", r.Code, r.Msg, tc.wantCode)
			}
			if _, ok := f.Targets(web); ok != tc.wantAfter {
				t.Errorf("record present %v, want %v", ok, tc.wantAfter)
			}
		})
	}
}

func TestApplyExpectDeletes(t *testing.T) {
	tests := []struct {
		name  string
		prior []PodRef
		cmd   ExpectDeletes
		want  map[string]PendingDelete
	}{
		{name: "records each pod with UID, expiry and term",
			cmd: ExpectDeletes{Meta: Meta{Term: 2, Now: 10}, Key: k1, TTL: 5, Pods: []PodRef{{Name: "a", UID: "1"}, {Name: "b", UID: "2"}}},
			want: map[string]PendingDelete{
				"a": {Name: "a", UID: "1", Expiry: 15, Term: 2, Seq: 1},
				"b": {Name: "b", UID: "2", Expiry: 15, Term: 2, Seq: 1},
			}},
		{name: "replaces the key's earlier pending deletes",
			prior: []PodRef{{Name: "old", UID: "9"}},
			cmd:   ExpectDeletes{Meta: Meta{Term: 2, Now: 10}, Key: k1, TTL: 5, Pods: []PodRef{{Name: "a", UID: "1"}}},
			want:  map[string]PendingDelete{"a": {Name: "a", UID: "1", Expiry: 15, Term: 2, Seq: 2}}},
		{name: "an empty list clears them",
			prior: []PodRef{{Name: "old", UID: "9"}},
			cmd:   ExpectDeletes{Meta: Meta{Term: 2, Now: 10}, Key: k1, TTL: 5},
			want:  map[string]PendingDelete{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			if tc.prior != nil {
				mustApply(t, f, &ExpectDeletes{Meta: Meta{Term: 2, Now: 10}, Key: k1, TTL: 5, Pods: tc.prior})
			}
			if r := mustApply(t, f, &tc.cmd); r.Code != CodeOK {
				t.Fatalf("code %q (%s)", r.Code, r.Msg)
			}
			got := f.View(k1).Deletes
			if got == nil {
				got = map[string]PendingDelete{}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pending deletes (-want +got):\n%s", diff)
			}
		})
	}
}

func TestApplySetHealth(t *testing.T) {
	tests := []struct {
		name string
		cmds []SetHealth
		want map[string]Health
	}{
		{name: "records", cmds: []SetHealth{{Cluster: "a", Healthy: true, Since: 1}},
			want: map[string]Health{"a": {Healthy: true, Since: 1}}},
		{name: "later replaces earlier", cmds: []SetHealth{{Cluster: "a", Healthy: true, Since: 1}, {Cluster: "a", Since: 7}},
			want: map[string]Health{"a": {Since: 7}}},
		{name: "members are independent", cmds: []SetHealth{{Cluster: "a", Healthy: true, Since: 1}, {Cluster: "b", Since: 2}},
			want: map[string]Health{"a": {Healthy: true, Since: 1}, "b": {Since: 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := New("s")
			for i := range tc.cmds {
				mustApply(t, f, &tc.cmds[i])
			}
			if diff := cmp.Diff(tc.want, f.AllHealth()); diff != "" {
				t.Errorf("health (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFencedTypes pins which commands carry the term fence: exactly those
// that change expectations, and the rollout record.
func TestFencedTypes(t *testing.T) {
	tests := []struct {
		cmd  Command
		want bool
	}{
		{&Reserve{}, true}, {&ExpectDeletes{}, true}, {&Reconcile{}, true}, {&PruneMembers{}, true},
		{&Settle{}, false}, {&SetTargets{}, false}, {&DeleteTargets{}, false}, {&SetHealth{}, false},
		{&SetRollout{}, true}, {&DeleteRollout{}, false},
	}
	for _, tc := range tests {
		if got := fencedType(tc.cmd); got != tc.want {
			t.Errorf("fencedType(%T) = %v, want %v", tc.cmd, got, tc.want)
		}
	}
}

// mustApplyDirect applies through the decoded path without raft framing.
func mustApplyDirect(t *testing.T, f *FSM, c Command) Result {
	t.Helper()
	b, err := Encode(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return f.ApplyBytes(b)
}

// A rollout record is kept as the bytes committed, replaced whole, deleted
// by UID, carried by snapshots, and refused when it is not JSON.
func TestApplyRollout(t *testing.T) {
	web := FRSRef{Namespace: "ns", Name: "web", UID: "u1"}
	f := New("s")
	mustApply(t, f, &SetRollout{FRS: web, Record: []byte(`{"state":{"Phase":"Progressing"}}`)})
	mustApply(t, f, &SetRollout{FRS: web, Record: []byte(`{"state":{"Phase":"Baking"}}`)})
	if rec, ok := f.Rollout(web); !ok || string(rec.Record) != `{"state":{"Phase":"Baking"}}` {
		t.Fatalf("record = %q, %v; want the last one committed", rec.Record, ok)
	}
	g := New("s")
	if err := g.Restore(io.NopCloser(bytes.NewReader(snapshotBytes(t, f)))); err != nil {
		t.Fatal(err)
	}
	if rec, ok := g.Rollout(web); !ok || string(rec.Record) != `{"state":{"Phase":"Baking"}}` {
		t.Fatalf("restored record = %q, %v", rec.Record, ok)
	}
	if r := mustApply(t, f, &DeleteRollout{FRS: FRSRef{Namespace: "ns", Name: "web", UID: "old"}}); r.Code != CodeNotFound {
		t.Fatalf("delete with another UID: code %q, want %q", r.Code, CodeNotFound)
	}
	if r := mustApply(t, f, &DeleteRollout{FRS: web}); r.Code != CodeOK {
		t.Fatalf("delete: code %q (%s)", r.Code, r.Msg)
	}
	if _, ok := f.Rollout(web); ok {
		t.Fatal("record still present after its deletion")
	}
	if _, err := Encode(&SetRollout{FRS: web, Record: []byte(`{not json`)}); err == nil {
		t.Fatal("a record that is not JSON was encoded")
	}
}
