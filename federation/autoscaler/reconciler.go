// Package autoscaler is the FederatedHorizontalPodAutoscaler controller: on
// the raft leader only, it reads the target FederatedReplicaSet's scale, the
// target's pods in every member (from the member caches) and their usage
// (from each member's metrics.k8s.io), decides with federation/autoscale and
// writes the FederatedReplicaSet's spec.replicas through its scale
// subresource, the autoscaler's status and events. It detects, reports and
// never fights a HorizontalPodAutoscaler in a member that targets the
// MemberReplicaSet replicafed keeps there.
package autoscaler

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/autoscale"
	"github.com/replicafed/replicafed/internal/metrics"
)

// Gate permits writes on the raft leader only.
type Gate interface {
	Allowed() (context.Context, bool)
}

// Member is what the controller reads in one member cluster.
type Member interface {
	// Pods lists the pods in namespace matching sel, from the member cache.
	Pods(ctx context.Context, namespace string, sel labels.Selector) ([]*corev1.Pod, error)
	// PodMetrics reads metrics.k8s.io's pod metrics in namespace matching
	// sel, by pod name.
	PodMetrics(ctx context.Context, namespace string, sel labels.Selector) (map[string]autoscale.Usage, error)
	// CustomMetric reads the spec's Pods, Object or External metric in
	// namespace (Pods: of the pods matching sel); a member that does not
	// serve the metric's API answers with an error saying so.
	CustomMetric(ctx context.Context, namespace string, sel labels.Selector, spec v1alpha1.MetricSpec) (autoscale.Values, error)
	// Autoscalers lists the member's HorizontalPodAutoscalers in namespace
	// that target the MemberReplicaSet name.
	Autoscalers(ctx context.Context, namespace, name string) ([]string, error)
}

// Members finds an engaged member by name.
type Members interface {
	Member(name string) (Member, bool)
}

// Reconciler computes one FederatedHorizontalPodAutoscaler per call.
type Reconciler struct {
	// Hub reads autoscalers and FederatedReplicaSets (cached) and writes
	// scale and status.
	Hub client.Client
	// Members are the engaged members.
	Members Members
	// Gate: only the raft leader computes and writes.
	Gate Gate
	// Recorder emits events on autoscalers.
	Recorder events.EventRecorder
	// Settings are the controller-wide knobs of the replica math.
	Settings autoscale.Settings
	// SyncPeriod is how often each autoscaler is computed.
	SyncPeriod time.Duration
	// MemberTimeout bounds the reads of one member.
	MemberTimeout time.Duration
	// Clock gives the time of each computation.
	Clock clock.PassiveClock

	mu      sync.Mutex
	history map[types.UID]*autoscale.History
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.FederatedHorizontalPodAutoscaler{}).
		Named("federatedhorizontalpodautoscaler").
		Complete(r)
}

// Reconcile computes and applies one autoscaler, then asks to be called
// again after SyncPeriod.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	fhpa := &v1alpha1.FederatedHorizontalPodAutoscaler{}
	if err := r.Hub.Get(ctx, req.NamespacedName, fhpa); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("reading autoscaler %s: %w", req, err)
	}
	if fhpa.DeletionTimestamp != nil {
		r.forget(fhpa.UID)
		return ctrl.Result{}, nil
	}
	if _, ok := r.Gate.Allowed(); !ok {
		// A follower keeps no history: should it lead later, it starts
		// afresh from what it sees then (see autoscale.History).
		r.forget(fhpa.UID)
		return ctrl.Result{RequeueAfter: r.SyncPeriod}, nil
	}
	next := fhpa.DeepCopy()
	if err := r.sync(ctx, log, next); err != nil {
		log.Error(err, "Computing autoscaler", "autoscaler", klog.KObj(fhpa))
	}
	if err := r.writeStatus(ctx, fhpa, next); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.SyncPeriod}, nil
}

// sync fills fhpa's status and scales the target when the decision says so.
func (r *Reconciler) sync(ctx context.Context, log logr.Logger, fhpa *v1alpha1.FederatedHorizontalPodAutoscaler) error {
	now := r.Clock.Now()
	st := &fhpa.Status
	st.ObservedGeneration = &fhpa.Generation
	frs := &v1alpha1.FederatedReplicaSet{}
	key := types.NamespacedName{Namespace: fhpa.Namespace, Name: fhpa.Spec.ScaleTargetRef.Name}
	scale := &autoscalingv1.Scale{}
	err := r.Hub.Get(ctx, key, frs)
	if err == nil {
		err = r.Hub.SubResource("scale").Get(ctx, frs, scale)
	}
	if err != nil {
		r.event(fhpa, corev1.EventTypeWarning, "FailedGetScale", "Read", "%v", err)
		setCondition(fhpa, v1alpha1.AutoscalerAbleToScale, false, "FailedGetScale", "the autoscaler was unable to get the target's current scale: "+err.Error())
		return fmt.Errorf("reading the scale of %s: %w", key, err)
	}
	sel, err := selectorOf(scale, frs)
	if err != nil {
		setCondition(fhpa, v1alpha1.AutoscalerScalingActive, false, "InvalidSelector", err.Error())
		return err
	}
	members, conflicts := r.gather(ctx, log, frs, sel, fhpa.Spec.Metrics)
	h := r.historyOf(fhpa)
	d := autoscale.Decide(autoscale.Input{Now: now, Spec: fhpa.Spec, Current: scale.Spec.Replicas, StatusReplicas: scale.Status.Replicas,
		Members: members, Settings: r.Settings}, h)
	st.CurrentReplicas, st.DesiredReplicas = scale.Status.Replicas, d.Desired
	st.CurrentMetrics, st.Clusters = d.Metrics, d.Clusters
	for _, c := range d.Conditions {
		setCondition(fhpa, c.Type, c.Status == metav1.ConditionTrue, c.Reason, c.Message)
	}
	if d.Err != nil {
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleError).Inc()
		r.event(fhpa, corev1.EventTypeWarning, "FailedComputeMetricsReplicas", "Compute", "%v", d.Err)
	}
	if r.reportConflicts(fhpa, conflicts) {
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleBlocked).Inc()
		// Two autoscalers on one workload fight; this one steps back.
		setCondition(fhpa, v1alpha1.AutoscalerAbleToScale, false, v1alpha1.AutoscalerMemberConflict,
			"not scaling while a member HorizontalPodAutoscaler targets the MemberReplicaSet: "+strings.Join(conflicts, ", "))
		return nil
	}
	switch {
	case d.Err != nil:
	case !d.Rescale && meta.IsStatusConditionTrue(d.Conditions, v1alpha1.AutoscalerScalingLimited) &&
		meta.FindStatusCondition(d.Conditions, v1alpha1.AutoscalerScalingLimited).Reason == autoscale.ReasonMetricsMissing:
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleHeld).Inc()
	case !d.Rescale:
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleNone).Inc()
	case d.Desired > scale.Spec.Replicas:
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleUp).Inc()
	default:
		metrics.AutoscalerDecisions.WithLabelValues(metrics.AutoscaleDown).Inc()
	}
	defer func() {
		// What a new leader needs to keep the rate policies.
		h.Prune(now, autoscale.BehaviorOf(fhpa.Spec.Behavior, r.Settings.DownscaleStabilization))
		st.RecentScaleEvents = h.Events()
	}()
	if !d.Rescale {
		return nil
	}
	return r.rescale(ctx, log, fhpa, frs, scale, d, h, now)
}

// rescale records the step in the status first, so that a leader taking
// over between the two writes still counts it against the rate policies,
// then writes the decision through the scale subresource, with the
// resourceVersion read: a count changed since (by a user, or by a former
// leader) makes it fail, and the next sync decides again from the new one.
func (r *Reconciler) rescale(ctx context.Context, log logr.Logger, fhpa *v1alpha1.FederatedHorizontalPodAutoscaler, frs *v1alpha1.FederatedReplicaSet,
	scale *autoscalingv1.Scale, d autoscale.Decision, h *autoscale.History, now time.Time) error {
	if _, ok := r.Gate.Allowed(); !ok {
		return nil
	}
	from := scale.Spec.Replicas
	b := autoscale.BehaviorOf(fhpa.Spec.Behavior, r.Settings.DownscaleStabilization)
	pending := autoscale.HistoryFrom(h.Events())
	pending.RecordScale(now, b, from, d.Desired)
	fhpa.Status.RecentScaleEvents = pending.Events()
	if err := r.Hub.Status().Update(ctx, fhpa); err != nil {
		return fmt.Errorf("recording the step to %d before making it: %w", d.Desired, err)
	}
	scale.Spec.Replicas = d.Desired
	if err := r.Hub.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(scale)); err != nil {
		r.event(fhpa, corev1.EventTypeWarning, "FailedRescale", "Scale", "New size: %d; reason: %s; error: %v", d.Desired, d.Reason, err)
		setCondition(fhpa, v1alpha1.AutoscalerAbleToScale, false, "FailedUpdateScale", "the autoscaler was unable to update the target scale: "+err.Error())
		return fmt.Errorf("scaling %s/%s to %d: %w", frs.Namespace, frs.Name, d.Desired, err)
	}
	h.RecordScale(now, b, from, d.Desired)
	fhpa.Status.LastScaleTime = &metav1.Time{Time: now}
	setCondition(fhpa, v1alpha1.AutoscalerAbleToScale, true, "SucceededRescale", fmt.Sprintf("the autoscaler was able to update the target scale to %d", d.Desired))
	r.event(fhpa, corev1.EventTypeNormal, "SuccessfulRescale", "Scale", "New size: %d; reason: %s", d.Desired, d.Reason)
	log.Info("Rescaled", "autoscaler", klog.KObj(fhpa), "federatedReplicaSet", klog.KObj(frs), "from", from, "to", d.Desired, "reason", d.Reason)
	return nil
}

// gather reads every member the target runs in: its pods, the metrics the
// spec asks for (metrics.k8s.io only for resource metrics, so a member
// without metrics-server is not missing data for custom metrics) and the
// member's autoscalers on the MemberReplicaSet. A member that is not
// engaged, does not serve a metric's API or does not answer is missing
// data for that metric; its pods (cached, or as many as it last reported,
// from the template) count as pods without metrics.
func (r *Reconciler) gather(ctx context.Context, log logr.Logger, frs *v1alpha1.FederatedReplicaSet, sel labels.Selector,
	specs []v1alpha1.MetricSpec) ([]autoscale.Member, []string) {
	var out []autoscale.Member
	var conflicts []string
	resources := len(specs) == 0
	for _, s := range specs {
		resources = resources || s.Resource != nil || s.ContainerResource != nil
	}
	for _, cs := range frs.Status.Clusters {
		if cs.Target == 0 && cs.Replicas == 0 {
			continue
		}
		am := autoscale.Member{Name: cs.Name, Custom: map[int]autoscale.Values{}}
		m, ok := r.Members.Member(cs.Name)
		if !ok {
			if resources {
				am.Missing = "member not engaged"
			}
			for i, s := range specs {
				if !isResource(s) {
					am.Custom[i] = autoscale.Values{Missing: "member not engaged"}
				}
			}
			am.Pods = placeholders(frs, cs)
			out = append(out, am)
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, r.MemberTimeout)
		pods, err := m.Pods(mctx, frs.Namespace, sel)
		if err != nil || len(pods) == 0 {
			pods = placeholders(frs, cs)
		}
		am.Pods = withPodLevelRequests(pods, frs)
		if resources {
			if am.Usage, err = m.PodMetrics(mctx, frs.Namespace, sel); err != nil {
				am.Missing = "metrics.k8s.io: " + err.Error()
			}
		}
		for i, s := range specs {
			if isResource(s) {
				continue
			}
			v, err := m.CustomMetric(mctx, frs.Namespace, sel, s)
			if err != nil {
				v = autoscale.Values{Missing: err.Error()}
			}
			am.Custom[i] = v
		}
		hpas, err := m.Autoscalers(mctx, frs.Namespace, frs.Name)
		cancel()
		if err != nil {
			log.V(1).Info("Listing member HorizontalPodAutoscalers", "cluster", cs.Name, "reason", err.Error())
		}
		for _, h := range hpas {
			conflicts = append(conflicts, cs.Name+"/"+frs.Namespace+"/"+h)
		}
		out = append(out, am)
	}
	return out, conflicts
}

// withPodLevelRequests gives the listed pods the template's pod-level
// resources (spec.resources), which the member cache does not keep: every
// pod of the target is made from the template, and the pod-level requests
// are what a Resource metric's utilisation is measured against when set.
// The pods are the cache's copies, not shared objects.
func withPodLevelRequests(pods []*corev1.Pod, frs *v1alpha1.FederatedReplicaSet) []*corev1.Pod {
	rr := frs.Spec.Template.Spec.Resources
	if rr == nil {
		return pods
	}
	for _, p := range pods {
		if p.Spec.Resources == nil {
			p.Spec.Resources = rr.DeepCopy()
		}
	}
	return pods
}

func isResource(s v1alpha1.MetricSpec) bool {
	return s.Type == v1alpha1.ResourceMetricSourceType || s.Type == v1alpha1.ContainerResourceMetricSourceType
}

// placeholders stands for a member's pods when none can be listed: as many
// as it last reported, made from the template so their requests are right.
func placeholders(frs *v1alpha1.FederatedReplicaSet, cs v1alpha1.ClusterStatus) []*corev1.Pod {
	out := make([]*corev1.Pod, 0, cs.Replicas)
	for i := range cs.Replicas {
		out = append(out, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("unlisted-%d", i), UID: types.UID(fmt.Sprintf("%s/unlisted-%d", cs.Name, i))},
			Spec:       *frs.Spec.Template.Spec.DeepCopy(),
			Status:     corev1.PodStatus{Phase: corev1.PodRunning},
		})
	}
	return out
}

// reportConflicts sets MemberAutoscalerConflict and warns when it turns
// True; it returns whether there is a conflict.
func (r *Reconciler) reportConflicts(fhpa *v1alpha1.FederatedHorizontalPodAutoscaler, conflicts []string) bool {
	if len(conflicts) == 0 {
		setCondition(fhpa, v1alpha1.AutoscalerMemberConflict, false, "NoMemberAutoscaler", "no member HorizontalPodAutoscaler targets the MemberReplicaSets")
		return false
	}
	was := meta.IsStatusConditionTrue(fhpa.Status.Conditions, v1alpha1.AutoscalerMemberConflict)
	msg := "member HorizontalPodAutoscalers target the MemberReplicaSet: " + strings.Join(conflicts, ", ")
	setCondition(fhpa, v1alpha1.AutoscalerMemberConflict, true, "MemberHPATargetsMemberReplicaSet", msg)
	if !was {
		r.event(fhpa, corev1.EventTypeWarning, "MemberAutoscalerConflict", "Detect", "%s; remove them or this autoscaler", msg)
	}
	return true
}

// writeStatus writes the status when it changed, on the leader only.
func (r *Reconciler) writeStatus(ctx context.Context, old, next *v1alpha1.FederatedHorizontalPodAutoscaler) error {
	if equality.Semantic.DeepEqual(old.Status, next.Status) {
		return nil
	}
	if _, ok := r.Gate.Allowed(); !ok {
		return nil
	}
	if err := r.Hub.Status().Update(ctx, next); err != nil {
		if apierrors.IsConflict(err) {
			return nil // the next sync writes a fresh status
		}
		return fmt.Errorf("writing the status of autoscaler %s/%s: %w", next.Namespace, next.Name, err)
	}
	return nil
}

func selectorOf(scale *autoscalingv1.Scale, frs *v1alpha1.FederatedReplicaSet) (labels.Selector, error) {
	if scale.Status.Selector != "" {
		sel, err := labels.Parse(scale.Status.Selector)
		if err != nil {
			return nil, fmt.Errorf("parsing the target's selector %q: %w", scale.Status.Selector, err)
		}
		return sel, nil
	}
	if frs.Spec.Selector == nil {
		return nil, fmt.Errorf("the target %s has no selector", frs.Name)
	}
	sel, err := metav1.LabelSelectorAsSelector(frs.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("parsing the target's selector: %w", err)
	}
	return sel, nil
}

func setCondition(fhpa *v1alpha1.FederatedHorizontalPodAutoscaler, typ string, ok bool, reason, msg string) {
	st := metav1.ConditionFalse
	if ok {
		st = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&fhpa.Status.Conditions, metav1.Condition{Type: typ, Status: st, Reason: reason, Message: msg, ObservedGeneration: fhpa.Generation})
}

func (r *Reconciler) event(fhpa *v1alpha1.FederatedHorizontalPodAutoscaler, typ, reason, action, format string, args ...any) {
	if r.Recorder != nil {
		r.Recorder.Eventf(fhpa, nil, typ, reason, action, format, args...)
	}
}

// historyOf returns the autoscaler's history; a leader that has none yet
// starts from the scale events in the status.
func (r *Reconciler) historyOf(fhpa *v1alpha1.FederatedHorizontalPodAutoscaler) *autoscale.History {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.history == nil {
		r.history = map[types.UID]*autoscale.History{}
	}
	h, ok := r.history[fhpa.UID]
	if !ok {
		h = autoscale.HistoryFrom(fhpa.Status.RecentScaleEvents)
		r.history[fhpa.UID] = h
	}
	return h
}

func (r *Reconciler) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.history, uid)
}
