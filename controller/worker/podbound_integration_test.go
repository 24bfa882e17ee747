package worker_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

// readCounting counts the workload reads of each key: a report made after
// the count moved comes from a sync that read the workload after that.
type readCounting struct {
	*testworkload.Source
	reads sync.Map // fedref.MemberObject -> *atomic.Int64
}

func (r *readCounting) counter(k fedref.MemberObject) *atomic.Int64 {
	c, _ := r.reads.LoadOrStore(k, &atomic.Int64{})
	return c.(*atomic.Int64)
}

func (r *readCounting) Workload(k fedref.MemberObject) (*engine.Workload, bool) {
	r.counter(k).Add(1)
	return r.Source.Workload(k)
}

// reportLog keeps each key's reports with the source's read count at the
// time of the report.
type reportLog struct {
	src *readCounting
	mu  sync.Mutex
	m   map[fedref.MemberObject][]loggedReport
}

type loggedReport struct {
	st    engine.MemberStatus
	reads int64
}

func (l *reportLog) Report(_ context.Context, k fedref.MemberObject, st engine.MemberStatus) {
	reads := l.src.counter(k).Load()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[k] = append(l.m[k], loggedReport{st: st, reads: reads})
}

// incompleteAfter returns a PodCacheIncomplete report of k made by a sync
// that read the workload after the read count was `after`.
func (l *reportLog) incompleteAfter(k fedref.MemberObject, after int64) (engine.MemberStatus, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.m[k] {
		if r.reads > after && r.st.ReplicaFailure != nil && r.st.ReplicaFailure.Reason == engine.ReasonPodCacheIncomplete {
			return r.st, true
		}
	}
	return engine.MemberStatus{}, false
}

// A member with more pods than its cache may hold is degraded, not
// followed: the cache stops at the bound, the worker says why, and a
// raised target creates nothing on the partial view. Once the extra pods
// are gone the member is complete again and converges.
func TestIntegrationPodCacheBound(t *testing.T) {
	const max = 5
	src := &readCounting{Source: testworkload.NewSource()}
	log := &reportLog{src: src, m: map[fedref.MemberObject][]loggedReport{}}
	// A cluster of its own: no other test's pods count against the bound.
	e := startEnv(t, envOpts{ownCluster: true, maxCachedPods: max, source: src, sink: log})
	e.src = src.Source
	ctx := context.Background()

	e.set("web", 2)
	e.converged("web", 2)
	if err := e.mgr.PodCacheIncomplete(member); err != nil {
		t.Fatalf("cache incomplete with 2 of at most %d pods: %v", max, err)
	}

	// Four pods replicafed does not own: 6 in all, one more than the bound.
	var foreign []*corev1.Pod
	for i := range 4 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: fmt.Sprintf("other-%d", i), Labels: map[string]string{"app": "other"}},
			Spec: testworkload.PodTemplate("other").Spec}
		if err := e.cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		foreign = append(foreign, p)
	}
	e.eventually("cache reported incomplete", 60*time.Second, func() (bool, string) {
		err := e.mgr.PodCacheIncomplete(member)
		return err != nil, fmt.Sprint(err)
	})

	creates := e.podCreates.Load()
	k := e.key("web")
	readsAtSet := src.counter(k).Load()
	e.set("web", 4)
	var st engine.MemberStatus
	e.eventually("a sync of the raised target reports the incomplete cache", 60*time.Second, func() (bool, string) {
		var ok bool
		st, ok = log.incompleteAfter(k, readsAtSet)
		return ok, "no such report yet"
	})
	if st.Target != 2 {
		t.Errorf("reported target %d: the MemberReplicaSet was rewritten on a partial view", st.Target)
	}
	if n := e.podCreates.Load(); n != creates {
		t.Errorf("%d pods created while the cache was incomplete", n-creates)
	}
	if pods := e.pods("web"); len(pods) != 2 {
		t.Errorf("%d web pods, want 2 while the cache is incomplete", len(pods))
	}
	_, mrs := e.owned("web")
	if mrs == nil || mrs.Spec.Replicas != 2 {
		t.Errorf("MemberReplicaSet changed while the cache was incomplete: %+v", mrs)
	}

	for _, p := range foreign {
		if err := e.cl.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	e.eventually("cache complete again", 60*time.Second, func() (bool, string) {
		err := e.mgr.PodCacheIncomplete(member)
		return err == nil, fmt.Sprint(err)
	})
	e.converged("web", 4)
	if err := e.cl.Get(ctx, types.NamespacedName{Namespace: e.ns, Name: "web"}, mrs); err != nil {
		t.Fatal(err)
	}
}
