package expectations

import (
	"context"
	"testing"
)

func TestContextCarriesTermAndFence(t *testing.T) {
	ctx := context.Background()
	if _, ok := FenceFrom(ctx); ok {
		t.Fatal("FenceFrom of a bare context: ok true, want false")
	}
	if _, ok := TermFrom(ctx); ok {
		t.Fatal("TermFrom of a bare context: ok true, want false")
	}
	want := Fence{Owner: "replica-1", Epoch: 7}
	ctx = WithTerm(WithFence(ctx, want), 3)
	if got, ok := FenceFrom(ctx); !ok || got != want {
		t.Fatalf("FenceFrom = %+v, %v; want %+v, true", got, ok, want)
	}
	if got, ok := TermFrom(ctx); !ok || got != 3 {
		t.Fatalf("TermFrom = %d, %v; want 3, true", got, ok)
	}
}
