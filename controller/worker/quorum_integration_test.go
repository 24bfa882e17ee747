package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// quietStore is a test store that is a QuietReconciler holding nothing for
// any key, as the replicated store is for a key new in its term.
type quietStore struct{ *countingStore }

func (quietStore) ReconcileReservations(context.Context, fedref.MemberObject, map[string]expectations.ListedPod) (expectations.Settlement, error) {
	return expectations.Settlement{}, nil
}

func (quietStore) Quiet(context.Context, fedref.MemberObject) bool { return true }

// TestIntegrationNewKeysShareOneQuorumRead: on a real API server, keys new
// in the term list no pods of their own before their first write once the
// pod cache has caught up with the member's one quorum read of the term
// (a list of one pod's metadata). Before, every new key listed its pods:
// one read per MemberReplicaSet, taken from the member's rate limit.
func TestIntegrationNewKeysShareOneQuorumRead(t *testing.T) {
	// No unsatisfied requeue within the test: its quorum list would be
	// counted with the takeover lists this test is about.
	e := startEnv(t, envOpts{quiet: true, unsatisfiedRequeue: 4 * time.Minute})
	hasPods := func(names ...string) func() (bool, string) {
		return func() (bool, string) {
			for _, n := range names {
				if _, mrs := e.owned(n); mrs == nil || mrs.Status.Replicas != 2 {
					return false, n + " has not reported 2 pods"
				}
			}
			return true, ""
		}
	}
	// The first key's sync reads the member; its cache may still be
	// behind that read, and then the key lists its own pods. Its pods'
	// events bring the cache past the read.
	e.set("first", 2)
	e.eventually("the first workload's pods in its status", 2*time.Minute, hasPods("first"))
	keyLists, memberReads := e.kinds.get("LIST", "pods key"), e.kinds.get("LIST", "pods limit 1")
	if memberReads != 1 || keyLists > 1 {
		t.Fatalf("first key: %d member reads, %d key lists; want 1 and at most 1", memberReads, keyLists)
	}
	var names []string
	for i := range 10 {
		names = append(names, fmt.Sprintf("new-%d", i))
		e.set(names[i], 2)
	}
	e.eventually("ten new workloads' pods in their status", 2*time.Minute, hasPods(names...))
	if got := e.kinds.get("LIST", "pods key") - keyLists; got != 0 {
		t.Fatalf("ten new keys listed their pods %d times, want 0", got)
	}
	if got := e.kinds.get("LIST", "pods limit 1"); got != 1 {
		t.Fatalf("%d member-wide quorum reads, want 1 for the term", got)
	}
}
