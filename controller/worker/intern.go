package worker

import (
	"slices"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sharedValues hands out one value for equal keys, so the pods of one
// owner share their labels map, owner references and container requests in
// the member cache instead of holding a copy each. It keeps the values of
// the last 2×limit distinct keys at most: when the current generation is
// full it becomes the old one, and old values still asked for move back.
// Values it forgot stay valid for the pods that hold them; later pods just
// get a new one. Cached objects are never written to, so sharing is safe.
type sharedValues[V any] struct {
	mu       sync.Mutex
	cur, old map[string]V
	limit    int
}

// sharedLimit bounds each table to 2×sharedLimit values: about 1-2 MiB at
// most for values no cached pod holds any more.
const sharedLimit = 1024

func newShared[V any]() *sharedValues[V] {
	return &sharedValues[V]{cur: map[string]V{}, old: map[string]V{}, limit: sharedLimit}
}

// get returns the value stored for key, or stores and returns build().
func (s *sharedValues[V]) get(key string, build func() V) V {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.cur[key]; ok {
		return v
	}
	v, ok := s.old[key]
	if !ok {
		v = build()
	}
	if len(s.cur) >= s.limit {
		s.old, s.cur = s.cur, make(map[string]V, s.limit)
	}
	s.cur[key] = v
	return v
}

var (
	sharedLabels     = newShared[map[string]string]()
	sharedRefs       = newShared[[]metav1.OwnerReference]()
	sharedContainers = newShared[[]corev1.Container]()
)

// intern returns s backed by memory shared with every other interned copy
// of it that is still in use.
func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// labelsOf returns a map equal to m, shared with other objects that have
// the same labels.
func labelsOf(m map[string]string) map[string]string {
	if m == nil {
		return nil
	}
	keys := make([]string, 0, len(m))
	size := 0
	for k, v := range m {
		keys = append(keys, k)
		size += len(k) + len(v) + 2
	}
	slices.Sort(keys)
	var b strings.Builder
	b.Grow(size)
	for _, k := range keys {
		b.WriteString(k)
		b.WriteByte(0)
		b.WriteString(m[k])
		b.WriteByte(0)
	}
	return sharedLabels.get(b.String(), func() map[string]string {
		out := make(map[string]string, len(m))
		for k, v := range m {
			out[intern(k)] = intern(v)
		}
		return out
	})
}

// Shared targets of the owner references' bool pointers.
var (
	sharedTrue  = true
	sharedFalse = false
)

func sharedBool(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &sharedTrue
	}
	return &sharedFalse
}

func boolKey(b *bool) byte {
	switch {
	case b == nil:
		return '-'
	case *b:
		return 't'
	}
	return 'f'
}

// refsOf returns owner references equal to refs (without fields nothing
// reads: none are left out today), shared with the other pods of the same
// owners.
func refsOf(refs []metav1.OwnerReference) []metav1.OwnerReference {
	if len(refs) == 0 {
		return nil
	}
	var b strings.Builder
	for _, r := range refs {
		b.WriteString(r.APIVersion)
		b.WriteByte(0)
		b.WriteString(r.Kind)
		b.WriteByte(0)
		b.WriteString(r.Name)
		b.WriteByte(0)
		b.WriteString(string(r.UID))
		b.WriteByte(boolKey(r.Controller))
		b.WriteByte(boolKey(r.BlockOwnerDeletion))
	}
	return sharedRefs.get(b.String(), func() []metav1.OwnerReference {
		out := make([]metav1.OwnerReference, len(refs))
		for i, r := range refs {
			out[i] = metav1.OwnerReference{
				APIVersion: intern(r.APIVersion), Kind: intern(r.Kind), Name: intern(r.Name), UID: r.UID,
				Controller: sharedBool(r.Controller), BlockOwnerDeletion: sharedBool(r.BlockOwnerDeletion),
			}
		}
		return out
	})
}

// containersOf keeps what the capacity estimate, the sidecar restart
// ranking and the autoscaler read: names and requests, and for init
// containers the restart policy. Regular containers without requests are
// kept (by name): the autoscaler refuses a pod whose container lacks the
// request, as the HorizontalPodAutoscaler does. The result is shared with
// other pods of the same template.
func containersOf(cs []corev1.Container, init bool) []corev1.Container {
	var b strings.Builder
	if init {
		b.WriteByte('i')
	}
	kept := 0
	for i := range cs {
		c := &cs[i]
		kept++
		b.WriteString(c.Name)
		b.WriteByte(0)
		if init {
			if c.RestartPolicy != nil {
				b.WriteString(string(*c.RestartPolicy))
			}
			b.WriteByte(0)
		}
		names := make([]string, 0, len(c.Resources.Requests))
		for n := range c.Resources.Requests {
			names = append(names, string(n))
		}
		slices.Sort(names)
		for _, n := range names {
			q := c.Resources.Requests[corev1.ResourceName(n)]
			b.WriteString(n)
			b.WriteByte('=')
			// The canonical form: equal quantities give equal strings.
			b.WriteString(q.String())
			b.WriteByte(',')
		}
		b.WriteByte(0)
	}
	if kept == 0 {
		return nil
	}
	return sharedContainers.get(b.String(), func() []corev1.Container {
		out := make([]corev1.Container, 0, kept)
		for i := range cs {
			c := &cs[i]
			t := corev1.Container{Name: intern(c.Name), Resources: corev1.ResourceRequirements{Requests: c.Resources.Requests}}
			if init {
				t.RestartPolicy = c.RestartPolicy
			}
			out = append(out, t)
		}
		return out
	})
}
