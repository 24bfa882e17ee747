package expectations

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/replicafed/replicafed/internal/fedref"
)

func TestMemoryCounters(t *testing.T) {
	ctx := context.Background()
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "a"}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewMemory(0, clk)

	if !m.Satisfied(k) {
		t.Fatal("no entry must be satisfied")
	}
	names, err := m.ExpectCreations(ctx, k, CreateIntent{Count: 3, Prefix: "a-"})
	if err != nil || len(names) != 3 {
		t.Fatalf("ExpectCreations = %v, %v", names, err)
	}
	for _, n := range names {
		if n != "" {
			t.Fatalf("memory store must grant generateName, got %q", n)
		}
	}
	if m.Satisfied(k) {
		t.Fatal("3 outstanding creations must not be satisfied")
	}
	m.CreationObserved(k, "")
	m.CreationFailed(k, "")
	if m.Satisfied(k) {
		t.Fatal("1 outstanding creation must not be satisfied")
	}
	m.CreationObserved(k, "")
	if !m.Satisfied(k) {
		t.Fatal("fulfilled must be satisfied")
	}
	// A fulfilled entry stays until overwritten; extra observations go negative.
	m.CreationObserved(k, "")
	if add, del, ok := m.Counts(k); !ok || add != -1 || del != 0 {
		t.Fatalf("counts = %d,%d,%v; want -1,0,true", add, del, ok)
	}
}

func TestMemoryExpiry(t *testing.T) {
	ctx := context.Background()
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "a"}
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewMemory(0, clk)
	if _, err := m.ExpectCreations(ctx, k, CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultTTL)
	if m.Satisfied(k) {
		t.Fatal("exactly TTL old must not be expired yet")
	}
	clk.Step(time.Nanosecond)
	if !m.Satisfied(k) {
		t.Fatal("older than TTL must be satisfied")
	}
	// Lowering does not refresh the timestamp; a new Expect does.
	if _, err := m.ExpectCreations(ctx, k, CreateIntent{Count: 1}); err != nil {
		t.Fatal(err)
	}
	if m.Satisfied(k) {
		t.Fatal("fresh expectation must block")
	}
}

func TestMemoryDeletionsCountedOnce(t *testing.T) {
	ctx := context.Background()
	k := fedref.MemberObject{Cluster: "m1", Namespace: "ns", Name: "a"}
	m := NewMemory(time.Minute, clocktesting.NewFakeClock(time.Unix(0, 0)))
	if err := m.ExpectDeletions(ctx, k, []PodRef{{Name: "p1"}, {Name: "p2"}, {Name: "p2"}}); err != nil {
		t.Fatal(err)
	}
	if _, del, _ := m.Counts(k); del != 2 {
		t.Fatalf("duplicates must collapse: del = %d", del)
	}
	m.DeletionObserved(k, "p1")
	m.DeletionObserved(k, "p1") // deletionTimestamp update, then final delete
	m.DeletionObserved(k, "other")
	if m.Satisfied(k) {
		t.Fatal("p2 still outstanding")
	}
	if _, del, _ := m.Counts(k); del != 1 {
		t.Fatalf("del = %d, want 1", del)
	}
	m.DeletionObserved(k, "p2")
	if !m.Satisfied(k) {
		t.Fatal("all deletions observed")
	}
}

func TestMemoryDeleteAndDeleteCluster(t *testing.T) {
	ctx := context.Background()
	m := NewMemory(0, nil)
	keys := []fedref.MemberObject{
		{Cluster: "m1", Namespace: "ns", Name: "a"},
		{Cluster: "m1", Namespace: "ns", Name: "b"},
		{Cluster: "m2", Namespace: "ns", Name: "a"},
	}
	for _, k := range keys {
		if _, err := m.ExpectCreations(ctx, k, CreateIntent{Count: 1}); err != nil {
			t.Fatal(err)
		}
	}
	m.Delete(keys[0])
	if !m.Satisfied(keys[0]) {
		t.Fatal("deleted key must be satisfied (recreate starts clean)")
	}
	m.DeleteCluster("m1")
	if _, _, ok := m.Counts(keys[1]); ok {
		t.Fatal("m1 key survived DeleteCluster")
	}
	if m.Satisfied(keys[2]) {
		t.Fatal("m2 key must be untouched")
	}
	// Lower on a missing key is a no-op.
	m.CreationObserved(keys[0], "")
	if _, _, ok := m.Counts(keys[0]); ok {
		t.Fatal("observation must not create an entry")
	}
}
