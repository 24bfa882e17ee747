package hub

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/testnet"
)

// silentServer accepts connections and never answers on them: an API server
// that is up for TCP and hung for everything else.
func silentServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(testnet.Host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// reconcileWithin runs one reconcile and fails the test if it has not
// returned within bound (generous: it guards against a hang, it does not
// time anything).
func reconcileWithin(t *testing.T, r *Reconciler, req ctrl.Request, bound time.Duration) ctrl.Result {
	t.Helper()
	type out struct {
		res ctrl.Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		res, err := r.Reconcile(context.Background(), req)
		done <- out{res, err}
	}()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatal(o.err)
		}
		return o.res
	case <-time.After(bound):
		t.Fatalf("reconcile of %s still running after %s: a member that never answers holds it", req, bound)
		return ctrl.Result{}
	}
}

// Issue 24, item 4: a member whose API server accepts connections and never
// answers (its cache never syncs) does not hold the reconciles of other
// FederatedReplicaSets: it is unknown for the pass (its committed target
// held, nothing moved because of it), and later passes do not wait on it.
func TestSilentMemberDoesNotHoldOthers(t *testing.T) {
	webOnA := frs(4, func(f *v1alpha1.FederatedReplicaSet) {
		f.Spec.Placement.Clusters = []v1alpha1.ClusterPreference{{Name: "a"}}
	})
	e := newEnv(t, true, webOnA, healthy("a", "c"), nil, nil)
	cl, err := cluster.New(&rest.Config{Host: silentServer(t)}, func(o *cluster.Options) { o.Scheme = testScheme(t) })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = cl.Start(ctx) }()
	silent := &registry.Member{Name: "c", Cluster: cl}
	e.r.Registry.(fakeMembers)["c"] = silent
	e.r.MemberTimeout = 2 * time.Second // short for the silent member, long for the fake one
	const bound = time.Minute

	// An object on the healthy member only is planned and committed.
	reconcileWithin(t, e.r, req(), bound)
	if tg, _, _ := e.targets.Targets(fedref.FRS{Namespace: "default", Name: "web"}); !cmp.Equal(tg, map[string]int32{"a": 4}) {
		t.Fatalf("targets of web = %v, want a=4", tg)
	}
	if !e.r.stalls.stalled(silent, now) {
		t.Fatal("the silent member is not recorded as stalled")
	}

	// An object with replicas on the silent member: its target there is
	// held, the new replicas go to the healthy member, and the pass does
	// not wait for the silent one.
	api := frs(6)
	api.Name, api.UID = "api", "uid-api"
	if err := e.hub.Create(context.Background(), api); err != nil {
		t.Fatal(err)
	}
	apiRef := fedref.FRS{Namespace: "default", Name: "api"}
	_ = e.targets.SetTargets(context.Background(), apiRef, 2, map[string]int32{"a": 2, "c": 2})
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "api"}, memberStatus(2))
	apiReq := req()
	apiReq.Name = "api"
	res := reconcileWithin(t, e.r, apiReq, bound)
	if tg, gen, _ := e.targets.Targets(apiRef); !cmp.Equal(tg, map[string]int32{"a": 4, "c": 2}) || gen != api.Generation {
		t.Fatalf("targets of api = %v (generation %d), want a=4 c=2 held, for generation %d (result %+v)", tg, gen, api.Generation, res)
	}
	// web's first status is written once its hold has passed, although c
	// never answered.
	e.r.Reports.Report(context.Background(), fedref.MemberObject{Cluster: "a", Namespace: "default", Name: "web"}, memberStatus(2))
	afterFirstHold(t, e.r, req())
	st := get(t, e.hub)
	if st.Status.ObservedGeneration != webOnA.Generation {
		t.Fatalf("web's status observed generation %d, want %d", st.Status.ObservedGeneration, webOnA.Generation)
	}
}

// boundedRead returns what answered in time, stalls what did not, and does
// not read a member again while an abandoned read of it still runs.
func TestBoundedRead(t *testing.T) {
	var s stalls
	fast, slow := &registry.Member{Name: "fast"}, &registry.Member{Name: "slow"}
	release := make(chan struct{})
	returned := make(chan struct{})
	read := func(ctx context.Context, m *registry.Member) string {
		if m == slow {
			defer close(returned)
			<-release // ignores ctx, like a call without a deadline
		}
		return m.Name
	}
	got := boundedRead(context.Background(), &s, []*registry.Member{fast, slow}, 2*time.Second, now, read)
	if diff := cmp.Diff(map[*registry.Member]string{fast: "fast"}, got); diff != "" {
		t.Fatalf("answers (-want +got):\n%s", diff)
	}
	if !s.stalled(slow, now) || s.stalled(fast, now) {
		t.Fatalf("stalled: slow %v fast %v, want slow only", s.stalled(slow, now), s.stalled(fast, now))
	}
	// Past the retry window it stays left out while its read still runs.
	later := now.Add(memberStallRetry + time.Second)
	if !s.stalled(slow, later) {
		t.Fatal("a member with a read still running is read again")
	}
	close(release)
	<-returned
	// The read has returned; its done runs right after: poll for it.
	deadline := time.Now().Add(30 * time.Second)
	for s.stalled(slow, later) {
		if time.Now().After(deadline) {
			t.Fatal("the member stays stalled after its read returned and the window passed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !s.stalled(slow, now) {
		t.Fatal("within the window the member is not stalled")
	}
	s.retain(map[string]bool{"fast": true})
	if s.stalled(slow, now) {
		t.Fatal("a member that left is still stalled")
	}
}

// Deleting an object with replicas on a member that never answers is not
// held by it either: the deletion waits for that member as for an
// unreachable one, and says so.
func TestSilentMemberDoesNotHoldDeletion(t *testing.T) {
	e := newEnv(t, true, frs(2, deleting()), healthy("a", "c"), map[string][]client.Object{"a": {mrs("uid-1")}}, nil)
	cl, err := cluster.New(&rest.Config{Host: silentServer(t)}, func(o *cluster.Options) { o.Scheme = testScheme(t) })
	if err != nil {
		t.Fatal(err)
	}
	e.r.Registry.(fakeMembers)["c"] = &registry.Member{Name: "c", Cluster: cl}
	e.r.MemberTimeout = 2 * time.Second
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 1, "c": 1})
	for range 2 {
		reconcileWithin(t, e.r, req(), time.Minute)
	}
	got := get(t, e.hub)
	if !contains(got.Finalizers, v1alpha1.FinalizerCascade) {
		t.Fatal("finalizer released while a member never answered")
	}
	c := meta.FindStatusCondition(got.Status.Conditions, ConditionDeleting)
	if c == nil || !strings.Contains(c.Message, "unreachable members: c") {
		t.Fatalf("Deleting condition = %+v, want c waited for as unreachable", c)
	}
	if err := e.members["a"].Get(context.Background(), req().NamespacedName, &v1alpha1.MemberReplicaSet{}); !apierrors.IsNotFound(err) {
		t.Fatalf("MemberReplicaSet in the healthy member: %v, want deleted", err)
	}
}
