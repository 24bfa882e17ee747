package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// autoscaleConfig turns the replicas' autoscaler on, computing every 5 s.
func autoscaleConfig(on bool) map[string]any {
	if !on {
		return nil
	}
	return map[string]any{"autoscaling": map[string]any{"enabled": true, "syncPeriod": "5s", "memberTimeout": "3s"}}
}

// startAutoscaler, once the example is spread (all its replicas ready),
// applies the autoscaler in path and plays the load: a minute later
// member-a's pods use 4x their cpu request (kwok's usage annotation, read by
// metrics-server), three minutes after that every pod idles.
func startAutoscaler(ctx context.Context, f *fleet.Fleet, path string, frs *v1alpha1.FederatedReplicaSet, say func(string, ...any)) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{}
	if err := yaml.UnmarshalStrict(raw, fhpa); err != nil {
		return fmt.Errorf("decoding %s: %w", path, err)
	}
	go func() {
		if !waitSpread(ctx, f, frs) {
			return
		}
		say("spread; applying %s", path)
		if err := f.HubClient.Create(ctx, fhpa); err != nil {
			say("creating the example autoscaler: %v", err)
			return
		}
		steps := []struct {
			after   time.Duration
			members []string
			cpu     string
		}{{time.Minute, []string{"member-a"}, "400m"}, {4 * time.Minute, []string{"member-a", "member-b", "member-c"}, "10m"}}
		start := time.Now()
		for _, s := range steps {
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Until(start.Add(s.after))):
			}
			for _, m := range s.members {
				n, err := setUsage(ctx, f.MemberClients[m], frs, s.cpu)
				if err != nil {
					say("setting load in %s: %v", m, err)
					continue
				}
				say("load: %d pods in %s now use %s cpu each", n, m, s.cpu)
			}
		}
	}()
	return nil
}

// waitSpread waits until every replica of the example is ready, or ctx ends.
func waitSpread(ctx context.Context, f *fleet.Fleet, frs *v1alpha1.FederatedReplicaSet) bool {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		got := &v1alpha1.FederatedReplicaSet{}
		if err := f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), got); err == nil &&
			got.Spec.Replicas != nil && got.Status.ReadyReplicas >= *got.Spec.Replicas {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}

// setUsage sets kwok's cpu usage annotation on the FederatedReplicaSet's
// pods in one member.
func setUsage(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet, cpu string) (int, error) {
	pods := &corev1.PodList{}
	if err := c.List(ctx, pods, client.InNamespace(frs.Namespace), client.MatchingLabels(frs.Spec.Selector.MatchLabels)); err != nil {
		return 0, err
	}
	patch := client.RawPatch("application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, testcluster.UsageCPUAnnotation, cpu)))
	for i := range pods.Items {
		if err := c.Patch(ctx, &pods.Items[i], patch); err != nil {
			return i, err
		}
	}
	return len(pods.Items), nil
}
