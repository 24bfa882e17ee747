package hub

import (
	"context"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/federation/aggregate"
	"github.com/replicafed/replicafed/federation/capacity"
	"github.com/replicafed/replicafed/federation/planner"
	"github.com/replicafed/replicafed/federation/registry"
	"github.com/replicafed/replicafed/internal/metrics"
)

// Reconciler plans and reports FederatedReplicaSets on the leader.
type Reconciler struct {
	// Hub is the hub client (cached reads, writes).
	Hub client.Client
	// Registry lists engaged members.
	Registry Members
	// Health gives each member's reachability.
	Health HealthSource
	// Targets holds committed targets.
	Targets TargetStore
	// Reports holds member statuses.
	Reports *Reports
	// Gate permits writes on the leader only.
	Gate Gate
	// Poker pokes member workers after targets change.
	Poker Poker
	// Expectations are dropped for a FederatedReplicaSet once it is gone.
	Expectations ExpectationsForgetter
	// Recorder emits events on FederatedReplicaSets.
	Recorder events.EventRecorder
	// StatusInterval is the least time between two status writes of one object.
	StatusInterval time.Duration
	// Clock is injected for tests.
	Clock clock.PassiveClock
	// Intents remembers orphan deletions seen on the event path; optional.
	Intents *DeletionIntents
	// MemberProblems says why a member cannot be worked in (empty when it can);
	// optional.
	MemberProblems func(cluster string) string
	// Defaults fill the failover fields a FederatedReplicaSet leaves unset.
	Defaults v1alpha1.Failover

	lastWrite syncMap[string, time.Time]
	// awaiting records since when a plan waits for member reports.
	awaiting syncMap[string, time.Time]
}

// reportGrace bounds how long a plan waits for reports from members that hold
// replicas. A new leader starts with no reports; planning blind could move
// running replicas, so it waits for the workers' first syncs.
const reportGrace = 10 * time.Second

// requeueWhileDeleting is how often a blocked deletion is retried.
const requeueWhileDeleting = 5 * time.Second

// Reconcile implements reconcile.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	lctx, ok := r.Gate.Allowed()
	if !ok {
		return ctrl.Result{}, nil
	}
	ctx, cancel := mergeCancel(ctx, lctx)
	defer cancel()
	log := ctrl.LoggerFrom(ctx)

	frs := &v1alpha1.FederatedReplicaSet{}
	if err := r.Hub.Get(ctx, req.NamespacedName, frs); err != nil {
		if apierrors.IsNotFound(err) {
			r.Reports.Forget(req.Namespace, req.Name)
			r.lastWrite.Delete(req.String())
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading FederatedReplicaSet %s: %w", req, err)
	}
	if frs.DeletionTimestamp != nil {
		return r.finalize(ctx, frs)
	}
	if !controllerutil.ContainsFinalizer(frs, v1alpha1.FinalizerCascade) {
		patch := client.MergeFrom(frs.DeepCopy())
		controllerutil.AddFinalizer(frs, v1alpha1.FinalizerCascade)
		if err := r.Hub.Patch(ctx, frs, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer to %s: %w", req, err)
		}
	}

	now := r.Clock.Now()
	ref := refOf(frs)
	prev, prevGen, _ := r.Targets.Targets(ref)
	if wait := r.awaitReports(frs, prev, now); wait > 0 {
		log.V(2).Info("waiting for member reports before planning", "frs", klog.KObj(frs))
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	in := planner.NewInput(frs, prev, now, r.plannerMembers(ctx, frs))
	in.Failover = withDefaults(in.Failover, r.Defaults)
	res := planner.Plan(in)
	targets := res.TargetMap()
	// Members that left the placement keep an explicit 0 until they have
	// reported no pods, so their workers scale them down (also a member that is
	// away now: it is reconciled to 0 when it returns).
	for name := range prev {
		if _, ok := targets[name]; ok {
			continue
		}
		rep, ok := r.Reports.Get(expectations.Key{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
		if !ok || rep.Replicas > 0 || rep.TerminatingReplicas > 0 {
			targets[name] = 0
		}
	}
	if !maps.Equal(prev, targets) || prevGen != frs.Generation {
		if err := r.Targets.SetTargets(ctx, ref, frs.Generation, targets); err != nil {
			metrics.Plans.WithLabelValues("error").Inc()
			return ctrl.Result{}, fmt.Errorf("committing targets of %s: %w", req, err)
		}
		metrics.Plans.WithLabelValues("committed").Inc()
		log.V(1).Info("targets committed", "frs", klog.KObj(frs), "targets", targets, "shortfall", res.Shortfall)
		for _, ch := range res.Changes {
			r.event(frs, corev1.EventTypeNormal, string(ch.Reason), "Plan",
				"cluster %s: target %d -> %d (%s)", ch.Cluster, ch.From, ch.To, ch.Reason)
		}
		for name := range targets {
			r.Poker.Enqueue(expectations.Key{Cluster: name, Namespace: frs.Namespace, Name: frs.Name})
		}
	} else {
		metrics.Plans.WithLabelValues("unchanged").Inc()
	}
	metrics.Shortfall.WithLabelValues(frs.Namespace, frs.Name).Set(float64(res.Shortfall))
	if res.Shortfall > 0 {
		r.event(frs, corev1.EventTypeWarning, "InsufficientCapacity", "Plan", "the fleet lacks room for %d replicas", res.Shortfall)
	}
	if r.MemberProblems != nil {
		for name := range targets {
			if p := r.MemberProblems(name); p != "" {
				r.event(frs, corev1.EventTypeWarning, "MemberNotPrepared", "Plan", "cluster %s: %s", name, p)
			}
		}
	}
	if len(res.Unregistered) > 0 {
		r.event(frs, corev1.EventTypeWarning, "UnknownCluster", "Plan", "placement names unregistered clusters: %v", res.Unregistered)
	}
	result, err := r.writeStatus(ctx, frs, targets, res, now)
	if err != nil {
		return result, err
	}
	// Nothing else happens when a grace period or threshold runs out, so
	// come back then and plan again.
	if d := nextDeadline(in, now); d > 0 && (result.RequeueAfter == 0 || d < result.RequeueAfter) {
		result.RequeueAfter = d
	}
	return result, nil
}

// nextDeadline is the time until the earliest unreachable member passes its
// grace period or unschedulable pods pass their threshold (0 when none).
func nextDeadline(in planner.Input, now time.Time) time.Duration {
	grace, threshold := planner.DefaultUnreachableGracePeriod, planner.DefaultUnschedulableThreshold
	if g := in.Failover.UnreachableGracePeriod; g != nil {
		grace = g.Duration
	}
	if t := in.Failover.UnschedulableThreshold; t != nil {
		threshold = t.Duration
	}
	var next time.Duration
	consider := func(at time.Time) {
		// A little past the deadline, so the plan sees it expired.
		if d := at.Sub(now) + 100*time.Millisecond; d > 0 && (next == 0 || d < next) {
			next = d
		}
	}
	for _, m := range in.Members {
		if m.Health == planner.Unhealthy && !m.UnhealthySince.IsZero() {
			consider(m.UnhealthySince.Add(grace))
		}
		if m.Unschedulable > 0 && !m.UnschedulableSince.IsZero() {
			consider(m.UnschedulableSince.Add(threshold))
		}
	}
	return next
}

// awaitReports returns how long to wait before planning, because a healthy
// member that holds replicas has not reported yet (bounded by reportGrace).
func (r *Reconciler) awaitReports(frs *v1alpha1.FederatedReplicaSet, prev map[string]int32, now time.Time) time.Duration {
	key := frs.Namespace + "/" + frs.Name
	missing := false
	for name, target := range prev {
		if target == 0 {
			continue
		}
		if _, engaged := r.Registry.Get(name); !engaged {
			continue
		}
		if st, ok := r.Health.State(name); !ok || st.Health != v1alpha1.ClusterHealthy {
			continue
		}
		if _, ok := r.Reports.Get(expectations.Key{Cluster: name, Namespace: frs.Namespace, Name: frs.Name}); !ok {
			missing = true
			break
		}
	}
	if !missing {
		r.awaiting.Delete(key)
		return 0
	}
	since, ok := r.awaiting.Load(key)
	if !ok {
		r.awaiting.Store(key, now)
		since = now
	}
	if left := reportGrace - now.Sub(since); left > 0 {
		return min(left, time.Second)
	}
	return 0
}

// plannerMembers describes every engaged member for the planner.
func (r *Reconciler) plannerMembers(ctx context.Context, frs *v1alpha1.FederatedReplicaSet) []planner.Member {
	members := r.Registry.Members()
	out := make([]planner.Member, 0, len(members))
	for _, m := range members {
		pm := planner.Member{Name: m.Name, Labels: m.Labels}
		if st, ok := r.Health.State(m.Name); ok {
			switch st.Health {
			case v1alpha1.ClusterHealthy:
				pm.Health = planner.Healthy
			case v1alpha1.ClusterUnreachable:
				pm.Health = planner.Unhealthy
				pm.UnhealthySince = st.Since
			}
		}
		if rep, ok := r.Reports.Get(expectations.Key{Cluster: m.Name, Namespace: frs.Namespace, Name: frs.Name}); ok {
			pm.Current = rep.Replicas
			pm.Ready = rep.ReadyReplicas
			pm.Unschedulable = rep.Unschedulable
			pm.UnschedulableSince = rep.UnschedulableSince
		}
		if pm.Health == planner.Healthy {
			if free, ok := memberCapacity(ctx, m, &frs.Spec.Template); ok {
				pm.FreeCapacity = &free
			}
		}
		out = append(out, pm)
	}
	return out
}

// memberCapacity estimates free room for the template from the member's cache.
func memberCapacity(ctx context.Context, m *registry.Member, tmpl *corev1.PodTemplateSpec) (int32, bool) {
	// Read-only use: skip the cache's deep copies, which dominate the cost of
	// this estimate in a large member.
	nodes := &corev1.NodeList{}
	if err := m.Cluster.GetCache().List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	pods := &corev1.PodList{}
	if err := m.Cluster.GetCache().List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return 0, false
	}
	return capacity.Estimate(nodes.Items, pods.Items, tmpl), true
}

func (r *Reconciler) writeStatus(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, targets map[string]int32, res planner.Result, now time.Time) (ctrl.Result, error) {
	in := aggregate.Input{
		Generation: frs.Generation,
		Desired:    ptrOr(frs.Spec.Replicas, 1),
		Shortfall:  res.Shortfall,
		Previous:   frs.Status,
		Now:        now,
	}
	if sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector); err == nil {
		in.Selector = sel.String()
	}
	notes := map[string]string{}
	for _, n := range res.MemberNotes {
		notes[n.Cluster] = n.Message
	}
	for name, target := range targets {
		m := aggregate.Member{Name: name, Target: target, Message: notes[name]}
		if r.MemberProblems != nil {
			m.Problem = r.MemberProblems(name)
		}
		if st, ok := r.Health.State(name); ok {
			m.Health = st.Health
		} else if _, engaged := r.Registry.Get(name); !engaged {
			m.Health = v1alpha1.ClusterUnreachable
			m.Message = "member not registered"
		}
		if rep, ok := r.Reports.Get(expectations.Key{Cluster: name, Namespace: frs.Namespace, Name: frs.Name}); ok {
			ar := &aggregate.Report{
				Replicas: rep.Replicas, FullyLabeled: rep.FullyLabeledReplicas, Ready: rep.ReadyReplicas,
				Available: rep.AvailableReplicas, Unschedulable: rep.Unschedulable, Time: rep.ReportedAt,
			}
			t := rep.TerminatingReplicas
			ar.Terminating = &t
			if rep.ReplicaFailure != nil {
				ar.Failure, ar.FailureReason = rep.ReplicaFailure.Message, rep.ReplicaFailure.Reason
			}
			m.Report = ar
		}
		in.Members = append(in.Members, m)
	}
	st := aggregate.Compute(in)
	if aggregate.Equal(st, frs.Status) {
		return ctrl.Result{}, nil
	}
	key := frs.Namespace + "/" + frs.Name
	if last, ok := r.lastWrite.Load(key); ok && r.StatusInterval > 0 {
		if wait := r.StatusInterval - now.Sub(last); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	patch := client.MergeFrom(frs.DeepCopy())
	frs.Status = st
	if err := r.Hub.Status().Patch(ctx, frs, patch); err != nil {
		return ctrl.Result{}, fmt.Errorf("writing status of %s: %w", key, err)
	}
	r.lastWrite.Store(key, now)
	return ctrl.Result{}, nil
}

func (r *Reconciler) event(frs *v1alpha1.FederatedReplicaSet, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(frs, nil, typ, reason, action, format, args...)
	}
}

// withDefaults fills unset failover fields from the configured defaults.
func withDefaults(f, def v1alpha1.Failover) v1alpha1.Failover {
	if f.UnreachableGracePeriod == nil {
		f.UnreachableGracePeriod = def.UnreachableGracePeriod
	}
	if f.UnschedulableThreshold == nil {
		f.UnschedulableThreshold = def.UnschedulableThreshold
	}
	if f.MoveBack == "" {
		f.MoveBack = def.MoveBack
	}
	return f
}

func ptrOr(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

// mergeCancel returns a context that ends when either parent ends.
func mergeCancel(a, b context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(a)
	stop := context.AfterFunc(b, cancel)
	return ctx, func() { stop(); cancel() }
}
