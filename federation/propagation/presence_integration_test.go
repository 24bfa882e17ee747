package propagation_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/propagation"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

type oneWorkload struct {
	mu sync.Mutex
	w  *engine.Workload
}

func (o *oneWorkload) Workload(k fedref.MemberObject) (*engine.Workload, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.w == nil || o.w.Key != k {
		return nil, false
	}
	cp := *o.w
	return &cp, true
}

// The member engine, checking with Presence against a real member, creates
// no pod while a required dependency is missing (the MemberReplicaSet says
// what it waits for), and creates them once the object appears, whoever
// made it. Optional references are not waited for.
func TestEngineWaitsForDependencies(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real control plane")
	}
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatalf("finding the control plane binaries (run `make tools`): %v", err)
	}
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	c := testcluster.Start(t, testcluster.Options{Name: member, CRDs: memberCRDs, BinDir: bin})
	s := kubescheme.Must()
	cl, err := client.New(c.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	mc, err := cluster.New(c.Config, func(o *cluster.Options) { o.Scheme = s })
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = mc.Start(ctx) }()
	key := fedref.MemberObject{Cluster: member, Namespace: "default", Name: "web"}
	lbls := map[string]string{"app": "web"}
	tmpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: lbls}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "c", Image: "img", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}},
		}}},
		TerminationGracePeriodSeconds: ptr.To[int64](0),
	}}
	src := &oneWorkload{w: &engine.Workload{
		Key: key, Target: 2, Selector: &metav1.LabelSelector{MatchLabels: lbls}, Template: tmpl,
		Hub:          v1alpha1.HubReference{Namespace: "default", Name: "web", UID: "hub-web"},
		Dependencies: dependencies.Required(dependencies.Of(&tmpl.Spec)),
	}}
	mgr := worker.NewManager(worker.Options{Store: expectations.NewMemory(0, nil), Source: src,
		Dependencies: func(cl cluster.Cluster) engine.DependencyChecker {
			return propagation.Presence{Reader: cl.GetAPIReader()}
		}})
	if err := mgr.Engage(ctx, member, mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); mgr.Stop() })
	mgr.Enqueue(key)

	e := &env{t: t}
	mrs := &v1alpha1.MemberReplicaSet{}
	e.eventually("MemberReplicaSet waiting for ConfigMap/settings", func() (bool, string) {
		if err := cl.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, mrs); err != nil {
			return false, err.Error()
		}
		cond := replicastatus.FindCondition(mrs.Status.Conditions, engine.ConditionWaitingForDependencies)
		return cond != nil && cond.Reason == engine.ReasonDependenciesMissing && strings.Contains(cond.Message, "ConfigMap/settings") &&
			!strings.Contains(cond.Message, "Secret/extra"), fmt.Sprintf("%+v", mrs.Status.Conditions)
	})
	pods := func() int {
		var l corev1.PodList
		if err := cl.List(ctx, &l, client.InNamespace("default"), client.MatchingLabels(lbls)); err != nil {
			t.Fatal(err)
		}
		return len(l.Items)
	}
	if n := pods(); n != 0 {
		t.Fatalf("%d pods created while ConfigMap/settings is missing", n)
	}

	// The member's own ConfigMap will do: the engine checks existence only.
	if err := cl.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}); err != nil {
		t.Fatal(err)
	}
	e.eventually("pods created once the ConfigMap exists", func() (bool, string) {
		if err := cl.Get(ctx, types.NamespacedName{Namespace: "default", Name: "web"}, mrs); err != nil {
			return false, err.Error()
		}
		n := pods()
		return n == 2 && replicastatus.FindCondition(mrs.Status.Conditions, engine.ConditionWaitingForDependencies) == nil,
			fmt.Sprintf("pods %d conditions %+v", n, mrs.Status.Conditions)
	})
}
