package hub

import "sync"

// syncMap is a typed sync.Map.
type syncMap[K comparable, V any] struct{ m sync.Map }

func (s *syncMap[K, V]) Load(k K) (V, bool) {
	v, ok := s.m.Load(k)
	if !ok {
		var zero V
		return zero, false
	}
	return v.(V), true
}

func (s *syncMap[K, V]) Store(k K, v V) { s.m.Store(k, v) }

func (s *syncMap[K, V]) Delete(k K) { s.m.Delete(k) }
