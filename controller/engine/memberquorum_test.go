package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// quietStore is a termStore that says whether a reconcile of any key would
// settle nothing.
type quietStore struct {
	*termStore
	quiet bool
}

func (s *quietStore) Quiet(context.Context, fedref.MemberObject) bool { return s.quiet }

// quorumReader is the member read live: a metadata list (the member-wide
// quorum read) answers rv; a pod list (a key's own) is served by the
// cache's client and answers rv too. It counts both.
type quorumReader struct {
	client.Reader
	rv           string
	member, keys int
}

func (r *quorumReader) List(ctx context.Context, l client.ObjectList, opts ...client.ListOption) error {
	switch l := l.(type) {
	case *metav1.PartialObjectMetadataList:
		r.member++
		l.ResourceVersion = r.rv
		return nil
	case *corev1.PodList:
		r.keys++
		if err := r.Reader.List(ctx, l, opts...); err != nil {
			return err
		}
		l.ResourceVersion = r.rv
		return nil
	}
	return r.Reader.List(ctx, l, opts...)
}

// TestQuietKeyNeedsNoListOfItsOwn: before a key's first write in a term,
// a key the store would settle nothing for is checked against one quorum
// read of the whole member, as long as the pod cache has caught up with
// it; otherwise the key's own pods are listed, as before.
func TestQuietKeyNeedsNoListOfItsOwn(t *testing.T) {
	type counts struct{ MemberReads, KeyLists, Reconciles, Creates int }
	tests := []struct {
		name     string
		noQuiet  bool // the store does not implement QuietReconciler
		holds    bool // the store holds expectations for the key
		cachedRV string
		want     counts
	}{
		{name: "quiet key, cache past the member's read", cachedRV: "12", want: counts{MemberReads: 1, Creates: 3}},
		{name: "quiet key, cache at the member's read", cachedRV: "10", want: counts{MemberReads: 1, Creates: 3}},
		{name: "quiet key, cache behind", cachedRV: "9", want: counts{MemberReads: 1, KeyLists: 1, Reconciles: 1, Creates: 3}},
		{name: "informer gives no resource version", cachedRV: "", want: counts{KeyLists: 1, Reconciles: 1, Creates: 3}},
		{name: "store holds expectations for the key", holds: true, cachedRV: "12", want: counts{KeyLists: 1, Reconciles: 1, Creates: 3}},
		{name: "store cannot tell", noQuiet: true, cachedRV: "12", want: counts{KeyLists: 1, Reconciles: 1, Creates: 3}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := &termStore{Memory: expectations.NewMemory(0, nil)}
			var st expectations.Store = &quietStore{termStore: ts, quiet: !tc.holds}
			if tc.noQuiet {
				st = ts
			}
			live := &quorumReader{rv: "10"}
			h := newHarness(t, workload(3), hopts{store: st, gate: &termGate{term: 4}, live: live,
				podStoreRV: func() string { return tc.cachedRV }})
			live.Reader = h.cl
			if _, err := h.sync(); err != nil {
				t.Fatal(err)
			}
			got := counts{MemberReads: live.member, KeyLists: live.keys, Reconciles: len(ts.reconciled), Creates: int(h.n.creates.Load())}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("first sync of the term (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMemberQuorumOnePerFreshness: the member-wide read is made once per
// term (and store epoch), shared by every key of it, and a failed read is
// not remembered.
func TestMemberQuorumOnePerFreshness(t *testing.T) {
	var q memberQuorum
	reads, fail := 0, false
	list := func(context.Context) (string, error) {
		reads++
		if fail {
			return "", errors.New("member unreachable")
		}
		return []string{"", "10", "20", "30"}[reads], nil
	}
	ctx := context.Background()
	steps := []struct {
		f       freshness
		fail    bool
		wantRV  string
		wantErr bool
	}{
		{f: freshness{term: 1}, wantRV: "10"},
		{f: freshness{term: 1}, wantRV: "10"},
		{f: freshness{term: 2}, fail: true, wantErr: true},
		{f: freshness{term: 2}, wantRV: "30"},
		{f: freshness{term: 2}, wantRV: "30"},
		{f: freshness{term: 2, epoch: 1}, fail: true, wantErr: true},
	}
	for i, s := range steps {
		fail = s.fail
		rv, err := q.resourceVersion(ctx, s.f, list)
		if (err != nil) != s.wantErr || rv != s.wantRV {
			t.Fatalf("step %d: %q, %v; want %q (error %v)", i, rv, err, s.wantRV, s.wantErr)
		}
	}
	if reads != 4 {
		t.Fatalf("%d reads, want 4 (one per freshness and one per failure)", reads)
	}
}

// TestMemberQuorumSharedRead: syncs that need the read at once share one;
// a sync whose context ends stops waiting for it while the read goes on
// for the others.
func TestMemberQuorumSharedRead(t *testing.T) {
	var q memberQuorum
	release, started := make(chan struct{}), make(chan struct{})
	var reads atomic.Int32
	list := func(context.Context) (string, error) {
		if reads.Add(1) == 1 {
			close(started)
		}
		<-release
		return "7", nil
	}
	f := freshness{term: 3}
	first := make(chan string)
	go func() {
		rv, _ := q.resourceVersion(context.Background(), f, list)
		first <- rv
	}()
	<-started
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := q.resourceVersion(cancelled, f, list); !errors.Is(err, context.Canceled) {
		t.Fatalf("a sync whose context ended: %v, want context.Canceled", err)
	}
	second := make(chan string)
	go func() {
		rv, _ := q.resourceVersion(context.Background(), f, list)
		second <- rv
	}()
	close(release)
	if a, b := <-first, <-second; a != "7" || b != "7" || reads.Load() != 1 {
		t.Fatalf("got %q and %q from %d reads, want \"7\" twice from one read", a, b, reads.Load())
	}
}
