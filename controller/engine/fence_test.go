package engine

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/internal/fedref"
)

// fencedGate is an open FencedGate whose fence the test moves.
type fencedGate struct {
	mu    sync.Mutex
	fence expectations.Fence
}

// Enter must not be called: the engine enters a FencedGate through
// EnterFenced.
func (g *fencedGate) Enter() (context.Context, uint64, func(), bool) {
	panic("Enter called on a FencedGate")
}

func (g *fencedGate) EnterFenced() (context.Context, expectations.Fence, func(), bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return context.Background(), g.fence, func() {}, true
}

func (g *fencedGate) set(f expectations.Fence) {
	g.mu.Lock()
	g.fence = f
	g.mu.Unlock()
}

// permitCall is what a recording store saw in one call's context.
type permitCall struct {
	fence   expectations.Fence
	fenced  bool
	hasTerm bool
}

// fenceStore records the permit of every ExpectCreations, ExpectDeletions
// and ReconcileReservations call.
type fenceStore struct {
	*expectations.Memory
	mu                          sync.Mutex
	creates, deletes, reconcile []permitCall
}

func callOf(ctx context.Context) permitCall {
	f, fenced := expectations.FenceFrom(ctx)
	_, hasTerm := expectations.TermFrom(ctx)
	return permitCall{fence: f, fenced: fenced, hasTerm: hasTerm}
}

func (s *fenceStore) record(to *[]permitCall, ctx context.Context) {
	s.mu.Lock()
	*to = append(*to, callOf(ctx))
	s.mu.Unlock()
}

func (s *fenceStore) ExpectCreations(ctx context.Context, k fedref.MemberObject, in expectations.CreateIntent) ([]string, error) {
	s.record(&s.creates, ctx)
	return s.Memory.ExpectCreations(ctx, k, in)
}

func (s *fenceStore) ExpectDeletions(ctx context.Context, k fedref.MemberObject, pods []expectations.PodRef) error {
	s.record(&s.deletes, ctx)
	return s.Memory.ExpectDeletions(ctx, k, pods)
}

func (s *fenceStore) ReconcileReservations(ctx context.Context, _ fedref.MemberObject, _ map[string]expectations.ListedPod) (expectations.Settlement, error) {
	s.record(&s.reconcile, ctx)
	return expectations.Settlement{}, nil
}

// fences returns the fences of calls, failing on a call without one or
// with a term.
func fences(t *testing.T, what string, calls []permitCall) []expectations.Fence {
	t.Helper()
	out := make([]expectations.Fence, 0, len(calls))
	for _, c := range calls {
		if !c.fenced || c.hasTerm {
			t.Errorf("%s: a call with fenced=%v, term set=%v; want a fence and no term", what, c.fenced, c.hasTerm)
		}
		out = append(out, c.fence)
	}
	return out
}

// TestFencedGate: behind a FencedGate the sync's fence reaches every
// store call that commits for the member, the takeover check (quorum list
// and ReconcileReservations) runs once per key and epoch, and the report
// names the fence.
func TestFencedGate(t *testing.T) {
	r := func(owner string, epoch uint64) expectations.Fence {
		return expectations.Fence{Owner: owner, Epoch: epoch}
	}
	tests := []struct {
		name        string
		target      int32
		pods        int
		fences      []expectations.Fence // one sync under each
		wantVerify  []expectations.Fence
		wantCreates bool
		wantDeletes bool
	}{
		{name: "creations carry the fence", target: 3, fences: []expectations.Fence{r("r1", 5)},
			wantVerify: []expectations.Fence{r("r1", 5)}, wantCreates: true},
		{name: "deletions carry the fence", target: 1, pods: 3, fences: []expectations.Fence{r("r1", 5)},
			wantVerify: []expectations.Fence{r("r1", 5)}, wantDeletes: true},
		{name: "same epoch verified once", target: 2, pods: 2, fences: []expectations.Fence{r("r1", 5), r("r1", 5), r("r1", 5)},
			wantVerify: []expectations.Fence{r("r1", 5)}},
		{name: "each new epoch verified again", target: 2, pods: 2,
			fences:     []expectations.Fence{r("r1", 5), r("r1", 6), r("r1", 6), r("r2", 9), r("r2", 9)},
			wantVerify: []expectations.Fence{r("r1", 5), r("r1", 6), r("r2", 9)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := workload(tc.target)
			m := mrsFor(w)
			var objs []client.Object
			for i := range tc.pods {
				objs = append(objs, ownedPod(m, fmt.Sprintf("p%d", i)))
			}
			st := &fenceStore{Memory: expectations.NewMemory(0, nil)}
			gate := &fencedGate{}
			h := newHarness(t, w, hopts{objs: objs, store: st, gate: gate})
			for _, f := range tc.fences {
				gate.set(f)
				if _, err := h.sync(); err != nil {
					t.Fatal(err)
				}
				if got := h.report[len(h.report)-1]; got.Term != f.Epoch || got.Fence != f {
					t.Fatalf("report under %+v: term %d fence %+v, want the epoch and the fence", f, got.Term, got.Fence)
				}
			}
			if got := fences(t, "reconcile", st.reconcile); !slices.Equal(got, tc.wantVerify) {
				t.Errorf("takeover checks under %v, want %v", got, tc.wantVerify)
			}
			last := tc.fences[len(tc.fences)-1]
			for _, c := range []struct {
				what  string
				calls []permitCall
				want  bool
			}{{"ExpectCreations", st.creates, tc.wantCreates}, {"ExpectDeletions", st.deletes, tc.wantDeletes}} {
				got := fences(t, c.what, c.calls)
				if (len(got) > 0) != c.want {
					t.Errorf("%s calls %v, want some: %v", c.what, got, c.want)
				}
				for _, f := range got {
					if f != last {
						t.Errorf("%s under %+v, want %+v", c.what, f, last)
					}
				}
			}
		})
	}
}

// TestPlainGateSendsTheTerm: behind a plain Gate the store sees the term
// and no fence, and the report has no fence.
func TestPlainGateSendsTheTerm(t *testing.T) {
	st := &fenceStore{Memory: expectations.NewMemory(0, nil)}
	h := newHarness(t, workload(1), hopts{store: st, gate: &termGate{term: 4}})
	if _, err := h.sync(); err != nil {
		t.Fatal(err)
	}
	for _, c := range append(st.reconcile, st.creates...) {
		if c.fenced || !c.hasTerm {
			t.Fatalf("a store call with fenced=%v, term set=%v; want the term only", c.fenced, c.hasTerm)
		}
	}
	if len(st.reconcile) != 1 || len(st.creates) != 1 {
		t.Fatalf("%d reconciles, %d creations; want 1 and 1", len(st.reconcile), len(st.creates))
	}
	if got := h.report[len(h.report)-1]; got.Term != 4 || got.Fence != (expectations.Fence{}) {
		t.Fatalf("report term %d fence %+v, want 4 and none", got.Term, got.Fence)
	}
}
