// Package rolloutctl holds what `kubectl replicafed` does to a rolling
// FederatedReplicaSet: promote a stage, pause, resume, undo and show the
// history. Every command is one patch of the object in the hub, the same
// change a user could make with kubectl annotate or kubectl patch; the
// replicafed leader acts on it. The choices (which stage, which revision)
// are pure functions, tested with tables.
package rolloutctl

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/rollout"
)

// ErrNotRolling is returned for a FederatedReplicaSet whose updateStrategy
// is not Rolling: these commands have nothing to act on.
var ErrNotRolling = errors.New("spec.updateStrategy.type is not Rolling")

func rolling(frs *v1alpha1.FederatedReplicaSet) error {
	if frs.Spec.UpdateStrategy == nil || frs.Spec.UpdateStrategy.Type != v1alpha1.UpdateRolling {
		return fmt.Errorf("%s/%s: %w", frs.Namespace, frs.Name, ErrNotRolling)
	}
	return nil
}

// PromoteStage returns the stage a promote command names: stage when given
// (it must be one of spec.updateStrategy.stages), else the stage awaiting
// promotion. Without a stage and with none awaiting, it fails and says
// where the rollout stands, rather than promote a stage that has not baked.
func PromoteStage(frs *v1alpha1.FederatedReplicaSet, stage string) (string, error) {
	if err := rolling(frs); err != nil {
		return "", err
	}
	if stage != "" {
		for _, s := range frs.Spec.UpdateStrategy.Stages {
			if s.Name == stage {
				return stage, nil
			}
		}
		return "", fmt.Errorf("%s/%s has no stage %q (stages: %s)", frs.Namespace, frs.Name, stage, stageNames(frs))
	}
	r := frs.Status.Rollout
	if r == nil || r.Phase != v1alpha1.PhaseAwaitingPromotion {
		return "", fmt.Errorf("no stage of %s/%s awaits promotion (rollout phase %q); name the stage to promote it ahead of time", frs.Namespace, frs.Name, phase(r))
	}
	return r.StageName, nil
}

func stageNames(frs *v1alpha1.FederatedReplicaSet) string {
	names := make([]string, 0, len(frs.Spec.UpdateStrategy.Stages))
	for _, s := range frs.Spec.UpdateStrategy.Stages {
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

func phase(r *v1alpha1.RolloutStatus) string {
	if r == nil {
		return "none"
	}
	return string(r.Phase)
}

// UndoTarget returns the revision an undo returns to: revision number to
// when it is not zero, else the newest revision whose template differs from
// the current spec.template (as `kubectl rollout undo` picks the previous
// revision). Undoing to the template already in spec is refused: it would
// change nothing.
func UndoTarget(revs []rollout.Revision, current *corev1.PodTemplateSpec, to int64) (rollout.Revision, error) {
	if to < 0 {
		return rollout.Revision{}, fmt.Errorf("--to-revision %d: must be 0 (the previous revision) or a revision number", to)
	}
	if to > 0 {
		i := slices.IndexFunc(revs, func(r rollout.Revision) bool { return r.Number == to })
		if i < 0 {
			return rollout.Revision{}, fmt.Errorf("revision %d is not in the history (kept: %s)", to, numbers(revs))
		}
		if equality.Semantic.DeepEqual(revs[i].Template, current) {
			return rollout.Revision{}, fmt.Errorf("revision %d is the current template; nothing to undo", to)
		}
		return revs[i], nil
	}
	var best *rollout.Revision
	for i := range revs {
		if equality.Semantic.DeepEqual(revs[i].Template, current) {
			continue
		}
		if best == nil || revs[i].Number > best.Number {
			best = &revs[i]
		}
	}
	if best == nil {
		return rollout.Revision{}, fmt.Errorf("no earlier revision to return to (kept: %s)", numbers(revs))
	}
	return *best, nil
}

func numbers(revs []rollout.Revision) string {
	if len(revs) == 0 {
		return "none"
	}
	s := make([]string, 0, len(revs))
	for _, r := range revs {
		s = append(s, strconv.FormatInt(r.Number, 10))
	}
	return strings.Join(s, ", ")
}
