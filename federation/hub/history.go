package hub

import (
	"context"
	"errors"

	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/history"
	"github.com/replicafed/replicafed/federation/rollout"
)

// recordHistory keeps a ControllerRevision for each revision rec has and
// prev had not, then prunes the records of revisions that are no longer
// live beyond revisionHistoryLimit. The history serves undo only, so a
// failure is reported on the object and does not hold the rollout back.
func (r *Reconciler) recordHistory(ctx context.Context, frs *v1alpha1.FederatedReplicaSet, prev, rec *rollout.Record) {
	if r.History == nil {
		return
	}
	log := ctrl.LoggerFrom(ctx).WithValues("frs", klog.KObj(frs))
	had := map[string]bool{}
	for _, l := range prev.Revisions {
		had[l.Name] = true
	}
	live := map[string]bool{}
	added := false
	for i := range rec.Revisions {
		l := &rec.Revisions[i]
		live[l.Name] = true
		if had[l.Name] {
			continue
		}
		rev := rollout.Revision{Name: l.Name, Hash: l.Hash, Number: l.Number, Template: &l.Template}
		if err := history.Record(ctx, r.History, frs, rev); err != nil {
			// A hash collision with a kept record leaves that revision out
			// of the history; undo can still reach every other one.
			reason := "HistoryFailed"
			if errors.Is(err, history.ErrCollision) {
				reason = "HistoryCollision"
			}
			log.Error(err, "Recording a revision in the history failed", "revision", l.Name)
			r.warn(frs, reason, reason, "recording revision %d (%s): %v", l.Number, l.Name, err)
			continue
		}
		log.V(2).Info("Revision recorded", "revision", l.Name, "number", l.Number)
		added = true
	}
	if !added && len(prev.Revisions) == len(rec.Revisions) {
		return
	}
	limit := int32(v1alpha1.DefaultRevisionHistoryLimit)
	if u := frs.Spec.UpdateStrategy; u != nil && u.RevisionHistoryLimit != nil {
		limit = *u.RevisionHistoryLimit
	}
	if n, err := history.Prune(ctx, r.History, frs, live, limit); err != nil {
		log.Error(err, "Pruning the history failed")
		r.warn(frs, "HistoryFailed", "HistoryFailed", "pruning the history: %v", err)
	} else if n > 0 {
		log.V(2).Info("History pruned", "deleted", n, "limit", limit)
	}
}
