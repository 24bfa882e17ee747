package engine

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/ranking"
	"github.com/replicafed/replicafed/controller/slowstart"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/metrics"
)

// manageReplicas creates or deletes pods toward the target, at most
// BurstReplicas, and records in s whether any was.
func (e *Engine) manageReplicas(ctx context.Context, s *syncScope) error {
	diff := len(s.claimed) - int(s.mrs.Spec.Replicas)
	var done int
	var err error
	switch {
	case diff < 0:
		done, err = e.createPods(ctx, s.key, s.mrs, s.w, s.selector, len(s.claimed), min(-diff, e.o.BurstReplicas))
	case diff > 0:
		done, err = e.deletePods(ctx, s.key, s.mrs, s.selector, s.claimed, min(diff, e.o.BurstReplicas))
	}
	s.acted = done > 0
	return err
}

// createPods creates n pods from the template (active are counted now),
// reserving their names as expectations first and sending them in
// slow-start batches, and returns how many it created. A creation that did
// not happen settles its expectation; one whose outcome is unknown keeps
// its name.
func (e *Engine) createPods(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, w *Workload, selector labels.Selector, active, n int) (int, error) {
	log := ctrl.LoggerFrom(ctx)
	// Refused before any expectation or call, so a bad template costs nothing
	// but an event and the ReplicaFailure condition.
	if err := validateTemplate(&w.Template, selector); err != nil {
		e.event(mrs, corev1.EventTypeWarning, ReasonFailedCreate, "Create", "Error creating: %v", err)
		return 0, err
	}
	names, err := e.o.Store.ExpectCreations(ctx, key, expectations.CreateIntent{
		Target: mrs.Spec.Replicas, Active: active, Count: n, Prefix: mrs.Name + "-"})
	if err != nil {
		return 0, fmt.Errorf("reserving %d pod creations: %w", n, err)
	}
	log.V(1).Info("Too few replicas", "need", mrs.Spec.Replicas, "active", active, "creating", len(names))
	done := make([]bool, len(names))
	createErrs := make([]error, len(names))
	sent := make([]bool, len(names))
	created := make([]string, len(names))
	successes, err := slowstart.Run(len(names), 1, func(i int) error {
		pod := NewPod(mrs, &w.Template, names[i])
		sent[i] = true
		cerr := e.o.Client.Create(ctx, pod)
		switch {
		case cerr == nil:
			done[i] = true
			// The API server names the pod when the store gives no name.
			created[i] = pod.Name
			countPodOperation(e.o.Cluster, ReasonSuccessfulCreate)
			return nil
		case names[i] != "" && apierrors.IsAlreadyExists(cerr):
			// A reserved name that exists was created by an earlier attempt.
			done[i] = true
			return nil
		case apierrors.HasStatusCause(cerr, corev1.NamespaceTerminatingCause):
			// Every create will fail until the namespace is gone; upstream
			// counts this as success and stays quiet.
			done[i] = true
			return nil
		}
		createErrs[i] = cerr
		e.event(mrs, corev1.EventTypeWarning, ReasonFailedCreate, "Create", "Error creating: %v", cerr)
		return fmt.Errorf("creating pod for %s: %w", klog.KObj(mrs), cerr)
	})
	made := e.podsEvent(mrs, ReasonSuccessfulCreate, "Create", "Created", created)
	if skipped := len(names) - successes; skipped > 0 {
		log.V(2).Info("Slow-start failure, lowering expectations", "skipped", skipped)
	}
	for i, ok := range done {
		switch {
		case ok:
		case sent[i] && names[i] != "" && !writeRefused(createErrs[i]):
			// The pod may exist or still appear (a timeout, a cancelled
			// call): keep the name for the slot, never a new one.
			e.o.Store.CreationUnknown(key, names[i])
		default:
			e.o.Store.CreationFailed(key, names[i])
		}
	}
	return made, err
}

// event counts a failed pod create or delete and records the event in the
// member, one per failure as upstream.
func (e *Engine) event(mrs *v1alpha1.MemberReplicaSet, typ, reason, action, note string, args ...any) {
	countPodOperation(e.o.Cluster, reason)
	if e.o.Recorder != nil {
		e.o.Recorder.Eventf(mrs, nil, typ, reason, action, note, args...)
	}
}

// podsEvent records one Normal event for the pods one sync created or
// deleted ("" entries are skipped) and returns how many it names. Upstream records one per pod; with the
// events.k8s.io recorder the second event of an object, reason and action
// starts a series, which costs a PATCH at once and another 6 - 12 minutes
// later. One event per sync costs a single write for a MemberReplicaSet of
// a few pods, and a sync that touches one pod writes upstream's exact note.
func (e *Engine) podsEvent(mrs *v1alpha1.MemberReplicaSet, reason, action, verb string, names []string) int {
	note, n := podsNote(verb, names)
	if n > 0 && e.o.Recorder != nil {
		e.o.Recorder.Eventf(mrs, nil, corev1.EventTypeNormal, reason, action, "%s", note)
	}
	return n
}

// maxNotedPods is how many pod names one event's note lists; events.k8s.io
// notes are limited to 1 kB.
const maxNotedPods = 10

// podsNote is the note of an event for the named pods ("" entries are
// skipped): upstream's "Created pod: a" for one, "Created 3 pods: a, b, c"
// for several, the names cut after maxNotedPods. n is how many names are
// not empty; the note is empty when none is.
func podsNote(verb string, names []string) (note string, n int) {
	var listed []string
	for _, name := range names {
		if name == "" {
			continue
		}
		n++
		if len(listed) < maxNotedPods {
			listed = append(listed, name)
		}
	}
	switch {
	case n == 0:
		return "", 0
	case n == 1:
		return fmt.Sprintf("%s pod: %s", verb, listed[0]), 1
	}
	note = fmt.Sprintf("%s %d pods: %s", verb, n, strings.Join(listed, ", "))
	if n > len(listed) {
		note += fmt.Sprintf(" and %d more", n-len(listed))
	}
	return note, n
}

// countPodOperation counts a pod create or delete outcome by its event
// reason: every outcome passes here once.
func countPodOperation(cluster, reason string) {
	switch reason {
	case ReasonSuccessfulCreate:
		metrics.PodOperations.WithLabelValues(cluster, "create", "success").Inc()
	case ReasonFailedCreate:
		metrics.PodOperations.WithLabelValues(cluster, "create", "failure").Inc()
	case ReasonSuccessfulDelete:
		metrics.PodOperations.WithLabelValues(cluster, "delete", "success").Inc()
	case ReasonFailedDelete:
		metrics.PodOperations.WithLabelValues(cluster, "delete", "failure").Inc()
	}
}

// ErrNotSent marks a member write that a client-side fence stopped before it
// left the process (the leader's write lease had lapsed): its outcome is
// known, nothing was created or deleted.
var ErrNotSent = errors.New("member write not sent")

// writeRefused reports whether a pod create or delete failed in a way that
// proves it did not happen: it never left (ErrNotSent), or the API server
// answered with a client error other than a timeout. Anything else (5xx,
// timeouts, transport errors, a cancelled context) leaves the outcome
// unknown.
func writeRefused(err error) bool {
	if errors.Is(err, ErrNotSent) {
		return true
	}
	var st apierrors.APIStatus
	if err == nil || !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout && !apierrors.IsTimeout(err) && !apierrors.IsServerTimeout(err)
}

// validateTemplate refuses a template whose pods the selector would not
// match, as upstream's pod creation does.
func validateTemplate(t *corev1.PodTemplateSpec, selector labels.Selector) error {
	if len(t.Labels) == 0 {
		return errors.New("unable to create pods, no labels")
	}
	if !selector.Matches(labels.Set(t.Labels)) {
		return fmt.Errorf("unable to create pods: template labels %v do not match selector %v", t.Labels, selector)
	}
	return nil
}

// deletePods deletes n of the active pods, ranked as upstream (plus node
// cost tiers when the spec asks), expecting their deletions first.
func (e *Engine) deletePods(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, selector labels.Selector, active []*corev1.Pod, n int) (int, error) {
	log := ctrl.LoggerFrom(ctx)
	// The MemberReplicaSet stands in for a Deployment-owned ReplicaSet with no
	// siblings: related pods are the ones its selector matches.
	var related corev1.PodList
	if err := e.o.Client.List(ctx, &related, client.InNamespace(mrs.Namespace),
		client.MatchingLabelsSelector{Selector: selector}, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "Listing related pods, ranking without colocation")
	}
	rel := make([]*corev1.Pod, len(related.Items))
	for i := range related.Items {
		rel[i] = &related.Items[i]
	}
	candidates := append([]*corev1.Pod(nil), active...)
	var tierOf func(*corev1.Pod) ranking.NodeTier
	if nc := mrs.Spec.NodeCost; nc != nil && n < len(active) {
		tierOf = e.nodeTiers(ctx, nc)
	}
	victims := ranking.PodsToDelete(candidates, rel, n, e.o.Clock.Now(), tierOf)
	refs := make([]expectations.PodRef, len(victims))
	for i, p := range victims {
		refs[i] = expectations.PodRef{Name: p.Name, UID: p.UID}
	}
	if err := e.o.Store.ExpectDeletions(ctx, key, refs); err != nil {
		return 0, fmt.Errorf("recording %d pod deletions: %w", len(refs), err)
	}
	log.V(1).Info("Too many replicas", "need", mrs.Spec.Replicas, "active", len(active), "deleting", len(victims), "nodeCost", tierOf != nil)
	return e.deleteExact(ctx, key, mrs, refs)
}

// deleteExact deletes the given pods of mrs's namespace in parallel, each
// only if its UID still matches, and returns how many it deleted. Their
// deletions must already be expected in the store; a delete that fails
// settles its expectation at once.
func (e *Engine) deleteExact(ctx context.Context, key fedref.MemberObject, mrs *v1alpha1.MemberReplicaSet, pods []expectations.PodRef) (int, error) {
	errs := make(chan error, len(pods))
	deleted := make([]string, len(pods))
	var wg sync.WaitGroup
	for i, p := range pods {
		wg.Go(func() {
			target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: mrs.Namespace, Name: p.Name}}
			uid := p.UID
			err := e.o.Client.Delete(ctx, target, client.Preconditions{UID: &uid})
			switch {
			case err == nil:
				deleted[i] = p.Name
				countPodOperation(e.o.Cluster, ReasonSuccessfulDelete)
				return
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				// Our pod is gone (or replaced): nothing to wait for.
				e.o.Store.DeletionObserved(key, p.Name)
				return
			case writeRefused(err):
				// It did not happen and the informer will not report it.
				e.o.Store.DeletionObserved(key, p.Name)
			default:
				// It may still land (a timeout, a call cancelled by a
				// handover): the expectation stays, so neither this leader
				// nor the next chooses another victim while this one may
				// still go; the next sync settles it from a quorum list
				// and sends what is still due again (upstream settles
				// every failed delete at once).
				e.verified.uncertain(key)
			}
			e.event(mrs, corev1.EventTypeWarning, ReasonFailedDelete, "Delete", "Error deleting: %v", err)
			errs <- fmt.Errorf("unable to delete pods: %w", err)
		})
	}
	wg.Wait()
	n := e.podsEvent(mrs, ReasonSuccessfulDelete, "Delete", "Deleted", deleted)
	select {
	case err := <-errs:
		return n, err
	default:
		return n, nil
	}
}
