package e2e

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/federation/memberaccess"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// The shared fleet's member ServiceAccount (e2e/fleet registers members with
// memberaccess.Grant under these names).
const (
	fleetMemberSANamespace = "kube-system"
	fleetMemberSAName      = "replicafed-member"
)

// grantDependencies re-grants the fleet's member role with or without the
// dependency rule, as an operator does with the replicafed-member chart's
// propagateDependencies value.
func grantDependencies(t *testing.T, e *env, on bool) {
	t.Helper()
	for _, m := range e.f.Members {
		_, err := memberaccess.Grant(context.Background(), m.Config(), memberaccess.GrantOptions{
			Namespace: fleetMemberSANamespace, ServiceAccount: fleetMemberSAName, ClusterName: m.Name(),
			Role: memberaccess.RoleOptions{CreateNamespaces: true, PropagateDependencies: on},
		})
		if err != nil {
			t.Fatalf("granting the member role (propagateDependencies=%v) in %s: %v", on, m.Name(), err)
		}
	}
}

// A FederatedReplicaSet whose template references a ConfigMap and a Secret
// (env, envFrom and volumes) gets Running pods in members that never had
// the namespace, the ConfigMap or the Secret: replicafed copies them, and no
// pod is created in a member before its copies exist there. The copies go
// away with the FederatedReplicaSet, and the Secret's data appears in no
// replica log.
func TestDependencies(t *testing.T) {
	const name = "deps"
	e := newEnvIn(t, "e2e-dependencies", false)
	grantDependencies(t, e, true)
	t.Cleanup(func() { e.dumpIfFailed(); grantDependencies(t, e, false) })
	ctx := context.Background()

	raw := make([]byte, 16)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	secretValue := "e2e-" + hex.EncodeToString(raw)
	objMeta := func(n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: e.ns, Name: n} }
	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: objMeta("app-config"), Data: map[string]string{"mode": "e2e", "app.conf": "x=1"}},
		&corev1.Secret{ObjectMeta: objMeta("app-secret"), Data: map[string][]byte{"PASSWORD": []byte(secretValue)}},
	} {
		if err := e.f.HubClient.Create(ctx, obj); err != nil {
			t.Fatalf("creating %s in the hub: %v", obj.GetName(), err)
		}
	}

	frs := builder.FRS(e.ns, name).Replicas(3).Label("e2e-app", name).PropagateDependencies().
		PodSpec(corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.k8s.io/pause:3.10",
				Env: []corev1.EnvVar{{Name: "MODE", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}, Key: "mode"}}}},
				EnvFrom: []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-secret"}}}},
				VolumeMounts: []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}, {Name: "secret", MountPath: "/var/secret"}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
				}},
			}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "app-config"}}}},
				{Name: "secret", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "app-secret"}}},
			},
			Tolerations: []corev1.Toleration{testcluster.KwokToleration},
		}).Obj()
	if err := e.f.HubClient.Create(ctx, frs); err != nil {
		t.Fatalf("creating FederatedReplicaSet: %v", err)
	}
	t.Cleanup(func() { e.dumpIfFailed(); e.deleteAndWait(name) })

	want := split{memberA: 1, memberB: 1, memberC: 1}
	e.waitSplit(name, want)
	e.poll("every pod Running and Ready", func(ctx context.Context) (bool, error) {
		for _, m := range allMembers {
			ps, err := e.pods(ctx, m, name)
			if err != nil {
				return false, nil
			}
			if len(ps) != want[m] {
				return false, nil
			}
			for i := range ps {
				if ps[i].Status.Phase != corev1.PodRunning || !podstate.IsReady(&ps[i]) {
					return false, nil
				}
			}
		}
		return true, nil
	})

	// Each member holds marked copies, made before any pod there.
	for _, m := range allMembers {
		mc := e.f.MemberClients[m]
		cm, sec := &corev1.ConfigMap{ObjectMeta: objMeta("app-config")}, &corev1.Secret{ObjectMeta: objMeta("app-secret")}
		for _, obj := range []client.Object{cm, sec} {
			if err := mc.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
				t.Fatalf("%s: copy of %s: %v", m, obj.GetName(), err)
			}
			if !dependencies.IsCopy(obj) || obj.GetAnnotations()[v1alpha1.AnnotationDependencyOf] != name {
				t.Errorf("%s: %s not marked as replicafed's copy for %s: %v %v", m, obj.GetName(), name, obj.GetLabels(), obj.GetAnnotations())
			}
		}
		if cm.Data["mode"] != "e2e" || string(sec.Data["PASSWORD"]) != secretValue {
			t.Errorf("%s: copies differ from the hub: %v", m, cm.Data)
		}
		ps, err := e.pods(ctx, m, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range ps {
			for _, obj := range []client.Object{cm, sec} {
				created := obj.GetCreationTimestamp()
				if p.CreationTimestamp.Before(&created) {
					t.Errorf("%s: pod %s created at %s, before its dependency %s (%s)", m, p.Name,
						p.CreationTimestamp, obj.GetName(), created)
				}
			}
		}
	}
	e.poll("DependenciesPropagated condition True", func(context.Context) (bool, error) {
		c := meta.FindStatusCondition(e.getFRS(name).Status.Conditions, v1alpha1.ConditionDependenciesPropagated)
		return c != nil && c.Status == metav1.ConditionTrue, nil
	})

	e.deleteAndWait(name)
	e.poll("copies removed from every member", func(ctx context.Context) (bool, error) {
		for _, m := range allMembers {
			for _, obj := range []client.Object{&corev1.ConfigMap{ObjectMeta: objMeta("app-config")}, &corev1.Secret{ObjectMeta: objMeta("app-secret")}} {
				err := e.f.MemberClients[m].Get(ctx, client.ObjectKeyFromObject(obj), obj)
				if !apierrors.IsNotFound(err) {
					return false, nil
				}
			}
		}
		return true, nil
	})
	// The hub's own objects stay.
	if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: "app-secret"}, &corev1.Secret{}); err != nil {
		t.Errorf("hub Secret: %v", err)
	}
	for _, r := range e.f.Replicas {
		if hit, err := fileContains(r.LogPath, secretValue); err != nil || hit {
			t.Errorf("replica %s log: Secret data found=%v (err %v)", r.ID, hit, err)
		}
	}
}

// fileContains reports whether the file at path contains s.
func fileContains(path, s string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("opening %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), s) {
			return true, nil
		}
	}
	return false, sc.Err()
}
