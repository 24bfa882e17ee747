package worker

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// PodsByController is the engine's no-copy pod listing of the named
// member's worker, for the integration test that pins its index key.
func (m *Manager) PodsByController(cluster, namespace, value string) ([]*corev1.Pod, bool) {
	w := m.engaged(cluster)
	if w == nil {
		return nil, false
	}
	return w.podsByController(namespace, value)
}

// SetRestartBackoff replaces the backoff between a failed worker's starts
// until the returned function restores it.
func SetRestartBackoff(b wait.Backoff) func() {
	old := restartBackoff
	restartBackoff = b
	return func() { restartBackoff = old }
}
