package dependencies

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Object is one of the four kinds of dependency: *corev1.ConfigMap,
// *corev1.Secret, *corev1.ServiceAccount or *corev1.PersistentVolumeClaim.
type Object interface {
	metav1.Object
	runtime.Object
}

// Key names an object of one kind, without the Optional flag of a Ref.
type Key struct {
	Kind Kind
	Name string
}

// String returns "Kind/name", the form used in messages.
func (k Key) String() string { return string(k.Kind) + "/" + k.Name }

// Key returns r without its Optional flag.
func (r Ref) Key() Key { return Key{Kind: r.Kind, Name: r.Name} }

// String returns "Kind/name".
func (r Ref) String() string { return r.Key().String() }

// Kinds lists every kind, in the order Of sorts them.
var Kinds = []Kind{ConfigMap, PersistentVolumeClaim, Secret, ServiceAccount}

// NewObject returns an empty object of kind k, or nil for an unknown kind.
func NewObject(k Kind) Object {
	switch k {
	case ConfigMap:
		return &corev1.ConfigMap{}
	case Secret:
		return &corev1.Secret{}
	case ServiceAccount:
		return &corev1.ServiceAccount{}
	case PersistentVolumeClaim:
		return &corev1.PersistentVolumeClaim{}
	}
	return nil
}

// IsCopy reports whether obj carries replicafed's copy mark. Only such
// objects are ever changed or deleted in a member.
func IsCopy(obj metav1.Object) bool {
	return obj.GetLabels()[v1alpha1.LabelDependency] == "true"
}

// Owners returns the FederatedReplicaSet names a copy is kept for, sorted,
// without empty or repeated names.
func Owners(obj metav1.Object) []string {
	return normalize(strings.Split(obj.GetAnnotations()[v1alpha1.AnnotationDependencyOf], ","))
}

// FormatOwners is the AnnotationDependencyOf value for names.
func FormatOwners(names []string) string { return strings.Join(normalize(names), ",") }

func normalize(names []string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if n = strings.TrimSpace(n); n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// skippedAnnotations are hub annotations a copy never carries: the
// last-applied configuration holds the whole object (a Secret's data in
// clear text) and means nothing in the member; the claim annotations record
// the hub's binding and provisioning, which the member does for itself.
var skippedAnnotations = map[string]bool{
	corev1.LastAppliedConfigAnnotation:              true,
	"pv.kubernetes.io/bind-completed":               true,
	"pv.kubernetes.io/bound-by-controller":          true,
	"volume.beta.kubernetes.io/storage-provisioner": true,
	"volume.kubernetes.io/storage-provisioner":      true,
	"volume.kubernetes.io/selected-node":            true,
	v1alpha1.AnnotationDependencyOf:                 true,
}

// ErrNotCopyable marks a hub object that must not be copied to a member.
var ErrNotCopyable = errors.New("not copyable")

// Copy returns the object replicafed writes in a member for hub, kept for
// owners: the same namespace, name, labels and annotations (less the ones
// in skippedAnnotations), the copy mark and the owners, and the content that
// means the same in another cluster:
//
//   - ConfigMap: data, binaryData, immutable.
//   - Secret: type, data, immutable. A service account token Secret is
//     refused (ErrNotCopyable): its token is only valid in the hub.
//   - ServiceAccount: automountServiceAccountToken and imagePullSecrets
//     (the pull Secrets themselves are copied only if the template names
//     them); not its token Secrets.
//   - PersistentVolumeClaim: accessModes, resources, storageClassName,
//     volumeMode, volumeAttributesClassName and selector; the member binds
//     or provisions its own volume (no volumeName, no dataSource).
func Copy(hub Object, owners []string) (Object, error) {
	meta := metav1.ObjectMeta{
		Namespace:   hub.GetNamespace(),
		Name:        hub.GetName(),
		Labels:      maps.Clone(hub.GetLabels()),
		Annotations: map[string]string{},
	}
	if meta.Labels == nil {
		meta.Labels = map[string]string{}
	}
	meta.Labels[v1alpha1.LabelDependency] = "true"
	for k, v := range hub.GetAnnotations() {
		if !skippedAnnotations[k] {
			meta.Annotations[k] = v
		}
	}
	meta.Annotations[v1alpha1.AnnotationDependencyOf] = FormatOwners(owners)
	switch h := hub.(type) {
	case *corev1.ConfigMap:
		return &corev1.ConfigMap{ObjectMeta: meta, Data: maps.Clone(h.Data), BinaryData: cloneBytes(h.BinaryData),
			Immutable: cloneBool(h.Immutable)}, nil
	case *corev1.Secret:
		if h.Type == corev1.SecretTypeServiceAccountToken {
			return nil, fmt.Errorf("a service account token of the hub (secret %s): %w", h.Name, ErrNotCopyable)
		}
		return &corev1.Secret{ObjectMeta: meta, Type: h.Type, Data: cloneBytes(h.Data), Immutable: cloneBool(h.Immutable)}, nil
	case *corev1.ServiceAccount:
		return &corev1.ServiceAccount{ObjectMeta: meta, AutomountServiceAccountToken: cloneBool(h.AutomountServiceAccountToken),
			ImagePullSecrets: slices.Clone(h.ImagePullSecrets)}, nil
	case *corev1.PersistentVolumeClaim:
		return &corev1.PersistentVolumeClaim{ObjectMeta: meta, Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:               slices.Clone(h.Spec.AccessModes),
			Resources:                 *h.Spec.Resources.DeepCopy(),
			StorageClassName:          cloneString(h.Spec.StorageClassName),
			VolumeMode:                h.Spec.VolumeMode,
			VolumeAttributesClassName: cloneString(h.Spec.VolumeAttributesClassName),
			Selector:                  h.Spec.Selector.DeepCopy(),
		}}, nil
	}
	return nil, fmt.Errorf("%T: %w", hub, ErrNotCopyable)
}

// Change says how a member's copy must change to match the desired one.
type Change int

// Changes, from none to replacing the object.
const (
	// Unchanged: the copy matches.
	Unchanged Change = iota
	// Update: write the merged object.
	Update
	// Recreate: the difference is in a field the API server does not let
	// change (immutable data, a Secret's type): delete and create.
	Recreate
)

// Merge returns member with want's labels, annotations and content, and
// how it changed. member is not modified. A PersistentVolumeClaim's spec is
// left as the member has it (it cannot change after creation, bar growing
// its request, which is left to the member's operators); only its labels and
// annotations follow the hub.
func Merge(member, want Object) (Object, Change) {
	out := member.DeepCopyObject().(Object)
	change := Unchanged
	if !equality.Semantic.DeepEqual(nonNil(member.GetLabels()), nonNil(want.GetLabels())) ||
		!equality.Semantic.DeepEqual(ownAnnotations(member.GetAnnotations()), ownAnnotations(want.GetAnnotations())) {
		out.SetLabels(maps.Clone(want.GetLabels()))
		ann := maps.Clone(want.GetAnnotations())
		if ann == nil {
			ann = map[string]string{}
		}
		for k, v := range member.GetAnnotations() {
			if memberAnnotation(k) {
				ann[k] = v
			}
		}
		out.SetAnnotations(ann)
		change = Update
	}
	content := func(same bool, immutable *bool, apply func()) {
		if same {
			return
		}
		apply()
		if immutable != nil && *immutable {
			change = Recreate
		} else if change == Unchanged {
			change = Update
		}
	}
	switch m := out.(type) {
	case *corev1.ConfigMap:
		w := want.(*corev1.ConfigMap)
		content(equality.Semantic.DeepEqual(nonNil(m.Data), nonNil(w.Data)) &&
			equality.Semantic.DeepEqual(nonNilBytes(m.BinaryData), nonNilBytes(w.BinaryData)) &&
			boolValue(m.Immutable) == boolValue(w.Immutable),
			m.Immutable, func() { m.Data, m.BinaryData, m.Immutable = w.Data, w.BinaryData, w.Immutable })
	case *corev1.Secret:
		w := want.(*corev1.Secret)
		if m.Type != w.Type && !(m.Type == "" && w.Type == corev1.SecretTypeOpaque) && !(w.Type == "" && m.Type == corev1.SecretTypeOpaque) {
			m.Type = w.Type
			change = Recreate
		}
		content(equality.Semantic.DeepEqual(nonNilBytes(m.Data), nonNilBytes(w.Data)) && boolValue(m.Immutable) == boolValue(w.Immutable),
			m.Immutable, func() { m.Data, m.Immutable = w.Data, w.Immutable })
	case *corev1.ServiceAccount:
		w := want.(*corev1.ServiceAccount)
		content(equality.Semantic.DeepEqual(m.AutomountServiceAccountToken, w.AutomountServiceAccountToken) &&
			equality.Semantic.DeepEqual(nonNilRefs(m.ImagePullSecrets), nonNilRefs(w.ImagePullSecrets)),
			nil, func() {
				m.AutomountServiceAccountToken, m.ImagePullSecrets = w.AutomountServiceAccountToken, w.ImagePullSecrets
			})
	}
	return out, change
}

// Release returns member without replicafed's marks, for an object left
// in place (its last FederatedReplicaSet was deleted with orphan
// propagation): the member's operators own it from then on.
func Release(member Object) Object {
	out := member.DeepCopyObject().(Object)
	lbls := maps.Clone(out.GetLabels())
	delete(lbls, v1alpha1.LabelDependency)
	out.SetLabels(lbls)
	ann := maps.Clone(out.GetAnnotations())
	delete(ann, v1alpha1.AnnotationDependencyOf)
	out.SetAnnotations(ann)
	return out
}

// memberAnnotation reports whether key is one the member sets on its own
// copy (a claim's binding) or one a copy never takes from the hub: such
// keys are kept as the member has them and never compared.
func memberAnnotation(key string) bool {
	return skippedAnnotations[key] && key != v1alpha1.AnnotationDependencyOf
}

// ownAnnotations returns the annotations replicafed keeps in line with the
// hub: all but the member's own.
func ownAnnotations(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !memberAnnotation(k) {
			out[k] = v
		}
	}
	return out
}

func nonNil(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func nonNilBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return map[string][]byte{}
	}
	return m
}

func nonNilRefs(r []corev1.LocalObjectReference) []corev1.LocalObjectReference {
	if r == nil {
		return []corev1.LocalObjectReference{}
	}
	return r
}

func boolValue(p *bool) bool { return p != nil && *p }

func cloneBool(p *bool) *bool {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneString(p *string) *string {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func cloneBytes(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = slices.Clone(v)
	}
	return out
}
