package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/hack/bench/fleet/promtext"
)

// readVerbs are the API reads a deletion pays for besides its writes.
var readVerbs = promtext.In("verb", "GET", "LIST")

// deletionLeft is what is left of a run: its top objects (in the hub for
// replicafed, in the members for kcm), the member owners and the pods.
type deletionLeft struct{ top, owners, pods int }

func (l deletionLeft) gone() bool { return l.top == 0 && l.owners == 0 && l.pods == 0 }

// measureDeletion deletes the run's objects as a user would (BENCH_DELETE):
// for replicafed its FederatedReplicaSets in the hub, for kcm its
// ReplicaSets in each member with foreground propagation (what
// replicafed asks of each member's garbage collector), and times how
// long it takes until they, the member owners and every pod are gone,
// with the requests that cost. The cleanup that follows removes whatever
// is left when it gives up.
func (b *bench) measureDeletion(ctx context.Context, ns, system string) {
	before, err := b.probe.snapshot(ctx, nil)
	if err != nil {
		say("  deletion: %v", err)
		return
	}
	t0 := time.Now()
	topGone, lastLog, deleted := time.Duration(0), t0, false
	err = waitFor(ctx, b.s.DeleteTimeout, "the run's objects to be deleted", func() (bool, error) {
		if !deleted {
			// Again until it succeeds: a delete of many objects can fail under load.
			deleted = b.deleteTop(ctx, ns, system) == nil
		}
		left, err := b.leftOf(ctx, ns, system)
		if err != nil {
			return false, err
		}
		if left.top == 0 && topGone == 0 {
			topGone = time.Since(t0)
		}
		if time.Since(lastLog) >= 15*time.Second {
			lastLog = time.Now()
			say("  deleting: %s: %d top objects, %d member owners, %d pods left", time.Since(t0).Round(time.Second), left.top, left.owners, left.pods)
		}
		return left.gone(), fmt.Errorf("%d top objects, %d member owners and %d pods left", left.top, left.owners, left.pods)
	})
	took := time.Since(t0)
	if err != nil {
		say("  deletion with %s: %v", system, err)
	} else {
		say("  deletion with %s: everything gone in %s (the top objects in %s)", system, took.Round(100*time.Millisecond), topGone.Round(100*time.Millisecond))
	}
	after, err := b.probe.snapshot(ctx, nil)
	if err != nil {
		say("  deletion: %v", err)
		return
	}
	say("  deletion writes: %s", topWrites(b.requestBreakdown(before, after, writeVerbs), 12))
	say("  deletion reads: %s", topWrites(b.requestBreakdown(before, after, readVerbs), 8))
	if system == systemReplicafed {
		say("  deletion: replicafed's own requests to members by method: %s", topWrites(b.memberRequestsByMethod(before, after), 6))
	}
}

// memberRequestsByMethod sums every replica's client requests to the
// members between two snapshots by HTTP method (GET counts gets and lists).
func (b *bench) memberRequestsByMethod(before, after snapshot) map[string]float64 {
	out := map[string]float64{}
	for id, s := range after.replicas {
		prev := before.replicas[id]
		for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE"} {
			m := promtext.All(b.toMember, promtext.In("method", method))
			if d := s.Sum(mClient, m) - prev.Sum(mClient, m); d != 0 {
				out[method] += d
			}
		}
	}
	return out
}

// deleteTop deletes the run's top objects once.
func (b *bench) deleteTop(ctx context.Context, ns, system string) error {
	if system == systemReplicafed {
		// One by one, as kubectl delete --all does: a deletecollection of
		// 1,000 FRS timed out at the hub before it had marked them all.
		_, err := deleteStanding(ctx, b.f.HubClient, ns)
		return err
	}
	var first error
	for name, c := range b.f.MemberClients {
		err := c.DeleteAllOf(ctx, &appsv1.ReplicaSet{}, client.InNamespace(ns), client.PropagationPolicy(metav1.DeletePropagationForeground))
		if err != nil && first == nil {
			first = fmt.Errorf("deleting ReplicaSets in %s: %w", name, err)
		}
	}
	return first
}

// leftOf counts the run's objects still in the hub and the members.
func (b *bench) leftOf(ctx context.Context, ns, system string) (deletionLeft, error) {
	var left deletionLeft
	owner := appsv1.SchemeGroupVersion.WithKind("ReplicaSetList")
	if system == systemReplicafed {
		owner = v1alpha1.GroupVersion.WithKind("MemberReplicaSetList")
		frs := &v1alpha1.FederatedReplicaSetList{}
		if err := b.f.HubClient.List(ctx, frs, client.InNamespace(ns)); err != nil {
			return left, fmt.Errorf("listing FederatedReplicaSets: %w", err)
		}
		left.top = len(frs.Items)
	}
	for name := range b.members {
		c := b.f.MemberClients[name]
		for _, l := range []struct {
			gvk schema.GroupVersionKind
			n   *int
		}{{corev1.SchemeGroupVersion.WithKind("PodList"), &left.pods}, {owner, &left.owners}} {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(l.gvk)
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return left, fmt.Errorf("listing %s in %s: %w", l.gvk.Kind, name, err)
			}
			*l.n += len(list.Items)
		}
	}
	if system != systemReplicafed {
		left.top = left.owners
	}
	return left, nil
}

// toMember matches client request samples sent to a member's API server.
func (b *bench) toMember(l map[string]string) bool { return b.memberHosts[l["host"]] }
