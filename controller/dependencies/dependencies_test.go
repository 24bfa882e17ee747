package dependencies

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func cm(name string) Ref  { return Ref{Kind: ConfigMap, Name: name} }
func sec(name string) Ref { return Ref{Kind: Secret, Name: name} }
func opt(r Ref) Ref       { r.Optional = true; return r }

func container(env []corev1.EnvVar, envFrom ...corev1.EnvFromSource) corev1.Container {
	return corev1.Container{Name: "c", Image: "img", Env: env, EnvFrom: envFrom}
}

func cmKey(name string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k", Optional: optional}}}
}

func secretKey(name string, optional *bool) corev1.EnvVar {
	return corev1.EnvVar{Name: "Y", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: name}, Key: "k", Optional: optional}}}
}

func vol(src corev1.VolumeSource) corev1.Volume { return corev1.Volume{Name: "v", VolumeSource: src} }

func TestOf(t *testing.T) {
	cases := []struct {
		name string
		spec corev1.PodSpec
		want []Ref
	}{
		{"nothing", corev1.PodSpec{Containers: []corev1.Container{container(nil)}}, nil},
		{"default service account skipped", corev1.PodSpec{ServiceAccountName: "default"}, nil},
		{"service account", corev1.PodSpec{ServiceAccountName: "runner"}, []Ref{{Kind: ServiceAccount, Name: "runner"}}},
		{"deprecated service account field", corev1.PodSpec{DeprecatedServiceAccount: "old"}, []Ref{{Kind: ServiceAccount, Name: "old"}}},
		{"image pull secrets", corev1.PodSpec{ImagePullSecrets: []corev1.LocalObjectReference{{Name: "regcred"}, {Name: ""}}}, []Ref{sec("regcred")}},
		{"env valueFrom", corev1.PodSpec{Containers: []corev1.Container{container([]corev1.EnvVar{
			{Name: "plain", Value: "v"}, cmKey("settings", nil), secretKey("db", ptr.To(false)),
			{Name: "field", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		})}}, []Ref{cm("settings"), sec("db")}},
		{"envFrom", corev1.PodSpec{Containers: []corev1.Container{container(nil,
			corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all-settings"}}},
			corev1.EnvFromSource{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "all-secrets"}, Optional: ptr.To(true)}},
		)}}, []Ref{cm("all-settings"), opt(sec("all-secrets"))}},
		{"init and ephemeral containers", corev1.PodSpec{
			InitContainers:      []corev1.Container{container([]corev1.EnvVar{cmKey("init-cm", nil)})},
			EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Env: []corev1.EnvVar{secretKey("dbg-sec", nil)}}}},
		}, []Ref{cm("init-cm"), sec("dbg-sec")}},
		{"volumes", corev1.PodSpec{Volumes: []corev1.Volume{
			vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}),
			vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "tls", Optional: ptr.To(true)}}),
			vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}),
			vol(corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}),
			vol(corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{Driver: "d", NodePublishSecretRef: &corev1.LocalObjectReference{Name: "csi-cred"}}}),
		}}, []Ref{cm("conf"), {Kind: PersistentVolumeClaim, Name: "data"}, sec("csi-cred"), opt(sec("tls"))}},
		{"projected volume", corev1.PodSpec{Volumes: []corev1.Volume{vol(corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "ca"}}},
			{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "token"}, Optional: ptr.To(true)}},
			{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "t"}},
			{DownwardAPI: &corev1.DownwardAPIProjection{}},
		}}})}}, []Ref{cm("ca"), opt(sec("token"))}},
		{"required wins over optional, each object once", corev1.PodSpec{
			Volumes: []corev1.Volume{vol(corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s", Optional: ptr.To(true)}})},
			Containers: []corev1.Container{
				container([]corev1.EnvVar{secretKey("s", nil), cmKey("c", ptr.To(true))}),
				container([]corev1.EnvVar{cmKey("c", ptr.To(true))}),
			},
			ImagePullSecrets: []corev1.LocalObjectReference{{Name: "s"}},
		}, []Ref{opt(cm("c")), sec("s")}},
		{"same name, different kinds", corev1.PodSpec{
			ServiceAccountName: "app",
			Containers:         []corev1.Container{container([]corev1.EnvVar{cmKey("app", nil), secretKey("app", nil)})},
			Volumes:            []corev1.Volume{vol(corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "app"}})},
		}, []Ref{cm("app"), {Kind: PersistentVolumeClaim, Name: "app"}, sec("app"), {Kind: ServiceAccount, Name: "app"}}},
		{"legacy volume secret refs", corev1.PodSpec{Volumes: []corev1.Volume{
			vol(corev1.VolumeSource{AzureFile: &corev1.AzureFileVolumeSource{SecretName: "az"}}),
			vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{SecretRef: &corev1.LocalObjectReference{Name: "ceph"}}}),
			vol(corev1.VolumeSource{RBD: &corev1.RBDVolumeSource{SecretRef: &corev1.LocalObjectReference{Name: "rbd"}}}),
			vol(corev1.VolumeSource{FlexVolume: &corev1.FlexVolumeSource{SecretRef: &corev1.LocalObjectReference{Name: "flex"}}}),
			vol(corev1.VolumeSource{ISCSI: &corev1.ISCSIVolumeSource{SecretRef: &corev1.LocalObjectReference{Name: "iscsi"}}}),
			vol(corev1.VolumeSource{CephFS: &corev1.CephFSVolumeSource{}}),
		}}, []Ref{sec("az"), sec("ceph"), sec("flex"), sec("iscsi"), sec("rbd")}},
		{"empty names ignored", corev1.PodSpec{
			Volumes:    []corev1.Volume{vol(corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}})},
			Containers: []corev1.Container{container([]corev1.EnvVar{secretKey("", nil)})},
		}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Of(&c.spec)
			if !slices.Equal(got, c.want) {
				t.Errorf("Of =\n %v\nwant\n %v", got, c.want)
			}
		})
	}
}

func TestRequired(t *testing.T) {
	in := []Ref{cm("a"), opt(cm("b")), sec("c"), opt(sec("d"))}
	if got, want := Required(in), []Ref{cm("a"), sec("c")}; !slices.Equal(got, want) {
		t.Errorf("Required = %v, want %v", got, want)
	}
	if got := Required(nil); got != nil {
		t.Errorf("Required(nil) = %v", got)
	}
}

// OfAll merges the references of several revisions' specs: each object
// once, required if any revision requires it.
func TestOfAll(t *testing.T) {
	optional := true
	oldSpec := &corev1.PodSpec{Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings-v1"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: &optional}},
	}}}}
	newSpec := &corev1.PodSpec{ServiceAccountName: "web", Containers: []corev1.Container{{Name: "c", EnvFrom: []corev1.EnvFromSource{
		{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings-v2"}}},
		{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}}},
	}}}}
	want := []Ref{
		{Kind: ConfigMap, Name: "settings-v1"},
		{Kind: ConfigMap, Name: "settings-v2"},
		{Kind: Secret, Name: "extra"},
		{Kind: ServiceAccount, Name: "web"},
	}
	if diff := cmp.Diff(want, OfAll(oldSpec, newSpec)); diff != "" {
		t.Errorf("OfAll (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Of(oldSpec), OfAll(oldSpec)); diff != "" {
		t.Errorf("OfAll of one spec differs from Of (-Of +OfAll):\n%s", diff)
	}
}
