package frsmetrics

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
)

func newFRS(ns, name string, spec *int32, rows ...v1alpha1.ClusterStatus) *v1alpha1.FederatedReplicaSet {
	b := builder.FRS(ns, name).UID(types.UID(ns + "-" + name)).NoReplicas().ClusterStatus(rows...)
	if spec != nil {
		b.Replicas(*spec)
	}
	return b.Obj()
}

// render writes samples as "family{labels} value" lines, sorted.
func render(samples []Sample) []string {
	var out []string
	for _, s := range samples {
		out = append(out, fmt.Sprintf("%s{%s} %v", s.Name, strings.Join(s.Labels, ","), s.Value))
	}
	slices.Sort(out)
	return out
}

func TestSamples(t *testing.T) {
	all := func(string) bool { return true }
	rowA := v1alpha1.ClusterStatus{Name: "a", Target: 3, Replicas: 3, ReadyReplicas: 2, AvailableReplicas: 1}
	rowB := v1alpha1.ClusterStatus{Name: "b", Target: 2, Replicas: 4, ReadyReplicas: 4, AvailableReplicas: 4}
	for _, tc := range []struct {
		name       string
		frs        *v1alpha1.FederatedReplicaSet
		targets    map[string]int32
		registered func(string) bool
		perMember  bool
		want       []string
	}{{
		name:    "summary: totals only",
		frs:     newFRS("shop", "web", ptr.To[int32](5), rowA, rowB),
		targets: map[string]int32{"a": 3, "b": 2}, registered: all,
		want: []string{
			"replicafed_frs_available_replicas{shop,web} 5",
			"replicafed_frs_ready_replicas{shop,web} 6",
			"replicafed_frs_replicas{shop,web} 7",
			"replicafed_frs_spec_replicas{shop,web} 5",
			"replicafed_frs_target_replicas{shop,web} 5",
		},
	}, {
		name:    "members: a row per member",
		frs:     newFRS("shop", "web", ptr.To[int32](5), rowA, rowB),
		targets: map[string]int32{"a": 3, "b": 2}, registered: all, perMember: true,
		want: []string{
			"replicafed_frs_available_replicas{shop,web} 5",
			"replicafed_frs_member_available_replicas{shop,web,a} 1",
			"replicafed_frs_member_available_replicas{shop,web,b} 4",
			"replicafed_frs_member_ready_replicas{shop,web,a} 2",
			"replicafed_frs_member_ready_replicas{shop,web,b} 4",
			"replicafed_frs_member_replicas{shop,web,a} 3",
			"replicafed_frs_member_replicas{shop,web,b} 4",
			"replicafed_frs_member_target_replicas{shop,web,a} 3",
			"replicafed_frs_member_target_replicas{shop,web,b} 2",
			"replicafed_frs_ready_replicas{shop,web} 6",
			"replicafed_frs_replicas{shop,web} 7",
			"replicafed_frs_spec_replicas{shop,web} 5",
			"replicafed_frs_target_replicas{shop,web} 5",
		},
	}, {
		// The committed target is newer than the status row of c (not
		// reported yet): c is shown with its target and no pods.
		name:    "members: planned member without a status row",
		frs:     newFRS("shop", "web", ptr.To[int32](4), rowA),
		targets: map[string]int32{"a": 3, "c": 1}, registered: all, perMember: true,
		want: []string{
			"replicafed_frs_available_replicas{shop,web} 1",
			"replicafed_frs_member_available_replicas{shop,web,a} 1",
			"replicafed_frs_member_available_replicas{shop,web,c} 0",
			"replicafed_frs_member_ready_replicas{shop,web,a} 2",
			"replicafed_frs_member_ready_replicas{shop,web,c} 0",
			"replicafed_frs_member_replicas{shop,web,a} 3",
			"replicafed_frs_member_replicas{shop,web,c} 0",
			"replicafed_frs_member_target_replicas{shop,web,a} 3",
			"replicafed_frs_member_target_replicas{shop,web,c} 1",
			"replicafed_frs_ready_replicas{shop,web} 2",
			"replicafed_frs_replicas{shop,web} 3",
			"replicafed_frs_spec_replicas{shop,web} 4",
			"replicafed_frs_target_replicas{shop,web} 4",
		},
	}, {
		// b left the registry: its rows go at once, and its target no
		// longer counts as planned, although status and raft still hold it.
		name:    "members: unregistered member dropped",
		frs:     newFRS("shop", "web", ptr.To[int32](5), rowA, rowB),
		targets: map[string]int32{"a": 3, "b": 2}, registered: func(c string) bool { return c == "a" }, perMember: true,
		want: []string{
			"replicafed_frs_available_replicas{shop,web} 5",
			"replicafed_frs_member_available_replicas{shop,web,a} 1",
			"replicafed_frs_member_ready_replicas{shop,web,a} 2",
			"replicafed_frs_member_replicas{shop,web,a} 3",
			"replicafed_frs_member_target_replicas{shop,web,a} 3",
			"replicafed_frs_ready_replicas{shop,web} 6",
			"replicafed_frs_replicas{shop,web} 7",
			"replicafed_frs_spec_replicas{shop,web} 5",
			"replicafed_frs_target_replicas{shop,web} 3",
		},
	}, {
		name:    "new FederatedReplicaSet: default spec, nothing planned",
		frs:     newFRS("shop", "new", nil),
		targets: nil, registered: all, perMember: true,
		want: []string{
			"replicafed_frs_available_replicas{shop,new} 0",
			"replicafed_frs_ready_replicas{shop,new} 0",
			"replicafed_frs_replicas{shop,new} 0",
			"replicafed_frs_spec_replicas{shop,new} 1",
			"replicafed_frs_target_replicas{shop,new} 0",
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := render(Samples(tc.frs, tc.targets, tc.registered, tc.perMember))
			if !slices.Equal(got, tc.want) {
				t.Errorf("got\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}

type fakeTargets map[string]map[string]int32

func (f fakeTargets) Targets(frs fedref.FRS) (map[string]int32, int64, bool) {
	t, ok := f[frs.Namespace+"/"+frs.Name+"/"+frs.UID]
	return t, 1, ok
}

type fakeLeader struct{ leading bool }

func (l *fakeLeader) Leading() (context.Context, uint64, bool) {
	return context.Background(), 7, l.leading
}

func registered(names ...string) func(context.Context) ([]registry.Registration, error) {
	return func(context.Context) ([]registry.Registration, error) {
		var out []registry.Registration
		for _, n := range names {
			out = append(out, registry.Registration{Name: n})
		}
		return out, nil
	}
}

// familyCount returns how many series each family of c has.
func familyCount(t *testing.T, c prometheus.Collector) map[string]int {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("registering: %v", err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering: %v", err)
	}
	out := map[string]int{}
	for _, mf := range mfs {
		out[mf.GetName()] = len(mf.Metric)
	}
	return out
}

// TestCollector: the leader serves both FederatedReplicaSets with their
// replicated targets (looked up by UID), a follower nothing, and a deleted
// FederatedReplicaSet's series are gone on the next scrape.
func TestCollector(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	web := newFRS("shop", "web", ptr.To[int32](3),
		v1alpha1.ClusterStatus{Name: "a", Target: 2, Replicas: 2, ReadyReplicas: 2, AvailableReplicas: 2},
		v1alpha1.ClusterStatus{Name: "b", Target: 1, Replicas: 2, ReadyReplicas: 1, AvailableReplicas: 1})
	api := newFRS("shop", "api", ptr.To[int32](1))
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(web, api).Build()
	targets := fakeTargets{
		"shop/web/shop-web": {"a": 2, "b": 1},
		"shop/api/shop-api": {"a": 1},
		"shop/web/old-uid":  {"a": 9}, // an earlier FederatedReplicaSet of the same name
	}
	leader := &fakeLeader{leading: true}
	c := &Collector{Reader: cl, Targets: targets, Registered: registered("a", "b"), Leader: leader, PerMember: true}

	want := `
# HELP replicafed_frs_member_target_replicas A member's committed target for a FederatedReplicaSet (replicated through raft).
# TYPE replicafed_frs_member_target_replicas gauge
replicafed_frs_member_target_replicas{cluster="a",name="api",namespace="shop"} 1
replicafed_frs_member_target_replicas{cluster="a",name="web",namespace="shop"} 2
replicafed_frs_member_target_replicas{cluster="b",name="web",namespace="shop"} 1
# HELP replicafed_frs_member_replicas Active pods of a FederatedReplicaSet in a member (its status row).
# TYPE replicafed_frs_member_replicas gauge
replicafed_frs_member_replicas{cluster="a",name="api",namespace="shop"} 0
replicafed_frs_member_replicas{cluster="a",name="web",namespace="shop"} 2
replicafed_frs_member_replicas{cluster="b",name="web",namespace="shop"} 2
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want), "replicafed_frs_member_target_replicas", "replicafed_frs_member_replicas"); err != nil {
		t.Error(err)
	}
	if got := familyCount(t, c); got["replicafed_frs_spec_replicas"] != 2 || got["replicafed_frs_member_ready_replicas"] != 3 || len(got) != 9 {
		t.Errorf("leader families = %v, want 9 families, 2 FederatedReplicaSets, 3 member rows", got)
	}

	leader.leading = false
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("a follower serves %d series, want 0", n)
	}
	leader.leading = true

	if err := cl.Delete(context.Background(), web); err != nil {
		t.Fatal(err)
	}
	got := familyCount(t, c)
	if got["replicafed_frs_spec_replicas"] != 1 || got["replicafed_frs_member_target_replicas"] != 1 {
		t.Errorf("after deleting web: %v, want api's series only", got)
	}

	summary := &Collector{Reader: cl, Targets: targets, Registered: registered("a", "b"), Leader: leader}
	for name := range familyCount(t, summary) {
		if strings.HasPrefix(name, "replicafed_frs_member_") {
			t.Errorf("summary serves %s", name)
		}
	}
}

// A failed list serves nothing from this collector instead of failing the
// scrape of every other metric.
func TestCollectorListError(t *testing.T) {
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl := fake.NewClientBuilder().WithScheme(scheme).WithObjects(newFRS("shop", "web", ptr.To[int32](1))).
		WithInterceptorFuncs(interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("cache not synced")
		}}).Build()
	c := &Collector{Reader: cl, Targets: fakeTargets{}, Registered: registered("a"), Leader: &fakeLeader{leading: true}, PerMember: true}
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("served %d series after a list error, want 0", n)
	}
	c.Reader = fake.NewClientBuilder().WithScheme(scheme).Build()
	c.Registered = func(context.Context) ([]registry.Registration, error) { return nil, errors.New("registry down") }
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("served %d series after a registry error, want 0", n)
	}
}

// Targets near MaxInt32 add up without wrapping into a negative total.
func TestSamplesSumWithoutOverflow(t *testing.T) {
	all := func(string) bool { return true }
	for _, tc := range []struct {
		name    string
		targets map[string]int32
		want    float64
	}{
		{"two at MaxInt32", map[string]int32{"a": math.MaxInt32, "b": math.MaxInt32}, 2 * math.MaxInt32},
		{"just past MaxInt32", map[string]int32{"a": math.MaxInt32, "b": 1}, math.MaxInt32 + 1},
		{"ordinary", map[string]int32{"a": 2, "b": 3}, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []float64
			for _, s := range Samples(newFRS("shop", "web", nil), tc.targets, all, false) {
				if s.Name == TargetReplicas {
					got = append(got, s.Value)
				}
			}
			if diff := cmp.Diff([]float64{tc.want}, got); diff != "" {
				t.Fatalf("%s (-want +got):\n%s", TargetReplicas, diff)
			}
		})
	}
}
