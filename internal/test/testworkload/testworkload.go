// Package testworkload builds the workloads tests run on real control planes:
// pause pods that land on kwok nodes and stop at once, as a member engine's
// engine.Workload or as a hub FederatedReplicaSet, and a WorkloadSource a
// test edits.
package testworkload

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/test/builder"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// Image is the container image of every test pod.
const Image = "registry.k8s.io/pause:3.10"

// PodTemplate returns a template of one pause container labelled app=app
// that tolerates the kwok nodes and stops without a grace period.
func PodTemplate(app string) corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			Containers:                    []corev1.Container{{Name: "c", Image: Image}},
			Tolerations:                   []corev1.Toleration{testcluster.KwokToleration},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// Workload returns what the hub wants of key's member: target pods of
// PodTemplate(key.Name), selected by app=key.Name, for the hub object
// key.Namespace/key.Name with UID "hub-<name>".
func Workload(key fedref.MemberObject, target int32) *engine.Workload {
	return &engine.Workload{
		Key: key, Target: target,
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": key.Name}},
		Template: PodTemplate(key.Name),
		Hub:      v1alpha1.HubReference{Namespace: key.Namespace, Name: key.Name, UID: types.UID("hub-" + key.Name)},
	}
}

// FRS returns a FederatedReplicaSet namespace/name of replicas pods of
// PodTemplate(name), selected by app=name.
func FRS(namespace, name string, replicas int32) *v1alpha1.FederatedReplicaSet {
	return builder.FRS(namespace, name).Replicas(replicas).Template(PodTemplate(name)).Obj()
}

// Source is an engine.WorkloadSource a test edits; safe for concurrent use.
type Source struct {
	mu sync.Mutex
	m  map[fedref.MemberObject]*engine.Workload
}

var _ engine.WorkloadSource = (*Source)(nil)

// NewSource returns a Source that wants nothing.
func NewSource() *Source { return &Source{m: map[fedref.MemberObject]*engine.Workload{}} }

// Workload returns a copy of what was last set for k.
func (s *Source) Workload(k fedref.MemberObject) (*engine.Workload, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w, ok := s.m[k]
	if !ok {
		return nil, false
	}
	cp := *w
	return &cp, true
}

// Set makes w what is wanted of k; a nil w means hands off.
func (s *Source) Set(k fedref.MemberObject, w *engine.Workload) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w == nil {
		delete(s.m, k)
		return
	}
	s.m[k] = w
}
