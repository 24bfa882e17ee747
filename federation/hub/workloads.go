package hub

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/rollout"
	"github.com/replicafed/replicafed/internal/fedref"
)

// Workloads answers the member engine's question "what does the hub want of
// this FederatedReplicaSet in this member?" from the hub cache and the
// committed targets. A FederatedReplicaSet being deleted, one without a
// committed target for the member, or one whose name, selector or template
// no member could act on (workloadProblems), is "hands off": the deletion protocol or
// the next plan decides what happens there.
type Workloads struct {
	// Hub reads FederatedReplicaSets from the hub cache.
	Hub client.Reader
	// Targets holds committed targets.
	Targets TargetStore
	// Rollouts holds rollout records; nil treats every object as type
	// ReplicaSet.
	Rollouts RolloutStore
	// DefaultNodeCost is the configured node cost tiering for
	// FederatedReplicaSets that set none (controller.nodeCost); nil for none.
	DefaultNodeCost *v1alpha1.NodeCost
}

var (
	_ engine.WorkloadSource = &Workloads{}
	_ engine.WorkloadLister = &Workloads{}
)

// workloadReadTimeout bounds the hub cache reads of one Workload call.
const workloadReadTimeout = 10 * time.Second

// Workload implements engine.WorkloadSource. A rolling FederatedReplicaSet
// has one MemberReplicaSet per live revision (its record's objects): key's
// name is then a revision's object, the object's own name or its name, a
// dash and the template hash.
func (w *Workloads) Workload(key fedref.MemberObject) (*engine.Workload, bool) {
	// A cached read of a kind not cached yet waits for its informer to
	// sync: bound it, so a member worker never hangs here.
	ctx, cancel := context.WithTimeout(context.Background(), workloadReadTimeout)
	defer cancel()
	frs, rec, ok := w.owner(ctx, key)
	if !ok || frs.DeletionTimestamp != nil {
		return nil, false
	}
	if len(workloadProblems(frs)) > 0 {
		// Nothing a member could run from it (a name no label can carry,
		// a selector that does not parse or match the template): the
		// member keeps what it has; the hub reports the object Invalid.
		return nil, false
	}
	targets, gen, ok := w.Targets.Targets(refOf(frs))
	if !ok {
		return nil, false
	}
	target, ok := targets[key.Cluster]
	if !ok {
		return nil, false
	}
	template, selector, hash := frs.Spec.Template, frs.Spec.Selector, ""
	if isRolling(frs, rec) {
		// Before the hub's first rollout pass there is no split to act on.
		if rec == nil || !rec.HasMember(key.Cluster) {
			return nil, false
		}
		l := rec.ByObject(key.Name)
		if l == nil {
			return nil, false
		}
		target, template, selector = rec.Target(key.Cluster, l.Name), l.PodTemplate(), l.Selector(frs.Spec.Selector)
		if l.Labelled {
			hash = l.Hash
		}
	}
	// The namespace's Pod Security labels go with any namespace the engine
	// creates in the member; without them it would create pods under a
	// weaker policy than the hub's, so an unreadable namespace is hands off.
	ns := &corev1.Namespace{}
	if err := w.Hub.Get(ctx, types.NamespacedName{Name: key.Namespace}, ns); err != nil {
		return nil, false
	}
	var deps []dependencies.Ref
	if frs.Spec.PropagateDependencies {
		// Only what the hub copies is waited for; without propagation the
		// template's references are the member's business, as upstream.
		deps = dependencies.Required(dependencies.Of(&template.Spec))
	}
	return &engine.Workload{
		Dependencies:    deps,
		NodeCost:        engine.NodeCostFor(frs, w.DefaultNodeCost),
		NamespaceLabels: ns.Labels,
		Key:             key,
		Target:          target,
		Selector:        selector,
		Template:        template,
		TemplateHash:    hash,
		MinReadySeconds: frs.Spec.MinReadySeconds,
		Hub: v1alpha1.HubReference{
			Namespace: frs.Namespace, Name: frs.Name, UID: frs.UID, Generation: gen,
		},
	}, true
}

// owner finds the FederatedReplicaSet key's MemberReplicaSet stands for,
// with its rollout record when it has one: the object of key's name, else
// (a revision's object, named after the object, a dash and a hash) the
// rolling object whose record lists key's name. The object of key's own
// name wins, so a plain FederatedReplicaSet is never shadowed.
func (w *Workloads) owner(ctx context.Context, key fedref.MemberObject) (*v1alpha1.FederatedReplicaSet, *rollout.Record, bool) {
	frs := &v1alpha1.FederatedReplicaSet{}
	err := w.Hub.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name}, frs)
	if err == nil {
		return frs, w.record(frs), true
	}
	if w.Rollouts == nil {
		return nil, nil, false
	}
	i := strings.LastIndexByte(key.Name, '-')
	if i <= 0 {
		return nil, nil, false
	}
	if err := w.Hub.Get(ctx, types.NamespacedName{Namespace: key.Namespace, Name: key.Name[:i]}, frs); err != nil {
		return nil, nil, false
	}
	rec := w.record(frs)
	if rec == nil || rec.ByObject(key.Name) == nil {
		return nil, nil, false
	}
	return frs, rec, true
}

func (w *Workloads) record(frs *v1alpha1.FederatedReplicaSet) *rollout.Record {
	if w.Rollouts == nil {
		return nil
	}
	if rec, ok := w.Rollouts.Rollout(refOf(frs)); ok {
		return rec
	}
	return nil
}

// WorkloadKeys implements engine.WorkloadLister: the keys of every
// FederatedReplicaSet in the hub cache, not being deleted, with a committed
// target for cluster.
func (w *Workloads) WorkloadKeys(ctx context.Context, cluster string) ([]fedref.MemberObject, error) {
	var list v1alpha1.FederatedReplicaSetList
	if err := w.Hub.List(ctx, &list); err != nil {
		return nil, fmt.Errorf("listing FederatedReplicaSets for the workloads of %s: %w", cluster, err)
	}
	var out []fedref.MemberObject
	for i := range list.Items {
		if frs := &list.Items[i]; frs.DeletionTimestamp == nil {
			out = append(out, w.keysIn(frs, cluster)...)
		}
	}
	return out, nil
}

// KeysOf returns the keys of FederatedReplicaSet ref in cluster, as
// WorkloadKeys lists them, also while it is being deleted; none when the
// hub cache does not hold it (or holds another object of that name).
func (w *Workloads) KeysOf(ctx context.Context, ref fedref.FRS, cluster string) []fedref.MemberObject {
	frs := &v1alpha1.FederatedReplicaSet{}
	if err := w.Hub.Get(ctx, types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}, frs); err != nil {
		return nil
	}
	if ref.UID != "" && string(frs.UID) != ref.UID {
		return nil
	}
	return w.keysIn(frs, cluster)
}

// keysIn returns frs's keys in cluster when it has a committed target
// there: its own name, or each revision object's of a rolling object.
func (w *Workloads) keysIn(frs *v1alpha1.FederatedReplicaSet, cluster string) []fedref.MemberObject {
	targets, _, ok := w.Targets.Targets(refOf(frs))
	if _, has := targets[cluster]; !ok || !has {
		return nil
	}
	rec := w.record(frs)
	if rec == nil {
		return []fedref.MemberObject{{Cluster: cluster, Namespace: frs.Namespace, Name: frs.Name}}
	}
	out := make([]fedref.MemberObject, 0, len(rec.Revisions))
	for i := range rec.Revisions {
		out = append(out, fedref.MemberObject{Cluster: cluster, Namespace: frs.Namespace, Name: rec.Revisions[i].Object})
	}
	return out
}

func refOf(frs *v1alpha1.FederatedReplicaSet) fedref.FRS {
	return fedref.FRS{Namespace: frs.Namespace, Name: frs.Name, UID: string(frs.UID)}
}
