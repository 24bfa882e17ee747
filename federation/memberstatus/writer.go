// Package memberstatus keeps one MemberCluster object in the hub per
// registered member, for `kubectl get memberclusters`: health, the last
// probe error, why the member cannot be used (a broken kubeconfig Secret,
// say), its version, size and free capacity, and how many
// FederatedReplicaSets and pods it runs. Only the raft leader writes, at most
// once per interval, and only what changed.
package memberstatus

import (
	"context"
	"fmt"
	"maps"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/ctxjoin"
)

// Defaults of Writer.
const (
	DefaultInterval   = 5 * time.Second
	DefaultVersionTTL = 10 * time.Minute
)

// LabelManagedBy marks the MemberClusters replicafed owns: only those are
// deleted when their member is unregistered.
const LabelManagedBy = "app.kubernetes.io/managed-by"

const managedBy = "replicafed"

// Members gives the engaged members (registry.Registry).
type Members interface {
	Get(name string) (*registry.Member, bool)
}

// HealthSource gives each member's health (health.Replicated).
type HealthSource interface {
	State(cluster string) (health.State, bool)
}

// CapacitySummaries gives a member's capacity summary (capacity.Tracker);
// ok is false while it has none.
type CapacitySummaries interface {
	Summary(member string) (capacity.Summary, bool)
}

// Gate permits writes on the raft leader only.
type Gate interface {
	Allowed() (context.Context, bool)
}

// Writer is a manager runnable that writes MemberClusters on the leader.
type Writer struct {
	// Hub reads FederatedReplicaSets and MemberClusters (cached) and writes
	// MemberClusters.
	Hub client.Client
	// Registered lists every registered member.
	Registered func(ctx context.Context) ([]registry.Registration, error)
	// Members are the members engaged here.
	Members Members
	// Health of each member.
	Health HealthSource
	// Problem says why a member cannot be used; optional.
	Problem func(ctx context.Context, cluster string) string
	// Version returns a member's Kubernetes version; discovery when nil.
	Version func(ctx context.Context, m *registry.Member) (string, error)
	// Gate permits writes.
	Gate Gate
	// Interval between passes; DefaultInterval when zero.
	Interval time.Duration
	// VersionTTL is how long a member's version is reused;
	// DefaultVersionTTL when zero.
	VersionTTL time.Duration
	// Conditions returns the registration's conditions of a member
	// (registry.Registry.Conditions); optional. Their transition times are
	// set here.
	Conditions func(cluster string) []metav1.Condition
	// Clock is injected for tests; the real clock when nil.
	Clock clock.WithTicker
	// Capacity summarises a member's nodes from counters its informers keep
	// (capacity.Tracker); optional. Without it, or before its counters are
	// synced, each pass lists the member's nodes and pods.
	Capacity CapacitySummaries
	// PodsCached says whether this replica caches a member's pods; nil
	// means every member's. For a member whose pods are not cached
	// (sharding: another replica owns it) the summary comes from Capacity
	// alone, which counts it from its owner's published usage: listing its
	// pods from the member cache would start a pod informer for it, the
	// very cache sharding exists to avoid.
	PodsCached func(member string) bool
	// OnPlacementInputsChanged is called after a pass that recorded a change
	// of some member's taints or labels (the hub then re-plans: nothing else
	// watches the registration Secrets' labels and annotations, and
	// placement cluster selectors and tolerations depend on them).
	OnPlacementInputsChanged func()

	versions map[string]version
}

type version struct {
	text string
	at   time.Time
}

// NeedLeaderElection lets the writer run on every replica; the raft gate
// decides each pass.
func (w *Writer) NeedLeaderElection() bool { return false }

// Start writes until ctx ends.
func (w *Writer) Start(ctx context.Context) error {
	interval := w.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	tick := w.clock().NewTicker(interval)
	defer tick.Stop()
	log := logr.FromContextOrDiscard(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
		}
		lctx, ok := w.Gate.Allowed()
		if !ok {
			continue
		}
		pctx, cancel := ctxjoin.Join(ctx, lctx)
		// Every error here is the hub's (list, write, delete), so it shows
		// at the default verbosity; one caused by losing leadership does not.
		if err := w.Sync(pctx); err != nil && pctx.Err() == nil {
			log.Error(err, "Writing member cluster status failed")
		}
		cancel()
	}
}

func (w *Writer) clock() clock.WithTicker {
	if w.Clock == nil {
		return clock.RealClock{}
	}
	return w.Clock
}

// Sync makes the MemberClusters match the registered members once.
func (w *Writer) Sync(ctx context.Context) error {
	regs, err := w.Registered(ctx)
	if err != nil {
		return fmt.Errorf("listing registered members: %w", err)
	}
	frsCount, pods, err := w.placements(ctx)
	if err != nil {
		return err
	}
	list := &v1alpha1.MemberClusterList{}
	if err := w.Hub.List(ctx, list); err != nil {
		return fmt.Errorf("listing MemberClusters: %w", err)
	}
	existing := map[string]*v1alpha1.MemberCluster{}
	for i := range list.Items {
		existing[list.Items[i].Name] = &list.Items[i]
	}
	var errs []error
	taintsChanged := false // or labels
	registered := map[string]bool{}
	for _, reg := range regs {
		registered[reg.Name] = true
		var recorded []v1alpha1.ClusterTaint
		if mc := existing[reg.Name]; mc != nil {
			recorded = mc.Status.Taints
		}
		reg.Taints = stampTaints(reg.Taints, recorded, w.clock().Now())
		st := w.status(ctx, reg, frsCount[reg.Name], pods[reg.Name])
		if w.Conditions != nil {
			var prior []metav1.Condition
			if mc := existing[reg.Name]; mc != nil {
				prior = mc.Status.Conditions
			}
			st.Conditions = stampConditions(w.Conditions(reg.Name), prior, w.clock().Now())
		}
		if !equality.Semantic.DeepEqual(st.Taints, recorded) && (len(st.Taints) > 0 || len(recorded) > 0) {
			taintsChanged = true
		}
		if mc := existing[reg.Name]; mc != nil && !maps.Equal(mc.Status.Labels, st.Labels) {
			taintsChanged = true
		}
		if err := w.write(ctx, reg.Name, existing[reg.Name], st); err != nil {
			errs = append(errs, err)
		}
	}
	for name, mc := range existing {
		if registered[name] || mc.Labels[LabelManagedBy] != managedBy {
			continue
		}
		if err := w.Hub.Delete(ctx, mc); client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("deleting MemberCluster %s of an unregistered member: %w", name, err))
		}
	}
	if taintsChanged && w.OnPlacementInputsChanged != nil {
		w.OnPlacementInputsChanged()
	}
	if len(errs) > 0 {
		return fmt.Errorf("writing MemberClusters: %v", errs)
	}
	return nil
}

// placements counts, per member, the FederatedReplicaSets with a target
// there and the pods they run, from the FederatedReplicaSets' status rows.
func (w *Writer) placements(ctx context.Context) (map[string]int32, map[string]int32, error) {
	frsList := &v1alpha1.FederatedReplicaSetList{}
	if err := w.Hub.List(ctx, frsList, client.UnsafeDisableDeepCopy); err != nil {
		return nil, nil, fmt.Errorf("listing FederatedReplicaSets: %w", err)
	}
	frsCount, pods := map[string]int32{}, map[string]int32{}
	for i := range frsList.Items {
		for _, row := range frsList.Items[i].Status.Clusters {
			if row.Target > 0 {
				frsCount[row.Name]++
			}
			pods[row.Name] += row.Replicas
		}
	}
	return frsCount, pods, nil
}

// status computes one member's status.
func (w *Writer) status(ctx context.Context, reg registry.Registration, frsCount, pods int32) v1alpha1.MemberClusterStatus {
	st := v1alpha1.MemberClusterStatus{
		Health: v1alpha1.ClusterHealthUnknown, FederatedReplicaSets: frsCount, Pods: pods,
		Labels: reg.Labels, Taints: reg.Taints, Problem: reg.TaintsError,
	}
	if h, ok := w.Health.State(reg.Name); ok && h.Health != "" {
		st.Health, st.LastProbeError = h.Health, truncate(h.LastError)
		if !h.Since.IsZero() {
			// Whole seconds, as the API stores it: a sub-second part would
			// make every pass differ from what it reads back, and write.
			since := metav1.NewTime(h.Since.Truncate(time.Second))
			st.HealthSince = &since
		}
	}
	if w.Problem != nil {
		if p := w.Problem(ctx, reg.Name); p != "" {
			st.Problem = p
		}
	}
	m, engaged := w.Members.Get(reg.Name)
	if !engaged {
		if st.Problem == "" {
			st.Problem = "not connected yet"
		}
		st.Problem = truncate(st.Problem)
		return st
	}
	st.Problem = truncate(st.Problem)
	if sum, ok := w.summary(ctx, m); ok {
		st.Nodes, st.ReadyNodes, st.Allocatable, st.Free = sum.Nodes, sum.Ready, sum.Allocatable, sum.Free
	}
	st.KubernetesVersion = w.version(ctx, m, st.Health == v1alpha1.ClusterHealthy)
	return st
}

// summary sums the member's nodes and what their pods take: from the
// counters when they have it, else from lists of the member's cache (every
// pod of the member, so only as the fallback, and never for a member whose
// pods are not cached here: it has no summary until its counters do).
func (w *Writer) summary(ctx context.Context, m *registry.Member) (capacity.Summary, bool) {
	if w.Capacity != nil {
		if sum, ok := w.Capacity.Summary(m.Name); ok {
			return sum, true
		}
	}
	if w.PodsCached != nil && !w.PodsCached(m.Name) {
		return capacity.Summary{}, false
	}
	nodes := &corev1.NodeList{}
	if err := m.Cluster.GetCache().List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return capacity.Summary{}, false
	}
	podList := &corev1.PodList{}
	if err := m.Cluster.GetCache().List(ctx, podList, client.UnsafeDisableDeepCopy); err != nil {
		return capacity.Summary{}, false
	}
	return capacity.Summarize(nodes.Items, podList.Items), true
}

// version returns the member's version, asking it at most once per TTL
// and only while it is healthy.
func (w *Writer) version(ctx context.Context, m *registry.Member, healthy bool) string {
	if w.versions == nil {
		w.versions = map[string]version{}
	}
	ttl := w.VersionTTL
	if ttl <= 0 {
		ttl = DefaultVersionTTL
	}
	now := w.clock().Now()
	v, ok := w.versions[m.Name]
	if (ok && now.Sub(v.at) < ttl) || !healthy {
		return v.text
	}
	get := w.Version
	if get == nil {
		get = discoveryVersion
	}
	text, err := get(ctx, m)
	if err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Reading member version failed", "cluster", m.Name, "reason", err.Error())
		text = v.text
	}
	w.versions[m.Name] = version{text: text, at: now}
	return text
}

func discoveryVersion(_ context.Context, m *registry.Member) (string, error) {
	cfg := rest.CopyConfig(m.Cluster.GetConfig())
	cfg.Timeout = 5 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return "", fmt.Errorf("building discovery client: %w", err)
	}
	info, err := dc.ServerVersion()
	if err != nil {
		return "", fmt.Errorf("reading server version: %w", err)
	}
	return info.GitVersion, nil
}

// write creates the MemberCluster if needed and updates its status if it
// changed (the update time alone is no change).
func (w *Writer) write(ctx context.Context, name string, mc *v1alpha1.MemberCluster, st v1alpha1.MemberClusterStatus) error {
	if mc == nil {
		mc = &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{LabelManagedBy: managedBy}}}
		if err := w.Hub.Create(ctx, mc); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating MemberCluster %s: %w", name, err)
			}
			if err := w.Hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
				return fmt.Errorf("reading MemberCluster %s: %w", name, err)
			}
		}
	}
	old := mc.Status
	old.LastUpdateTime = nil
	if equality.Semantic.DeepEqual(old, st) {
		return nil
	}
	mc = mc.DeepCopy()
	now := metav1.NewTime(w.clock().Now())
	st.LastUpdateTime = &now
	mc.Status = st
	if err := w.Hub.Status().Update(ctx, mc); err != nil {
		return fmt.Errorf("writing status of MemberCluster %s: %w", name, err)
	}
	return nil
}

// stampConditions gives each wanted condition its transition time: the
// recorded one while its status is unchanged, else now (whole seconds, as
// the API stores it, so an unchanged status reads back equal and is not
// written again). Messages are cut to the status bound; a missing reason
// becomes the type, which the API requires.
func stampConditions(want, recorded []metav1.Condition, now time.Time) []metav1.Condition {
	if len(want) == 0 {
		return nil
	}
	out := make([]metav1.Condition, 0, len(want))
	for _, c := range want {
		c.Message = truncate(c.Message)
		if c.Reason == "" {
			c.Reason = c.Type
		}
		if old := meta.FindStatusCondition(recorded, c.Type); old != nil && old.Status == c.Status {
			c.LastTransitionTime = old.LastTransitionTime
		} else {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
		out = append(out, c)
	}
	return out
}

func truncate(s string) string {
	const limit = 1024
	if len(s) <= limit {
		return s
	}
	return s[:limit-3] + "..."
}

// stampTaints returns taints with a timeAdded on each: its own, the one
// recorded before for the same taint, or now. The hub counts
// tolerationSeconds of a taint registered without timeAdded from the
// recorded time, so every leader counts from the same moment.
func stampTaints(taints, recorded []v1alpha1.ClusterTaint, now time.Time) []v1alpha1.ClusterTaint {
	if len(taints) == 0 {
		return nil
	}
	out := make([]v1alpha1.ClusterTaint, len(taints))
	for i, t := range taints {
		out[i] = *t.DeepCopy()
		if t.TimeAdded != nil {
			continue
		}
		at := metav1.NewTime(now)
		for _, r := range recorded {
			if r.Key == t.Key && r.Value == t.Value && r.Effect == t.Effect && r.TimeAdded != nil {
				at = *r.TimeAdded
				break
			}
		}
		out[i].TimeAdded = &at
	}
	return out
}

// RecordedTaints returns a function that reads a member's taints, as last
// recorded with their timeAdded, from its MemberCluster (hub.Reconciler's
// RecordedTaints).
func RecordedTaints(hub client.Reader) func(ctx context.Context, cluster string) []v1alpha1.ClusterTaint {
	return func(ctx context.Context, cluster string) []v1alpha1.ClusterTaint {
		mc := &v1alpha1.MemberCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: cluster}, mc); err != nil {
			return nil
		}
		return mc.Status.Taints
	}
}
