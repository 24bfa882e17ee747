package dependencies

import (
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func hubMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: "shop", Name: name, UID: "hub-uid", ResourceVersion: "42", Generation: 3,
		CreationTimestamp: metav1.Now(), Finalizers: []string{"kubernetes.io/pvc-protection"},
		OwnerReferences: []metav1.OwnerReference{{Name: "x"}},
		Labels:          map[string]string{"app": "web"},
		Annotations: map[string]string{
			"note": "kept", corev1.LastAppliedConfigAnnotation: `{"data":{"password":"hunter2"}}`,
			"pv.kubernetes.io/bind-completed": "yes", v1alpha1.AnnotationDependencyOf: "forged",
		},
	}
}

func wantMeta(name string, owners string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Namespace: "shop", Name: name,
		Labels:      map[string]string{"app": "web", v1alpha1.LabelDependency: "true"},
		Annotations: map[string]string{"note": "kept", v1alpha1.AnnotationDependencyOf: owners},
	}
}

// kindOf returns the kind of obj, the inverse of NewObject; false for
// anything but the four kinds.
func kindOf(obj Object) (Kind, bool) {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return ConfigMap, true
	case *corev1.Secret:
		return Secret, true
	case *corev1.ServiceAccount:
		return ServiceAccount, true
	case *corev1.PersistentVolumeClaim:
		return PersistentVolumeClaim, true
	}
	return "", false
}

func TestCopy(t *testing.T) {
	cases := []struct {
		name string
		hub  Object
		want Object
	}{
		{"configmap", &corev1.ConfigMap{ObjectMeta: hubMeta("conf"), Data: map[string]string{"k": "v"},
			BinaryData: map[string][]byte{"b": {1}}, Immutable: ptr.To(true)},
			&corev1.ConfigMap{ObjectMeta: wantMeta("conf", "a,b"), Data: map[string]string{"k": "v"},
				BinaryData: map[string][]byte{"b": {1}}, Immutable: ptr.To(true)}},
		{"secret", &corev1.Secret{ObjectMeta: hubMeta("db"), Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("x")}},
			&corev1.Secret{ObjectMeta: wantMeta("db", "a,b"), Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("x")}}},
		{"service account, without its token secrets", &corev1.ServiceAccount{ObjectMeta: hubMeta("runner"),
			AutomountServiceAccountToken: ptr.To(false), Secrets: []corev1.ObjectReference{{Name: "runner-token"}},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}},
			&corev1.ServiceAccount{ObjectMeta: wantMeta("runner", "a,b"), AutomountServiceAccountToken: ptr.To(false),
				ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}}}},
		{"claim, without the hub's binding", &corev1.PersistentVolumeClaim{ObjectMeta: hubMeta("data"),
			Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: ptr.To("fast"),
				Resources:  corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				VolumeName: "pv-123", DataSource: &corev1.TypedLocalObjectReference{Kind: "VolumeSnapshot", Name: "s"},
			},
			Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound}},
			&corev1.PersistentVolumeClaim{ObjectMeta: wantMeta("data", "a,b"), Spec: corev1.PersistentVolumeClaimSpec{
				AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteMany}, StorageClassName: ptr.To("fast"),
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
			}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Copy(c.hub, []string{"b", "a", "b", ""})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Copy (-want +got):\n%s", diff)
			}
			if k, ok := kindOf(got); !ok || NewObject(k) == nil || reflect.TypeOf(NewObject(k)) != reflect.TypeOf(got) {
				t.Errorf("kindOf/NewObject disagree for %T", got)
			}
			if !IsCopy(got) || !slices.Equal(Owners(got), []string{"a", "b"}) {
				t.Errorf("copy mark or owners wrong: %v %v", got.GetLabels(), Owners(got))
			}
		})
	}
}

func TestCopyRefuses(t *testing.T) {
	_, err := Copy(&corev1.Secret{ObjectMeta: hubMeta("tok"), Type: corev1.SecretTypeServiceAccountToken}, []string{"a"})
	if !errors.Is(err, ErrNotCopyable) {
		t.Errorf("service account token copied: %v", err)
	}
	if _, err := Copy(&corev1.Pod{}, nil); !errors.Is(err, ErrNotCopyable) {
		t.Errorf("pod copied: %v", err)
	}
}

func TestCopyDoesNotAlias(t *testing.T) {
	hub := &corev1.Secret{ObjectMeta: hubMeta("db"), Data: map[string][]byte{"k": []byte("v")}}
	got, _ := Copy(hub, []string{"a"})
	got.(*corev1.Secret).Data["k"][0] = 'X'
	got.GetLabels()["app"] = "changed"
	if string(hub.Data["k"]) != "v" || hub.Labels["app"] != "web" {
		t.Error("Copy shares maps or slices with the hub object")
	}
}

func TestOwners(t *testing.T) {
	for _, c := range []struct {
		annotation string
		want       []string
	}{{"", []string{}}, {"web", []string{"web"}}, {"web, api,web,,", []string{"api", "web"}}} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{v1alpha1.AnnotationDependencyOf: c.annotation}}}
		if got := Owners(obj); !slices.Equal(got, c.want) {
			t.Errorf("Owners(%q) = %q, want %q", c.annotation, got, c.want)
		}
	}
	if got := FormatOwners([]string{"web", "api", "web"}); got != "api,web" {
		t.Errorf("FormatOwners = %q", got)
	}
	if IsCopy(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1alpha1.LabelDependency: "false"}}}) {
		t.Error("IsCopy true without the mark")
	}
}

func memberCopy(obj Object) Object {
	obj.SetUID("member-uid")
	obj.SetResourceVersion("7")
	return obj
}

func TestMerge(t *testing.T) {
	desired := func() *corev1.ConfigMap {
		w, _ := Copy(&corev1.ConfigMap{ObjectMeta: hubMeta("conf"), Data: map[string]string{"k": "v"}}, []string{"a"})
		return w.(*corev1.ConfigMap)
	}
	secret := func(typ corev1.SecretType, data string, immutable bool) *corev1.Secret {
		w, _ := Copy(&corev1.Secret{ObjectMeta: hubMeta("db"), Type: typ, Data: map[string][]byte{"k": []byte(data)},
			Immutable: ptr.To(immutable)}, []string{"a"})
		return w.(*corev1.Secret)
	}
	cases := []struct {
		name         string
		member, want Object
		change       Change
		check        func(t *testing.T, out Object)
	}{
		{"same", memberCopy(desired()), desired(), Unchanged, nil},
		{"data changed", memberCopy(func() Object { m := desired(); m.Data["k"] = "old"; return m }()), desired(), Update,
			func(t *testing.T, out Object) {
				if cm := out.(*corev1.ConfigMap); cm.Data["k"] != "v" || cm.ResourceVersion != "7" || cm.UID != "member-uid" {
					t.Errorf("merged %+v", cm)
				}
			}},
		{"owner added", memberCopy(desired()), func() Object {
			w := desired()
			w.Annotations[v1alpha1.AnnotationDependencyOf] = "a,b"
			return w
		}(), Update, func(t *testing.T, out Object) {
			if !slices.Equal(Owners(out), []string{"a", "b"}) {
				t.Errorf("owners %v", Owners(out))
			}
		}},
		{"member's own annotations kept and not compared", memberCopy(func() Object {
			m := desired()
			m.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
			return m
		}()), desired(), Unchanged, nil},
		{"hub label removed", memberCopy(func() Object { m := desired(); m.Labels["old"] = "x"; return m }()), desired(), Update,
			func(t *testing.T, out Object) {
				if _, ok := out.GetLabels()["old"]; ok {
					t.Error("stale label kept")
				}
			}},
		{"immutable data changed", memberCopy(secret("", "old", true)), secret("", "new", true), Recreate, nil},
		{"secret type changed", memberCopy(secret(corev1.SecretTypeOpaque, "v", false)), secret(corev1.SecretTypeBasicAuth, "v", false), Recreate, nil},
		{"empty type is Opaque", memberCopy(secret(corev1.SecretTypeOpaque, "v", false)), secret("", "v", false), Unchanged, nil},
		{"claim spec is the member's", memberCopy(&corev1.PersistentVolumeClaim{ObjectMeta: wantMeta("data", "a"),
			Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "member-pv"}}),
			&corev1.PersistentVolumeClaim{ObjectMeta: wantMeta("data", "a"), Spec: corev1.PersistentVolumeClaimSpec{StorageClassName: ptr.To("x")}},
			Unchanged, nil},
		{"service account pull secrets", memberCopy(&corev1.ServiceAccount{ObjectMeta: wantMeta("sa", "a")}),
			&corev1.ServiceAccount{ObjectMeta: wantMeta("sa", "a"), ImagePullSecrets: []corev1.LocalObjectReference{{Name: "r"}}}, Update, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := c.member.DeepCopyObject()
			out, change := Merge(c.member, c.want)
			if change != c.change {
				t.Errorf("change = %v, want %v", change, c.change)
			}
			if diff := cmp.Diff(before, c.member); diff != "" {
				t.Errorf("Merge modified its input (-before +after):\n%s", diff)
			}
			if c.check != nil {
				c.check(t, out)
			}
			if change != Unchanged {
				if _, again := Merge(out, c.want); again != Unchanged {
					t.Errorf("merged object still differs: %v", again)
				}
			}
		})
	}
}

func TestRelease(t *testing.T) {
	w, _ := Copy(&corev1.ConfigMap{ObjectMeta: hubMeta("conf")}, []string{"a"})
	out := Release(w)
	if IsCopy(out) || len(Owners(out)) != 0 || out.GetLabels()["app"] != "web" || out.GetAnnotations()["note"] != "kept" {
		t.Errorf("released %v %v", out.GetLabels(), out.GetAnnotations())
	}
	if !IsCopy(w) {
		t.Error("Release modified its input")
	}
}
