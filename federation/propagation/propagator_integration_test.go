package propagation_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/federation/propagation"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

const (
	ns     = "shop"
	member = "m1"
)

// targets is an in-memory hub.TargetStore.
type targets struct {
	mu sync.Mutex
	m  map[string]map[string]int32
}

func (t *targets) Targets(frs fedref.FRS) (map[string]int32, int64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tg, ok := t.m[frs.Namespace+"/"+frs.Name]
	return maps.Clone(tg), 1, ok
}

func (t *targets) SetTargets(_ context.Context, frs fedref.FRS, _ int64, tg map[string]int32) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[frs.Namespace+"/"+frs.Name] = maps.Clone(tg)
	return nil
}

func (t *targets) DeleteTargets(_ context.Context, frs fedref.FRS) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.m, frs.Namespace+"/"+frs.Name)
	return nil
}

type members []*registry.Member

func (m members) Members() []*registry.Member { return m }
func (m members) Get(name string) (*registry.Member, bool) {
	for _, x := range m {
		if x.Name == name {
			return x, true
		}
	}
	return nil, false
}

type openGate struct{}

func (openGate) Allowed() (context.Context, bool) { return context.Background(), true }

// pokes records the keys the propagator asks workers to sync.
type pokes struct {
	mu   sync.Mutex
	keys []fedref.MemberObject
}

func (p *pokes) Enqueue(k fedref.MemberObject) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.keys = append(p.keys, k)
}

func (p *pokes) has(k fedref.MemberObject) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.keys, k)
}

// rollouts is a rollout record store kept in memory.
type rollouts struct {
	mu sync.Mutex
	m  map[string]*rollout.Record
}

func (r *rollouts) Rollout(frs fedref.FRS) (*rollout.Record, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec, ok := r.m[frs.Namespace+"/"+frs.Name]
	return rec, ok
}

func (r *rollouts) SetRollout(_ context.Context, frs fedref.FRS, rec *rollout.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m[frs.Namespace+"/"+frs.Name] = rec
	return nil
}

func (r *rollouts) DeleteRollout(_ context.Context, frs fedref.FRS) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.m, frs.Namespace+"/"+frs.Name)
	return nil
}

type env struct {
	t        *testing.T
	hub, mem client.Client
	targets  *targets
	rollouts *rollouts
	pokes    *pokes
	rec      *events.FakeRecorder
	prop     *propagation.Propagator
}

func start(t *testing.T) *env {
	t.Helper()
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatalf("finding the control plane binaries (run `make tools`): %v", err)
	}
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	hubC := testcluster.Start(t, testcluster.Options{Name: "hub", CRDs: hubCRDs, BinDir: bin})
	memC := testcluster.Start(t, testcluster.Options{Name: member, BinDir: bin})
	s := kubescheme.Must()
	e := &env{t: t, targets: &targets{m: map[string]map[string]int32{}}, rollouts: &rollouts{m: map[string]*rollout.Record{}},
		pokes: &pokes{}, rec: events.NewFakeRecorder(100)}
	if e.hub, err = client.New(hubC.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	if e.mem, err = client.New(memC.Config, client.Options{Scheme: s}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mc, err := cluster.New(memC.Config, func(o *cluster.Options) { o.Scheme = s })
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mc.Start(ctx) }()
	mgr, err := manager.New(hubC.Config, manager.Options{Scheme: s, Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	e.prop = propagation.New(propagation.Options{
		Hub: mgr.GetClient(), HubLive: mgr.GetAPIReader(), Members: members{{Name: member, Cluster: mc}},
		Targets: e.targets, Rollouts: e.rollouts, Gate: openGate{}, Poker: e.pokes, Recorder: e.rec,
		Orphaned: func(f *v1alpha1.FederatedReplicaSet) bool {
			return f.Spec.DeletionPolicy == v1alpha1.DeletionPolicyOrphan
		},
		Resync: time.Second, Retry: time.Second,
	})
	if err := e.prop.SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			t.Errorf("hub manager: %v", err)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	e.create(e.hub, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return e
}

func (e *env) create(c client.Client, obj client.Object) {
	e.t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		e.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

// update reads obj from the hub, applies change and writes it back, again
// on a conflict: the propagator writes the FederatedReplicaSet's status
// meanwhile, so a single read-then-update can lose the race.
func (e *env) update(obj client.Object, change func()) {
	e.t.Helper()
	ctx := context.Background()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := e.hub.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return e.hub.Update(ctx, obj)
	})
	if err != nil {
		e.t.Fatalf("updating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s: not reached in 60s; last: %s", what, last)
	}
}

func objMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: name} }

// frs returns a propagating FederatedReplicaSet whose template references
// ConfigMap conf (env), Secret db (envFrom), ServiceAccount runner, claim
// data (volume) and the extra ConfigMaps given (volumes).
func frs(name string, extraConfigMaps ...string) *v1alpha1.FederatedReplicaSet {
	lbls := map[string]string{"app": name}
	spec := corev1.PodSpec{
		ServiceAccountName: "runner",
		Containers: []corev1.Container{{Name: "c", Image: "img",
			Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}, Key: "mode"}}}},
			EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "db"}}}},
		}},
		Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}},
	}
	for _, cm := range extraConfigMaps {
		spec.Volumes = append(spec.Volumes, corev1.Volume{Name: cm, VolumeSource: corev1.VolumeSource{
			ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}})
	}
	return builder.FRS(ns, name).Replicas(2).Selector(&metav1.LabelSelector{MatchLabels: lbls}).TemplateLabels(lbls).
		PodSpec(spec).PropagateDependencies().Obj()
}

// memberObj reads obj from the member; false when absent.
func (e *env) memberObj(obj client.Object) bool {
	err := e.mem.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		e.t.Fatal(err)
	}
	return err == nil
}

func (e *env) condition(name string) *metav1.Condition {
	f := &v1alpha1.FederatedReplicaSet{}
	if err := e.hub.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, f); err != nil {
		return nil
	}
	return meta.FindStatusCondition(f.Status.Conditions, v1alpha1.ConditionDependenciesPropagated)
}

func (e *env) setTargets(name string, tg map[string]int32) {
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: ns, Name: name}, 1, tg)
	// As the hub reconciler does after a commit.
	e.prop.Enqueue(fedref.MemberObject{Cluster: member, Namespace: ns, Name: name})
}

func (e *env) events() []string {
	var out []string
	for {
		select {
		case ev := <-e.rec.Events:
			out = append(out, ev)
		default:
			return out
		}
	}
}

func owners(obj client.Object) string { return obj.GetAnnotations()[v1alpha1.AnnotationDependencyOf] }

// The propagator copies a template's dependencies into the member once the
// member's namespace exists, never touches an object it did not create
// there (condition and event instead), follows hub changes, shares copies
// between FederatedReplicaSets and removes them with the last one, when a
// target drops to zero, and leaves them in place (unmarked) for an
// orphaning deletion.
func TestPropagation(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real control planes")
	}
	e := start(t)
	ctx := context.Background()
	secretValue := "s3cr3t-value-never-logged"
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("conf"), Data: map[string]string{"mode": "v1"}})
	e.create(e.hub, &corev1.Secret{ObjectMeta: objMeta("db"), Data: map[string][]byte{"PASSWORD": []byte(secretValue)}})
	e.create(e.hub, &corev1.ServiceAccount{ObjectMeta: objMeta("runner"), AutomountServiceAccountToken: ptr.To(false)})
	e.create(e.hub, &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}})
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("foreign"), Data: map[string]string{"from": "hub"}})

	// The member lacks the namespace at first: copies wait for it.
	e.create(e.hub, frs("web", "foreign"))
	e.setTargets("web", map[string]int32{member: 2})
	e.create(e.mem, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	foreign := &corev1.ConfigMap{ObjectMeta: objMeta("foreign"), Data: map[string]string{"from": "member"}}
	e.create(e.mem, foreign)
	foreignRV := foreign.ResourceVersion

	e.eventually("copies in the member", func() (bool, string) {
		var missing []string
		for _, obj := range []client.Object{&corev1.ConfigMap{ObjectMeta: objMeta("conf")}, &corev1.Secret{ObjectMeta: objMeta("db")},
			&corev1.ServiceAccount{ObjectMeta: objMeta("runner")}, &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data")}} {
			if !e.memberObj(obj) || !dependencies.IsCopy(obj) || owners(obj) != "web" {
				missing = append(missing, obj.GetName())
			}
		}
		return len(missing) == 0, fmt.Sprintf("missing or unmarked: %v", missing)
	})
	sec := &corev1.Secret{ObjectMeta: objMeta("db")}
	e.memberObj(sec)
	if string(sec.Data["PASSWORD"]) != secretValue {
		t.Errorf("Secret copy data = %q", sec.Data["PASSWORD"])
	}
	if !e.pokes.has(fedref.MemberObject{Cluster: member, Namespace: ns, Name: "web"}) {
		t.Error("member worker not poked after copying")
	}

	// The member's own ConfigMap "foreign" is never overwritten.
	e.eventually("Conflict condition", func() (bool, string) {
		c := e.condition("web")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonDependencyConflict &&
			strings.Contains(c.Message, "ConfigMap/foreign in "+member), fmt.Sprintf("%+v", c)
	})
	// The event follows the condition's write (the propagator emits it once
	// the write returned), so it may come a moment after the condition is
	// seen: collect events until it has.
	var conflictEvents int
	e.eventually("DependencyConflict event", func() (bool, string) {
		for _, ev := range e.events() {
			if strings.Contains(ev, "DependencyConflict") {
				conflictEvents++
			}
			if strings.Contains(ev, secretValue) {
				t.Errorf("event carries Secret data: %s", ev)
			}
		}
		return conflictEvents > 0, "no DependencyConflict event yet"
	})
	if conflictEvents != 1 {
		t.Errorf("%d DependencyConflict events, want 1", conflictEvents)
	}

	// Hub changes reach the copies.
	hubSec := &corev1.Secret{ObjectMeta: objMeta("db")}
	e.update(hubSec, func() { hubSec.Data["PASSWORD"] = []byte("rotated") })
	e.eventually("rotated Secret in the member", func() (bool, string) {
		s := &corev1.Secret{ObjectMeta: objMeta("db")}
		return e.memberObj(s) && string(s.Data["PASSWORD"]) == "rotated", "old data"
	})

	// A second FederatedReplicaSet shares conf.
	e.create(e.hub, frs("api"))
	e.setTargets("api", map[string]int32{member: 1})
	e.eventually("shared copy", func() (bool, string) {
		cm := &corev1.ConfigMap{ObjectMeta: objMeta("conf")}
		return e.memberObj(cm) && owners(cm) == "api,web", owners(cm)
	})
	e.eventually("api propagated", func() (bool, string) {
		c := e.condition("api")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})

	// web stops referencing foreign: its condition recovers.
	web := &v1alpha1.FederatedReplicaSet{ObjectMeta: objMeta("web")}
	e.update(web, func() { web.Spec.Template.Spec.Volumes = web.Spec.Template.Spec.Volumes[:1] })
	e.eventually("web propagated", func() (bool, string) {
		c := e.condition("web")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == v1alpha1.ReasonDependenciesPropagated, fmt.Sprintf("%+v", c)
	})

	// web goes: api references the same four objects, so they stay, kept
	// for api alone.
	if err := e.hub.Delete(ctx, web); err != nil {
		t.Fatal(err)
	}
	e.eventually("web dropped from the shared copies", func() (bool, string) {
		for _, obj := range []client.Object{&corev1.ConfigMap{ObjectMeta: objMeta("conf")}, &corev1.Secret{ObjectMeta: objMeta("db")},
			&corev1.ServiceAccount{ObjectMeta: objMeta("runner")}, &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data")}} {
			if !e.memberObj(obj) || owners(obj) != "api" {
				return false, fmt.Sprintf("%s: %q", obj.GetName(), owners(obj))
			}
		}
		return true, ""
	})

	// api's target drops to zero: the copies go.
	e.setTargets("api", map[string]int32{member: 0})
	e.eventually("copies removed", func() (bool, string) {
		var left []string
		for _, obj := range []client.Object{&corev1.ConfigMap{ObjectMeta: objMeta("conf")}, &corev1.Secret{ObjectMeta: objMeta("db")},
			&corev1.ServiceAccount{ObjectMeta: objMeta("runner")}, &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data")}} {
			if e.memberObj(obj) && obj.GetDeletionTimestamp() == nil {
				left = append(left, obj.GetName())
			}
		}
		return len(left) == 0, fmt.Sprintf("left: %v", left)
	})

	// An orphaning deletion leaves the copies in place, unmarked.
	keep := frs("keep")
	keep.Spec.Template.Spec.Volumes = nil
	keep.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
	keep.Finalizers = []string{"test.replicafed.io/hold"}
	e.create(e.hub, keep)
	e.setTargets("keep", map[string]int32{member: 1})
	e.eventually("keep's copy", func() (bool, string) {
		cm := &corev1.ConfigMap{ObjectMeta: objMeta("conf")}
		return e.memberObj(cm) && owners(cm) == "keep", owners(cm)
	})
	if err := e.hub.Delete(ctx, keep); err != nil {
		t.Fatal(err)
	}
	e.eventually("released copy", func() (bool, string) {
		cm := &corev1.ConfigMap{ObjectMeta: objMeta("conf")}
		return e.memberObj(cm) && !dependencies.IsCopy(cm) && owners(cm) == "" && cm.Data["mode"] == "v1",
			fmt.Sprintf("labels %v annotations %v", cm.Labels, cm.Annotations)
	})
	e.update(keep, func() { keep.Finalizers = nil })

	got := &corev1.ConfigMap{ObjectMeta: objMeta("foreign")}
	if !e.memberObj(got) || got.ResourceVersion != foreignRV || got.Data["from"] != "member" || dependencies.IsCopy(got) {
		t.Errorf("the member's own ConfigMap was changed: rv %s -> %s, data %v, labels %v", foreignRV, got.ResourceVersion, got.Data, got.Labels)
	}
}

// A template names its dependencies by name only and they are read in the
// FederatedReplicaSet's own namespace: a reference written as
// "namespace/name" is refused (never read, never copied, condition and
// event), and a Secret that exists only in another namespace is not found.
func TestCrossNamespaceReferenceRefused(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real control planes")
	}
	e := start(t)
	const other = "vault"
	e.create(e.hub, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: other}})
	e.create(e.hub, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "master"}, Data: map[string][]byte{"k": []byte("v")}})
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("conf"), Data: map[string]string{"mode": "v1"}})
	e.create(e.mem, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})

	f := frs("thief")
	spec := &f.Spec.Template.Spec
	spec.ServiceAccountName = ""
	spec.Volumes = []corev1.Volume{
		{Name: "a", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: other + "/master"}}},
		{Name: "b", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "../" + other + "/master"}}},
		{Name: "c", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "master"}}},
	}
	spec.Containers[0].EnvFrom = nil
	e.create(e.hub, f)
	e.setTargets("thief", map[string]int32{member: 1})

	e.eventually("InvalidReference condition", func() (bool, string) {
		c := e.condition("thief")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == propagation.ReasonDependencyInvalidReference &&
			strings.Contains(c.Message, "Secret/"+other+"/master") && strings.Contains(c.Message, "Secret/../"+other+"/master") &&
			strings.Contains(c.Message, "Secret/master: not found in the hub namespace"), fmt.Sprintf("%+v", c)
	})
	// The same pass copied the valid reference: the refused ones are settled.
	e.eventually("conf copied", func() (bool, string) {
		return e.memberObj(&corev1.ConfigMap{ObjectMeta: objMeta("conf")}), "conf missing"
	})
	var secrets corev1.SecretList
	if err := e.mem.List(context.Background(), &secrets); err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if dependencies.IsCopy(&s) || s.Name == "master" {
			t.Errorf("member holds Secret %s/%s", s.Namespace, s.Name)
		}
	}
	if err := e.mem.Get(context.Background(), types.NamespacedName{Name: other}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
		t.Errorf("member namespace %s: %v, want not found", other, err)
	}
	// The event follows the condition's write: wait for it as for the
	// condition.
	e.eventually("DependencyInvalidReference event", func() (bool, string) {
		for _, ev := range e.events() {
			if strings.Contains(ev, "Dependency"+propagation.ReasonDependencyInvalidReference) {
				return true, ""
			}
		}
		return false, "no DependencyInvalidReference event"
	})
}

// A rolling FederatedReplicaSet's members run pods of every live revision:
// a ConfigMap only the old template names stays in the member while the
// rollout record lists the old revision (old pods run, a rollback creates
// them again), and goes once the old revision leaves the record.
func TestRollingRevisionsKeepTheirDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("needs real control planes")
	}
	e := start(t)
	ctx := context.Background()
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("conf"), Data: map[string]string{"mode": "v1"}})
	e.create(e.hub, &corev1.Secret{ObjectMeta: objMeta("db"), Data: map[string][]byte{"PASSWORD": []byte("x")}})
	e.create(e.hub, &corev1.ServiceAccount{ObjectMeta: objMeta("runner")})
	e.create(e.hub, &corev1.PersistentVolumeClaim{ObjectMeta: objMeta("data"), Spec: corev1.PersistentVolumeClaimSpec{
		AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany},
		Resources:   corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
	}})
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("settings-v1")})
	e.create(e.hub, &corev1.ConfigMap{ObjectMeta: objMeta("settings-v2")})
	e.create(e.mem, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	old := frs("roll", "settings-v1")
	e.create(e.hub, old)
	key := fedref.FRS{Namespace: ns, Name: "roll", UID: string(old.UID)}
	oldRev := rollout.LiveRevision{Name: "roll-v1", Object: "roll", Template: old.Spec.Template}
	_ = e.rollouts.SetRollout(ctx, key, &rollout.Record{Revisions: []rollout.LiveRevision{oldRev}})
	e.setTargets("roll", map[string]int32{member: 2})
	v1 := &corev1.ConfigMap{ObjectMeta: objMeta("settings-v1")}
	e.eventually("settings-v1 copied", func() (bool, string) { return e.memberObj(v1), "absent" })

	// The new template names settings-v2 instead; the record lists both.
	next := frs("roll", "settings-v2")
	cur := &v1alpha1.FederatedReplicaSet{ObjectMeta: objMeta("roll")}
	e.update(cur, func() { cur.Spec.Template = next.Spec.Template })
	newRev := rollout.LiveRevision{Name: "roll-v2", Object: "roll-v2", Labelled: true, Template: next.Spec.Template}
	_ = e.rollouts.SetRollout(ctx, key, &rollout.Record{Revisions: []rollout.LiveRevision{oldRev, newRev}})
	e.setTargets("roll", map[string]int32{member: 2})
	v2 := &corev1.ConfigMap{ObjectMeta: objMeta("settings-v2")}
	e.eventually("settings-v2 copied", func() (bool, string) { return e.memberObj(v2), "absent" })
	if !e.memberObj(&corev1.ConfigMap{ObjectMeta: objMeta("settings-v1")}) {
		t.Fatal("settings-v1 removed from the member while the old revision is live")
	}

	// The old revision retired: its ConfigMap goes.
	_ = e.rollouts.SetRollout(ctx, key, &rollout.Record{Revisions: []rollout.LiveRevision{newRev}})
	e.setTargets("roll", map[string]int32{member: 2})
	e.eventually("settings-v1 removed", func() (bool, string) {
		return !e.memberObj(&corev1.ConfigMap{ObjectMeta: objMeta("settings-v1")}), "still there"
	})
}
