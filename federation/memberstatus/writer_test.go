package memberstatus

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/fakecluster"
)

var now = time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)

type members map[string]*registry.Member

func (m members) Get(name string) (*registry.Member, bool) { x, ok := m[name]; return x, ok }

type healthMap map[string]health.State

func (h healthMap) State(c string) (health.State, bool) { s, ok := h[c]; return s, ok }

func TestSync(t *testing.T) {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	frs := func(name string, rows ...v1alpha1.ClusterStatus) *v1alpha1.FederatedReplicaSet {
		return builder.FRS("default", name).ClusterStatus(rows...).Obj()
	}
	managed := map[string]string{LabelManagedBy: managedBy}
	updates := 0
	hub := fake.NewClientBuilder().WithScheme(s).
		WithStatusSubresource(&v1alpha1.MemberCluster{}, &v1alpha1.FederatedReplicaSet{}).
		WithObjects(
			frs("web", v1alpha1.ClusterStatus{Name: "a", Target: 3, Replicas: 3}, v1alpha1.ClusterStatus{Name: "b", Target: 2, Replicas: 1}),
			frs("api", v1alpha1.ClusterStatus{Name: "a", Target: 2, Replicas: 2}),
			frs("old", v1alpha1.ClusterStatus{Name: "a", Target: 0, Replicas: 1}), // draining: pods, no target
			&v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "gone", Labels: managed}},
			&v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "foreign"}},
		).
		WithInterceptorFuncs(interceptor.Funcs{SubResourceUpdate: func(ctx context.Context, c client.Client, sub string, obj client.Object, o ...client.SubResourceUpdateOption) error {
			updates++
			return c.SubResource(sub).Update(ctx, obj, o...)
		}}).Build()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	memberA := fake.NewClientBuilder().WithScheme(s).WithObjects(node).Build()
	versionCalls := 0
	regionOfA := "eu"
	w := &Writer{
		Hub: hub,
		Registered: func(context.Context) ([]registry.Registration, error) {
			return []registry.Registration{
				{Name: "a", Labels: map[string]string{"region": regionOfA}},
				{Name: "b", Taints: []v1alpha1.ClusterTaint{{Key: "maintenance", Effect: v1alpha1.TaintNoExecute}}},
			}, nil
		},
		Members: members{"a": {Name: "a", Cluster: fakecluster.New(memberA)}},
		Health: healthMap{
			// A sub-second part, as the health recorder's clock gives: the
			// API keeps whole seconds, and an unchanged pass must not write.
			"a": {Health: v1alpha1.ClusterHealthy, Since: now.Add(-time.Hour + 300*time.Millisecond)},
			"b": {Health: v1alpha1.ClusterUnreachable, Since: now.Add(-time.Minute), LastError: "dial tcp: connection refused"},
		},
		Problem: func(_ context.Context, c string) string {
			if c == "b" {
				return `kubeconfig Secret fleet/b has no data key "kubeconfig"`
			}
			return ""
		},
		Version: func(context.Context, *registry.Member) (string, error) { versionCalls++; return "v1.36.3", nil },
		Clock:   clocktesting.NewFakeClock(now),
	}
	taintChanges := 0
	w.OnPlacementInputsChanged = func() { taintChanges++ }
	ctx := context.Background()
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	get := func(name string) *v1alpha1.MemberCluster {
		t.Helper()
		mc := &v1alpha1.MemberCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			t.Fatalf("MemberCluster %s: %v", name, err)
		}
		return mc
	}
	a := get("a")
	if a.Status.Health != v1alpha1.ClusterHealthy || a.Status.KubernetesVersion != "v1.36.3" || a.Status.Nodes != 1 ||
		a.Status.FederatedReplicaSets != 2 || a.Status.Pods != 6 || a.Status.Labels["region"] != "eu" || a.Status.Problem != "" {
		t.Errorf("member a status = %+v", a.Status)
	}
	if q := a.Status.Free[corev1.ResourceCPU]; q.Cmp(resource.MustParse("8")) != 0 {
		t.Errorf("member a free cpu = %s, want 8", q.String())
	}
	b := get("b")
	if b.Status.Health != v1alpha1.ClusterUnreachable || b.Status.LastProbeError == "" || b.Status.Problem == "" ||
		b.Status.FederatedReplicaSets != 1 || b.Status.Pods != 1 {
		t.Errorf("member b (broken Secret) status = %+v", b.Status)
	}
	if err := hub.Get(ctx, client.ObjectKey{Name: "gone"}, &v1alpha1.MemberCluster{}); !apierrors.IsNotFound(err) {
		t.Errorf("MemberCluster of an unregistered member: %v, want deleted", err)
	}
	get("foreign") // not ours: kept
	if len(b.Status.Taints) != 1 || b.Status.Taints[0].TimeAdded == nil || !b.Status.Taints[0].TimeAdded.Time.Equal(now) {
		t.Errorf("member b taints = %+v, want one stamped now", b.Status.Taints)
	}
	if taintChanges != 1 {
		t.Errorf("OnPlacementInputsChanged called %d times after the first pass, want 1", taintChanges)
	}

	before := updates
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if updates != before {
		t.Errorf("an unchanged pass wrote %d statuses", updates-before)
	}
	if taintChanges != 1 {
		t.Errorf("an unchanged pass reported a taint change (%d calls)", taintChanges)
	}
	if versionCalls != 1 {
		t.Errorf("version asked %d times in two passes, want 1 (cached)", versionCalls)
	}

	// Relabelling a member's registration is a placement input change.
	regionOfA = "us"
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if taintChanges != 2 {
		t.Errorf("a relabelled member reported %d placement input changes in all, want 2", taintChanges)
	}
	if got := get("a").Status.Labels["region"]; got != "us" {
		t.Errorf("member a labels after relabelling: region=%q, want us", got)
	}
}

func TestStampTaints(t *testing.T) {
	t0 := metav1.NewTime(now.Add(-time.Minute))
	own := metav1.NewTime(now.Add(-time.Hour))
	taints := []v1alpha1.ClusterTaint{
		{Key: "recorded", Effect: v1alpha1.TaintNoExecute},
		{Key: "new", Effect: v1alpha1.TaintNoExecute},
		{Key: "own", Effect: v1alpha1.TaintNoSchedule, TimeAdded: &own},
		{Key: "recorded", Value: "other", Effect: v1alpha1.TaintNoExecute}, // another value: another taint
	}
	recorded := []v1alpha1.ClusterTaint{{Key: "recorded", Effect: v1alpha1.TaintNoExecute, TimeAdded: &t0}}
	got := stampTaints(taints, recorded, now)
	want := []time.Time{t0.Time, now, own.Time, now}
	for i := range got {
		if got[i].TimeAdded == nil || !got[i].TimeAdded.Time.Equal(want[i]) {
			t.Errorf("taint %d (%s) timeAdded = %v, want %v", i, got[i].Key, got[i].TimeAdded, want[i])
		}
	}
	if taints[1].TimeAdded != nil {
		t.Error("stampTaints changed its input")
	}
}

type summaries map[string]capacity.Summary

func (s summaries) Summary(member string) (capacity.Summary, bool) { x, ok := s[member]; return x, ok }

// TestSummaryFromCounters: with counters for a member, its size comes from
// them; a member the counters do not have yet falls back to its cache.
func TestSummaryFromCounters(t *testing.T) {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	hub := fake.NewClientBuilder().WithScheme(s).WithStatusSubresource(&v1alpha1.MemberCluster{}).Build()
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	member := func() *registry.Member {
		return &registry.Member{Cluster: fakecluster.New(fake.NewClientBuilder().WithScheme(s).WithObjects(node.DeepCopy()).Build())}
	}
	a, b := member(), member()
	a.Name, b.Name = "a", "b"
	w := &Writer{
		Hub: hub,
		Registered: func(context.Context) ([]registry.Registration, error) {
			return []registry.Registration{{Name: "a"}, {Name: "b"}}, nil
		},
		Members:  members{"a": a, "b": b},
		Health:   healthMap{},
		Capacity: summaries{"a": {Nodes: 40, Ready: 39}},
		Version:  func(context.Context, *registry.Member) (string, error) { return "v1.36.3", nil },
		Clock:    clocktesting.NewFakeClock(now),
	}
	ctx := context.Background()
	if err := w.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string][2]int32{"a": {40, 39}, "b": {1, 1}} {
		mc := &v1alpha1.MemberCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			t.Fatal(err)
		}
		if mc.Status.Nodes != want[0] || mc.Status.ReadyNodes != want[1] {
			t.Errorf("member %s: nodes %d ready %d, want %d and %d", name, mc.Status.Nodes, mc.Status.ReadyNodes, want[0], want[1])
		}
	}
}

// TestSummaryOfMemberWithoutPodCache: for a member whose pods are not
// cached here, the summary comes from the counters only; without one it
// has none, and the member's pods are never listed (the list would start
// a pod informer in a real member cache).
func TestSummaryOfMemberWithoutPodCache(t *testing.T) {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{
		Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")},
		Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	}}
	fromCache := capacity.Summarize([]corev1.Node{*node}, nil)
	fromCounters := capacity.Summary{Nodes: 40, Ready: 39}
	type result struct {
		Summary    capacity.Summary
		OK         bool
		ListedPods int
	}
	for _, tc := range []struct {
		name       string
		podsCached func(string) bool
		counters   summaries
		want       result
	}{
		{"hook unset: the cache fallback as before", nil, summaries{}, result{fromCache, true, 1}},
		{"cached: the cache fallback", func(string) bool { return true }, summaries{}, result{fromCache, true, 1}},
		{"not cached, counters have it", func(string) bool { return false }, summaries{"a": fromCounters}, result{fromCounters, true, 0}},
		{"not cached, no counters yet: no summary", func(string) bool { return false }, summaries{}, result{}},
		{"another member not cached", func(m string) bool { return m != "b" }, summaries{}, result{fromCache, true, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			listed := 0
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(node.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, l client.ObjectList, o ...client.ListOption) error {
					if _, ok := l.(*corev1.PodList); ok {
						listed++
					}
					return c.List(ctx, l, o...)
				}}).Build()
			w := &Writer{Capacity: tc.counters, PodsCached: tc.podsCached}
			sum, ok := w.summary(context.Background(), &registry.Member{Name: "a", Cluster: fakecluster.New(c)})
			if diff := cmp.Diff(tc.want, result{sum, ok, listed}, quantities); diff != "" {
				t.Errorf("summary (-want +got):\n%s", diff)
			}
		})
	}
}

var quantities = cmp.Options{
	cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 }),
	cmpopts.EquateEmpty(),
}
