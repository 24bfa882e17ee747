package kind

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/builder"
)

// TestDependencies joins the members again with `replicafed join
// --propagate-dependencies`, as an operator would, and runs a
// FederatedReplicaSet whose pods read a ConfigMap (env, volume) and a
// Secret (envFrom, volume) that exist only in the hub. Real kubelets start
// the containers only when both exist in the member (a missing one is
// CreateContainerConfigError or a volume that never mounts), so Ready pods
// in both members show the copies came first. The copies are marked as
// replicafed's, go away with the FederatedReplicaSet, and the Secret's
// value is in no replica's log. The members are joined back without the
// grant at the end.
func TestDependencies(t *testing.T) {
	e := newEnv(t, "kind-deps")
	ctx := context.Background()
	e.rejoinAll("--propagate-dependencies")
	t.Cleanup(func() { e.rejoinAll() })

	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secretValue := "kind-e2e-" + hex.EncodeToString(raw)
	objMeta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: e.ns, Name: n} }
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: objMeta("app-config"), Data: map[string]string{"mode": "kind", "app.conf": "x=1"}},
		&corev1.Secret{ObjectMeta: objMeta("app-secret"), Data: map[string][]byte{"PASSWORD": []byte(secretValue)}},
	} {
		if err := e.k.HubClient.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s in the hub: %v", obj.GetName(), err)
		}
	}
	const name = "deps"
	frs := builder.FRS(e.ns, name).Replicas(2).Label("e2e-app", name).PropagateDependencies().
		PodSpec(dependentPod()).Placement(both).Obj()
	if err := e.k.HubClient.Create(ctx, frs); err != nil {
		t.Fatalf("creating FederatedReplicaSet: %v", err)
	}
	t.Cleanup(func() { e.deleteAndWait(name) })
	e.waitSplit(name, split{memberA: 1, memberB: 1})
	e.poll("DependenciesPropagated condition True", func(ctx context.Context) (bool, error) {
		got := &v1alpha1.FederatedReplicaSet{}
		if err := e.k.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), got); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionDependenciesPropagated)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})
	e.checkCopies(ctx, name, secretValue)

	e.deleteAndWait(name)
	e.poll("copies removed from every member", func(ctx context.Context) (bool, error) {
		for _, m := range e.members() {
			for _, obj := range []client.Object{&corev1.ConfigMap{ObjectMeta: objMeta("app-config")}, &corev1.Secret{ObjectMeta: objMeta("app-secret")}} {
				if !apierrors.IsNotFound(e.k.MemberClients[m].Get(ctx, client.ObjectKeyFromObject(obj), obj)) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err := e.k.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "app-secret"}, &corev1.Secret{}); err != nil {
		t.Errorf("the hub's own Secret: %v", err)
	}
	for _, p := range e.replicaPods(ctx) {
		out, err := e.k.Kubectl(ctx, "logs", "-n", fleet.Namespace, p.Name)
		if err != nil {
			t.Errorf("logs of %s: %v", p.Name, err)
		} else if strings.Contains(string(out), secretValue) {
			t.Errorf("%s's log holds the Secret's value", p.Name)
		}
	}
}

// dependentPod is workloadPod reading app-config and app-secret.
func dependentPod() corev1.PodSpec {
	spec := workloadPod()
	c := &spec.Containers[0]
	c.Env = []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "mode"}}}}
	c.EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}}}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "secret", MountPath: "/var/secret"}}
	spec.Volumes = []corev1.Volume{
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
		{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-secret"}}},
	}
	return spec
}

// checkCopies checks each member's pods Ready and its copies marked as
// replicafed's, equal to the hub's and older than every pod there.
func (e *env) checkCopies(ctx context.Context, name, secretValue string) {
	e.t.Helper()
	e.poll("every pod Ready", func(ctx context.Context) (bool, error) {
		for _, m := range e.members() {
			ps, err := e.pods(ctx, m, name)
			if err != nil || len(ps) != 1 || !podstate.IsReady(&ps[0]) {
				return false, nil
			}
		}
		return true, nil
	})
	for _, m := range e.members() {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "app-config"}}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "app-secret"}}
		for _, obj := range []client.Object{cm, sec} {
			if err := e.k.MemberClients[m].Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				e.t.Fatalf("%s: copy of %s: %v", m, obj.GetName(), err)
			}
			if !dependencies.IsCopy(obj) || obj.GetAnnotations()[v1alpha1.AnnotationDependencyOf] != name {
				e.t.Errorf("%s: %s not marked as replicafed's copy for %s: %v %v", m, obj.GetName(), name, obj.GetLabels(), obj.GetAnnotations())
			}
		}
		if cm.Data["mode"] != "kind" || string(sec.Data["PASSWORD"]) != secretValue {
			e.t.Errorf("%s: copies differ from the hub's: %v", m, cm.Data)
		}
		ps, err := e.pods(ctx, m, name)
		if err != nil {
			e.t.Fatal(err)
		}
		for _, p := range ps {
			for _, obj := range []client.Object{cm, sec} {
				if created := obj.GetCreationTimestamp(); p.CreationTimestamp.Before(&created) {
					e.t.Errorf("%s: pod %s created at %s, before its dependency %s (%s)", m, p.Name, p.CreationTimestamp, obj.GetName(), created)
				}
			}
		}
		logf(e.t, "%s: pod Ready with the copies of app-config and app-secret", m)
	}
}

// rejoinAll runs `replicafed join` again for every member with the extra
// flags (none: the default grant).
func (e *env) rejoinAll(extra ...string) {
	e.t.Helper()
	for _, m := range e.members() {
		if err := e.k.Rejoin(context.Background(), m, extra...); err != nil {
			e.t.Fatalf("joining %s again %v: %v", m, extra, err)
		}
	}
}
