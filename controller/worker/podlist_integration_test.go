package worker_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/controller/engine"
)

// TestIntegrationPodsByControllerMatchesCacheList: the engine's no-copy
// pod listing reads controller-runtime's field index by its internal name
// and key format. If either changed, it would find no pods and the engine
// would create replicas again and again; it must return exactly what a
// cache List with the same field selector returns, for owned pods and
// orphans.
func TestIntegrationPodsByControllerMatchesCacheList(t *testing.T) {
	e := startEnv(t, envOpts{})
	e.set("listed", 3)
	mrs := e.converged("listed", 3)
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: "orphan", Labels: map[string]string{"app": "elsewhere"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "pause"}}},
	}
	if err := e.cl.Create(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	names := func(pods []*corev1.Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Name)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		value string
		want  int
	}{{string(mrs.UID), 3}, {engine.OrphanIndexValue, 1}} {
		e.eventually("index listing of "+c.value, 60*time.Second, func() (bool, string) {
			got, ok := e.mgr.PodsByController(member, e.ns, c.value)
			if !ok {
				return false, "not available"
			}
			var l corev1.PodList
			if err := e.member.GetCache().List(context.Background(), &l, client.InNamespace(e.ns), client.MatchingFields{engine.PodControllerIndex: c.value}); err != nil {
				return false, err.Error()
			}
			want := make([]*corev1.Pod, len(l.Items))
			for i := range l.Items {
				want[i] = &l.Items[i]
			}
			g, w := names(got), names(want)
			return len(g) == c.want && slices.Equal(g, w), fmt.Sprintf("index %v, cache list %v", g, w)
		})
	}
}
