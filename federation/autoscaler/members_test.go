package autoscaler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/fakecluster"
)

// recordingCache counts, by kind, what is asked of a member cache (in a
// real one, the first Get, List or GetInformer of a kind starts its
// informer).
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

func (r *recordingCache) asked() map[string]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[string]int{}
	for k, v := range r.kinds {
		out[k] = v
	}
	return out
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

// splitCluster is a member whose cache and API reader are different
// stores, so a test sees which one a read went to.
type splitCluster struct {
	cluster.Cluster
	cache  *recordingCache
	reader client.Reader
}

func (s splitCluster) GetCache() cache.Cache       { return s.cache }
func (s splitCluster) GetAPIReader() client.Reader { return s.reader }

func webPod(name, ns string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "x"}}}}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return out
}

// TestPodsOfMemberWithoutPodCache: a member's pods come from its cache,
// unless they are not cached here: then from its API server, same
// namespace and selector, and the cache is not asked for pods at all.
func TestPodsOfMemberWithoutPodCache(t *testing.T) {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	web := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name       string
		podsCached func(string) bool
		want       []string
		cacheAsked int
	}{
		{"hook unset: the cache", nil, []string{"cached-0"}, 1},
		{"cached: the cache", func(string) bool { return true }, []string{"cached-0"}, 1},
		{"not cached: the API server", func(m string) bool { return m != "a" }, []string{"live-0", "live-1"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cached := fake.NewClientBuilder().WithScheme(s).WithObjects(webPod("cached-0", "shop", web)).Build()
			live := fake.NewClientBuilder().WithScheme(s).WithObjects(
				webPod("live-0", "shop", web), webPod("live-1", "shop", web),
				webPod("other-ns", "elsewhere", web), webPod("other-app", "shop", map[string]string{"app": "api"}),
			).Build()
			rec := &recordingCache{Cache: fakecluster.New(cached).GetCache(), kinds: map[string]int{}}
			cms := &ClusterMembers{Engaged: engaged{"a": splitCluster{Cluster: fakecluster.New(cached), cache: rec, reader: live}}, PodsCached: tc.podsCached}
			m, ok := cms.Member("a")
			if !ok {
				t.Fatal("member a not found")
			}
			pods, err := m.Pods(context.Background(), "shop", labels.SelectorFromSet(web))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, podNames(pods)); diff != "" {
				t.Errorf("pods (-want +got):\n%s", diff)
			}
			if got := rec.asked()["*v1.PodList"]; got != tc.cacheAsked {
				t.Errorf("pod lists from the cache = %d, want %d", got, tc.cacheAsked)
			}
		})
	}
}

// TestPodsOfMemberWithoutPodCacheOnAPIServer: on a real API server and a
// started member cluster, the pods of a member whose pods are not cached
// are read live (a pod created a moment ago is there, with no wait for an
// informer) and the member cache is never asked for pods.
func TestPodsOfMemberWithoutPodCacheOnAPIServer(t *testing.T) {
	tc := hub.Cluster(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cluster.New(tc.Config, func(o *cluster.Options) { o.Scheme = s })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = cl.Start(ctx) }()
	c := cl.GetClient()
	// A namespace of its own on the shared API server, whatever ran before.
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "uncached-pods-"}}
	if err := c.Create(ctx, nsObj); err != nil {
		t.Fatal(err)
	}
	ns := nsObj.Name
	web := map[string]string{"app": "web"}
	for _, p := range []*corev1.Pod{webPod("web-0", ns, web), webPod("web-1", ns, web), webPod("api-0", ns, map[string]string{"app": "api"})} {
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recordingCache{Cache: cl.GetCache(), kinds: map[string]int{}}
	cms := &ClusterMembers{Engaged: engaged{"a": splitCluster{Cluster: cl, cache: rec, reader: cl.GetAPIReader()}},
		PodsCached: func(string) bool { return false }}
	m, _ := cms.Member("a")
	pods, err := m.Pods(ctx, ns, labels.SelectorFromSet(web))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"web-0", "web-1"}, podNames(pods)); diff != "" {
		t.Errorf("pods (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{}, rec.asked()); diff != "" {
		t.Errorf("asked of the member cache (-want +got):\n%s", diff)
	}
}
