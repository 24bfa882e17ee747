package capacity

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// TestTracker runs the tracker on a real API server's informers (one
// cluster for both parts: starting one is the slow part).
func TestTracker(t *testing.T) {
	tc := testcluster.Start(t, testcluster.Options{Name: "capacity"})
	t.Run("follows a member", func(t *testing.T) { followsAMember(t, tc) })
	t.Run("forgets an ended engagement", func(t *testing.T) { forgetsEndedEngagement(t, tc) })
	t.Run("usage-fed member", func(t *testing.T) { usageFedMember(t, tc) })
}

// followsAMember feeds the counters through creates, binds, finishes,
// deletes and node changes, and checks each estimate against the list-based
// one over the same objects.
func followsAMember(t *testing.T, tc *testcluster.Cluster) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(tc.Config, func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = cl.Start(ctx) }()
	tr := NewTracker()
	if err := tr.Engage(ctx, "m", cl); err != nil {
		t.Fatal(err)
	}
	c := cl.GetClient()
	// Its own namespace: "default" is created by the API server shortly
	// after it starts, not necessarily before this runs.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capacity"}}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		n := node(fmt.Sprintf("n%d", i), "4", "16Gi", 20)
		if i == 2 {
			n.Labels["zone"] = "b"
		}
		if err := c.Create(ctx, &n); err != nil {
			t.Fatal(err)
		}
	}
	var pods []*corev1.Pod
	for i := range 12 {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "capacity", Name: fmt.Sprintf("p%d", i)},
			Spec: corev1.PodSpec{
				NodeName: fmt.Sprintf("n%d", i%4), // n3 does not exist (yet)
				Containers: []corev1.Container{{Name: "c", Image: "x", Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("1Gi")},
				}}},
			},
		}
		if i%5 == 0 {
			p.Spec.NodeName = "" // not bound
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		pods = append(pods, p)
	}
	templates := []*corev1.PodTemplateSpec{
		template("500m", "1Gi", func(s *corev1.PodSpec) {
			// The API server taints new nodes not-ready until a node
			// controller says otherwise; this template does not care.
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		}),
		template("1", "", func(s *corev1.PodSpec) {
			s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			s.NodeSelector = map[string]string{"zone": "b"}
		}),
		template("100m", ""),
	}
	// agree waits until the cache shows the writes made so far (seen) and
	// the counters then give what the lists give. Both read the same
	// informers, so without the first condition they agree at once on a
	// cache that has not seen the writes yet.
	agree := func(what string, seen func(nodes []corev1.Node, pods []corev1.Pod) bool) {
		t.Helper()
		var last string
		deadline := time.Now().Add(60 * time.Second)
		for {
			last = ""
			nodes := &corev1.NodeList{}
			podList := &corev1.PodList{}
			if err := c.List(ctx, nodes); err != nil {
				t.Fatal(err)
			}
			if err := c.List(ctx, podList); err != nil {
				t.Fatal(err)
			}
			if !seen(nodes.Items, podList.Items) {
				last = fmt.Sprintf(" the cache has %d nodes and %d pods, not yet the writes;", len(nodes.Items), len(podList.Items))
			}
			for i, tmpl := range templates {
				want := Estimate(nodes.Items, podList.Items, tmpl)
				got, ok := tr.Free(ctx, "m", tmpl)
				if !ok || got != want {
					last += fmt.Sprintf(" template %d: counters %d (ok %v), lists %d;", i, got, ok, want)
				}
			}
			if last == "" {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: counters never agreed with the lists:%s", what, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	agree("after creates", func(nodes []corev1.Node, pods []corev1.Pod) bool { return len(nodes) == 3 && len(pods) == 12 })

	// A pod finishes, one is deleted, a node is relabelled and one appears
	// for the pods already bound to it.
	pods1Name := pods[1].Name
	done := pods[1].DeepCopy()
	done.Status.Phase = corev1.PodSucceeded
	if err := c.Status().Update(ctx, done); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, pods[2]); err != nil {
		t.Fatal(err)
	}
	n0 := &corev1.Node{}
	if err := c.Get(ctx, client.ObjectKey{Name: "n0"}, n0); err != nil {
		t.Fatal(err)
	}
	n0.Labels["zone"] = "b"
	if err := c.Update(ctx, n0); err != nil {
		t.Fatal(err)
	}
	n3 := node("n3", "2", "4Gi", 5)
	if err := c.Create(ctx, &n3); err != nil {
		t.Fatal(err)
	}
	agree("after changes", func(nodes []corev1.Node, pods []corev1.Pod) bool {
		relabelled, finished, live := false, false, 0
		for _, n := range nodes {
			relabelled = relabelled || (n.Name == "n0" && n.Labels["zone"] == "b")
		}
		for _, p := range pods {
			finished = finished || (p.Name == pods1Name && p.Status.Phase == corev1.PodSucceeded)
			// A bound pod's delete is graceful: it stays, marked, with no
			// kubelet here to finish it.
			if p.DeletionTimestamp == nil {
				live++
			}
		}
		return len(nodes) == 4 && live == 11 && relabelled && finished
	})

	if _, ok := tr.Free(ctx, "other", templates[0]); ok {
		t.Fatal("a member never engaged has a known capacity")
	}
	if s, ok := tr.Summary("m"); !ok || s.Nodes != 4 {
		t.Fatalf("Summary = %+v, %v; want 4 nodes", s, ok)
	}
}

// forgetsEndedEngagement checks a member's counters go with its
// engagement, and that a re-engagement replaces them.
func forgetsEndedEngagement(t *testing.T, tc *testcluster.Cluster) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	tr := NewTracker()
	start := func(ctx context.Context) {
		cl, err := cluster.New(tc.Config, func(o *cluster.Options) { o.Scheme = scheme })
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = cl.Start(ctx) }()
		if err := tr.Engage(ctx, "m", cl); err != nil {
			t.Fatal(err)
		}
	}
	first, endFirst := context.WithCancel(context.Background())
	start(first)
	second, endSecond := context.WithCancel(context.Background())
	defer endSecond()
	start(second)
	endFirst() // the replaced engagement ends after the new one began
	tmpl := template("", "")
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := tr.Free(second, "m", tmpl); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the second engagement never served an estimate")
		}
		time.Sleep(100 * time.Millisecond)
	}
	endSecond()
	deadline = time.Now().Add(30 * time.Second)
	for {
		if _, ok := tr.Free(context.Background(), "m", tmpl); !ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("counters outlived the member's engagement")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// recordingCache is a member cache that records which kinds were asked of
// it (an informer starts on the first Get, List or GetInformer of a kind).
type recordingCache struct {
	cache.Cache
	mu    sync.Mutex
	kinds map[string]int
}

func (r *recordingCache) record(obj any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.kinds[fmt.Sprintf("%T", obj)]++
}

func (r *recordingCache) asked(obj any) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.kinds[fmt.Sprintf("%T", obj)]
}

func (r *recordingCache) GetInformer(ctx context.Context, obj client.Object, o ...cache.InformerGetOption) (cache.Informer, error) {
	r.record(obj)
	return r.Cache.GetInformer(ctx, obj, o...)
}

func (r *recordingCache) Get(ctx context.Context, k client.ObjectKey, obj client.Object, o ...client.GetOption) error {
	r.record(obj)
	return r.Cache.Get(ctx, k, obj, o...)
}

func (r *recordingCache) List(ctx context.Context, l client.ObjectList, o ...client.ListOption) error {
	r.record(l)
	return r.Cache.List(ctx, l, o...)
}

// recordingCluster is a started member cluster whose cache records.
type recordingCluster struct {
	cluster.Cluster
	cache *recordingCache
}

func (r recordingCluster) GetCache() cache.Cache { return r.cache }

// startMember starts a member cluster on tc until ctx ends, its cache
// recording what is asked of it.
func startMember(t *testing.T, ctx context.Context, tc *testcluster.Cluster) recordingCluster {
	t.Helper()
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(tc.Config, func(o *cluster.Options) { o.Scheme = scheme })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cl.Start(ctx) }()
	return recordingCluster{Cluster: cl, cache: &recordingCache{Cache: cl.GetCache(), kinds: map[string]int{}}}
}

// eventually polls cond every 50 ms for up to a generous bound.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 60 s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// usageFedFromAPI returns the member's nodes, read from its API server,
// and counters fed them and u.
func usageFedFromAPI(t *testing.T, ctx context.Context, member cluster.Cluster, u Usage) (*corev1.NodeList, *Counters) {
	t.Helper()
	nodes := &corev1.NodeList{}
	if err := member.GetAPIReader().List(ctx, nodes); err != nil {
		t.Fatal(err)
	}
	c := NewCounters()
	for i := range nodes.Items {
		c.NodeHandler().OnAdd(&nodes.Items[i], true)
	}
	if err := c.SetUsage(u); err != nil {
		t.Fatal(err)
	}
	return nodes, c
}

// usageFedMember: a member engaged by EngageNodes is estimated from its
// nodes and its published usage, never asks for its pods, and switches
// to and from pod-fed counting when engaged the other way.
func usageFedMember(t *testing.T, tc *testcluster.Cluster) {
	tr := NewTracker()
	// Generous: a re-engagement's handler syncs from the informer's store,
	// fast unless the machine is loaded.
	tr.SyncTimeout = 30 * time.Second
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := startMember(t, ctx, tc)
	nodesEngaged, endNodes := context.WithCancel(ctx)
	if err := tr.EngageNodes(nodesEngaged, "m", member); err != nil {
		t.Fatal(err)
	}
	tmpl := template("1", "")
	eventually(t, "the node informer syncs", func() bool {
		tr.mu.RLock()
		defer tr.mu.RUnlock()
		return tr.members["m"].hasSynced()
	})
	if _, ok := tr.Free(ctx, "m", tmpl); ok {
		t.Fatal("Free answered for a usage-fed member before any usage was set")
	}
	if _, ok := tr.Summary("m"); ok {
		t.Fatal("Summary answered for a usage-fed member before any usage was set")
	}
	if _, ok := tr.Usage("m"); ok {
		t.Fatal("a usage-fed member has a usage to publish")
	}
	u := Usage{
		Nodes:   map[string]NodeUsage{"n0": {Pods: 2, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3")}}},
		Pending: NodeUsage{Pods: 1, Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}},
	}
	if err := tr.SetUsage("m", u); err != nil {
		t.Fatal(err)
	}
	nodes, want := usageFedFromAPI(t, ctx, member, u)
	if got, ok := tr.Free(ctx, "m", tmpl); !ok || got != want.Estimate(tmpl) {
		t.Fatalf("Free = %d, %v; want %d, true", got, ok, want.Estimate(tmpl))
	}
	if s, ok := tr.Summary("m"); !ok || s.Nodes != int32(len(nodes.Items)) {
		t.Fatalf("Summary = %+v, %v; want %d nodes", s, ok, len(nodes.Items))
	}
	if err := tr.SetUsage("m", Usage{Pending: NodeUsage{Pods: -1}}); err == nil {
		t.Fatal("SetUsage took a negative pod count")
	}
	if n := member.cache.asked(&corev1.Pod{}) + member.cache.asked(&corev1.PodList{}); n != 0 {
		t.Fatalf("a usage-fed engagement asked the member cache for pods %d times", n)
	}

	// Gaining the member: counted from its pods, published from them.
	podsEngaged, endPods := context.WithCancel(ctx)
	defer endPods()
	if err := tr.Engage(podsEngaged, "m", member); err != nil {
		t.Fatal(err)
	}
	endNodes()
	eventually(t, "the pod-fed engagement has a usage to publish", func() bool { _, ok := tr.Usage("m"); return ok })
	pods := &corev1.PodList{}
	if err := member.GetAPIReader().List(ctx, pods); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod-fed counters see the member's pods", func() bool {
		got, ok := tr.Free(ctx, "m", tmpl)
		return ok && got == Estimate(nodes.Items, pods.Items, tmpl)
	})

	// Losing it again: the last recorded usage serves at once.
	again, endAgain := context.WithCancel(ctx)
	if err := tr.EngageNodes(again, "m", member); err != nil {
		t.Fatal(err)
	}
	endPods()
	if got, ok := tr.Free(ctx, "m", tmpl); !ok || got != want.Estimate(tmpl) {
		t.Fatalf("Free after losing the member = %d, %v; want %d from the recorded usage", got, ok, want.Estimate(tmpl))
	}
	endAgain()
	eventually(t, "the ended engagement is forgotten", func() bool { _, ok := tr.Summary("m"); return !ok })
}
