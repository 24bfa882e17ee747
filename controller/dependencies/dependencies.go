// Package dependencies finds the namespaced objects a pod template needs in
// a member cluster before its pods can start there: the ConfigMaps,
// Secrets, ServiceAccounts and PersistentVolumeClaims it names. It is the
// pure part of spec.propagateDependencies: the hub copies what Of returns
// from the FederatedReplicaSet's namespace into each member that runs
// replicas, and the member engine holds pod creation until the required ones
// exist.
//
// Of and Required read templates; Copy, Merge and Release build the objects
// written to members; Desired and Decide say, per member, which copies must
// exist, for which FederatedReplicaSets, and what to do with each name.
// Nothing here talks to an API server (federation/propagation does).
package dependencies

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Kind is the kind of a referenced object (all in the core group, v1).
type Kind string

// Kinds of referenced objects.
const (
	ConfigMap             Kind = "ConfigMap"
	Secret                Kind = "Secret"
	ServiceAccount        Kind = "ServiceAccount"
	PersistentVolumeClaim Kind = "PersistentVolumeClaim"
)

// DefaultServiceAccount exists in every namespace (the service account
// controller creates it), so it is never a dependency to copy.
const DefaultServiceAccount = "default"

// Ref names one object in the template's namespace.
type Ref struct {
	Kind Kind
	Name string
	// Optional is true when every reference to the object is marked
	// optional: pods start without it, so creation need not wait for it.
	Optional bool
}

// Of returns the objects spec references, each once, sorted by kind then
// name. References with an empty name are ignored, as is the default
// ServiceAccount. Secrets of the service account's token are not included:
// the member's token controller provides them.
func Of(spec *corev1.PodSpec) []Ref { return OfAll(spec) }

// OfAll returns the objects any of specs references, each once, as Of
// does: a reference is optional only when it is optional in every spec
// that names it. A rolling FederatedReplicaSet's members run pods of
// several revisions, and each revision's pods need their own references.
func OfAll(specs ...*corev1.PodSpec) []Ref {
	c := collector{seen: map[Key]int{}}
	for _, spec := range specs {
		c.spec(spec)
	}
	slices.SortFunc(c.refs, func(a, b Ref) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
	})
	return c.refs
}

func (c *collector) spec(spec *corev1.PodSpec) {
	sa := spec.ServiceAccountName
	if sa == "" {
		sa = spec.DeprecatedServiceAccount
	}
	if sa != DefaultServiceAccount {
		c.add(ServiceAccount, sa, false)
	}
	for _, s := range spec.ImagePullSecrets {
		// A pod created before its pull secret would start in image pull
		// back-off, so it is waited for like any other dependency.
		c.add(Secret, s.Name, false)
	}
	for i := range spec.Volumes {
		c.volume(&spec.Volumes[i].VolumeSource)
	}
	for i := range spec.InitContainers {
		c.container(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom)
	}
	for i := range spec.Containers {
		c.container(spec.Containers[i].Env, spec.Containers[i].EnvFrom)
	}
	for i := range spec.EphemeralContainers {
		ec := &spec.EphemeralContainers[i].EphemeralContainerCommon
		c.container(ec.Env, ec.EnvFrom)
	}
}

type collector struct {
	refs []Ref
	seen map[Key]int
}

// add records a reference; a required reference makes an optional one
// required.
func (c *collector) add(kind Kind, name string, optional bool) {
	if name == "" {
		return
	}
	k := Key{Kind: kind, Name: name}
	if i, ok := c.seen[k]; ok {
		c.refs[i].Optional = c.refs[i].Optional && optional
		return
	}
	c.seen[k] = len(c.refs)
	c.refs = append(c.refs, Ref{Kind: kind, Name: name, Optional: optional})
}

func isOptional(p *bool) bool { return p != nil && *p }

func (c *collector) container(env []corev1.EnvVar, envFrom []corev1.EnvFromSource) {
	for _, e := range env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			c.add(ConfigMap, r.Name, isOptional(r.Optional))
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			c.add(Secret, r.Name, isOptional(r.Optional))
		}
	}
	for _, e := range envFrom {
		if r := e.ConfigMapRef; r != nil {
			c.add(ConfigMap, r.Name, isOptional(r.Optional))
		}
		if r := e.SecretRef; r != nil {
			c.add(Secret, r.Name, isOptional(r.Optional))
		}
	}
}

func (c *collector) localSecret(r *corev1.LocalObjectReference) {
	if r != nil {
		c.add(Secret, r.Name, false)
	}
}

func (c *collector) volume(v *corev1.VolumeSource) {
	switch {
	case v.ConfigMap != nil:
		c.add(ConfigMap, v.ConfigMap.Name, isOptional(v.ConfigMap.Optional))
	case v.Secret != nil:
		c.add(Secret, v.Secret.SecretName, isOptional(v.Secret.Optional))
	case v.PersistentVolumeClaim != nil:
		c.add(PersistentVolumeClaim, v.PersistentVolumeClaim.ClaimName, false)
	case v.Projected != nil:
		for _, s := range v.Projected.Sources {
			if s.ConfigMap != nil {
				c.add(ConfigMap, s.ConfigMap.Name, isOptional(s.ConfigMap.Optional))
			}
			if s.Secret != nil {
				c.add(Secret, s.Secret.Name, isOptional(s.Secret.Optional))
			}
		}
	case v.CSI != nil:
		c.localSecret(v.CSI.NodePublishSecretRef)
	case v.AzureFile != nil:
		c.add(Secret, v.AzureFile.SecretName, false)
	case v.CephFS != nil:
		c.localSecret(v.CephFS.SecretRef)
	case v.RBD != nil:
		c.localSecret(v.RBD.SecretRef)
	case v.FlexVolume != nil:
		c.localSecret(v.FlexVolume.SecretRef)
	case v.ISCSI != nil:
		c.localSecret(v.ISCSI.SecretRef)
	case v.ScaleIO != nil:
		c.localSecret(v.ScaleIO.SecretRef)
	case v.StorageOS != nil:
		c.localSecret(v.StorageOS.SecretRef)
	case v.Cinder != nil:
		c.localSecret(v.Cinder.SecretRef)
	}
}

// Required returns the references pod creation must wait for.
func Required(refs []Ref) []Ref {
	var out []Ref
	for _, r := range refs {
		if !r.Optional {
			out = append(out, r)
		}
	}
	return out
}

// Scope: a pod template names its ConfigMaps, Secrets, ServiceAccounts and
// claims by name alone (LocalObjectReference and plain name fields; a pod
// spec has no namespace field for them), and they are read and copied only
// in the FederatedReplicaSet's own namespace, under the same name. A name
// that is not an object name ("other-ns/secret", "..", a name with a
// slash or a percent sign) could, in a URL or a cache key, address
// something else: such references are refused (Split), never read.

// CheckName returns an error when name cannot be the name of an object of
// the four kinds (a DNS-1123 subdomain, which every one of them must be).
func CheckName(name string) error {
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		return fmt.Errorf("%q is not an object name (%s); a dependency is referenced by name in the FederatedReplicaSet's own namespace, never in another", name, strings.Join(msgs, "; "))
	}
	return nil
}

// Invalid is a reference refused by Split.
type Invalid struct {
	Ref Ref
	Err error
}

// Split separates the references whose names are object names (valid) from
// the others (invalid), keeping their order.
func Split(refs []Ref) (valid []Ref, invalid []Invalid) {
	for _, r := range refs {
		if err := CheckName(r.Name); err != nil {
			invalid = append(invalid, Invalid{Ref: r, Err: err})
			continue
		}
		valid = append(valid, r)
	}
	return valid, invalid
}
