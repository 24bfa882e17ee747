package server

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/raftstore/fsm"
)

// fakeUsageLease owns a set of members and records the publications.
type fakeUsageLease struct {
	mu        sync.Mutex
	owned     []string
	fail      map[string]error
	published []string
}

func (l *fakeUsageLease) Owned() []fsm.MemberEpoch {
	out := make([]fsm.MemberEpoch, 0, len(l.owned))
	for _, m := range l.owned {
		out = append(out, fsm.MemberEpoch{Member: m, Epoch: 1})
	}
	return out
}

func (l *fakeUsageLease) PublishUsage(_ context.Context, member string, usage []byte) error {
	if _, err := capacity.DecodeUsage(usage); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.fail[member]; err != nil {
		return err
	}
	l.published = append(l.published, member)
	return nil
}

// fakeUsages gives a usage of pods per member; a member missing is not
// synced.
type fakeUsages map[string]int64

func (f fakeUsages) Usage(member string) (capacity.Usage, bool) {
	pods, ok := f[member]
	if !ok {
		return capacity.Usage{}, false
	}
	return capacity.Usage{Nodes: map[string]capacity.NodeUsage{"n1": {Pods: pods,
		Requests: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(100*pods, resource.DecimalSI)}}}}, true
}

// The publisher sends the usage of each owned, synced member when it
// changed since its last committed publication, retries a failed one at
// the next tick, and publishes afresh a member owned again.
func TestUsagePublisherPublishesChanges(t *testing.T) {
	lease := &fakeUsageLease{owned: []string{"a", "b", "c"}, fail: map[string]error{}}
	usages := fakeUsages{"a": 1, "b": 2} // c not synced
	p := &usagePublisher{lease: lease, tracker: usages, log: logr.Discard(), last: map[string][]byte{}}
	steps := []struct {
		name   string
		change func()
		want   []string
	}{
		{"first tick: the synced members", func() {}, []string{"a", "b"}},
		{"nothing changed", func() {}, nil},
		{"a changed, c synced", func() { usages["a"], usages["c"] = 3, 0 }, []string{"a", "c"}},
		{"b fails", func() { usages["b"] = 5; lease.fail["b"] = errors.New("leader lost") }, nil},
		{"b retried", func() { delete(lease.fail, "b") }, []string{"b"}},
		{"a no longer owned", func() { lease.owned = []string{"b", "c"} }, nil},
		{"a owned again, same usage", func() { lease.owned = []string{"a", "b", "c"} }, []string{"a"}},
	}
	for _, st := range steps {
		st.change()
		lease.published = nil
		p.publishChanged(context.Background())
		got := lease.published
		slices.Sort(got)
		if diff := cmp.Diff(st.want, got); diff != "" {
			t.Fatalf("%s: published (-want +got):\n%s", st.name, diff)
		}
	}
}
