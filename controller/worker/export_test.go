package worker

import corev1 "k8s.io/api/core/v1"

// PodsByController is the engine's no-copy pod listing of the named
// member's worker, for the integration test that pins its index key.
func (m *Manager) PodsByController(cluster, namespace, value string) ([]*corev1.Pod, bool) {
	m.mu.Lock()
	mem := m.members[cluster]
	m.mu.Unlock()
	if mem == nil {
		return nil, false
	}
	return mem.w.podsByController(namespace, value)
}
