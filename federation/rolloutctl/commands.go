package rolloutctl

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/history"
	"github.com/replicafed/replicafed/federation/rollout"
)

func get(ctx context.Context, c client.Reader, key types.NamespacedName) (*v1alpha1.FederatedReplicaSet, error) {
	var frs v1alpha1.FederatedReplicaSet
	if err := c.Get(ctx, key, &frs); err != nil {
		return nil, fmt.Errorf("reading FederatedReplicaSet %s: %w", key, err)
	}
	return &frs, nil
}

// Promote sets the promote annotation to the stage PromoteStage chooses and
// returns that stage.
func Promote(ctx context.Context, c client.Client, key types.NamespacedName, stage string) (string, error) {
	frs, err := get(ctx, c, key)
	if err != nil {
		return "", err
	}
	stage, err = PromoteStage(frs, stage)
	if err != nil {
		return "", err
	}
	base := frs.DeepCopy()
	if frs.Annotations == nil {
		frs.Annotations = map[string]string{}
	}
	frs.Annotations[v1alpha1.AnnotationPromote] = stage
	if err := c.Patch(ctx, frs, client.MergeFrom(base)); err != nil {
		return "", fmt.Errorf("promoting stage %q of %s: %w", stage, key, err)
	}
	return stage, nil
}

// SetPaused sets spec.updateStrategy.paused and reports whether it changed.
func SetPaused(ctx context.Context, c client.Client, key types.NamespacedName, paused bool) (bool, error) {
	frs, err := get(ctx, c, key)
	if err != nil {
		return false, err
	}
	if err := rolling(frs); err != nil {
		return false, err
	}
	if frs.Spec.UpdateStrategy.Paused == paused {
		return false, nil
	}
	base := frs.DeepCopy()
	frs.Spec.UpdateStrategy.Paused = paused
	if err := c.Patch(ctx, frs, client.MergeFrom(base)); err != nil {
		return false, fmt.Errorf("setting paused=%t on %s: %w", paused, key, err)
	}
	return true, nil
}

// ErrTemplateChanged is returned by Undo when spec.template changed between
// its read and its write: the command does not overwrite another change.
var ErrTemplateChanged = errors.New("spec.template changed meanwhile; run the command again")

// Undo puts the template of the revision UndoTarget chooses back into
// spec.template and returns that revision. The patch carries the object's
// resourceVersion. A conflict is tried again from a fresh read (the hub
// writes status often, which changes the resourceVersion too) unless the
// fresh read shows another template than the first one: a template changed
// since it was read is not overwritten (ErrTemplateChanged).
func Undo(ctx context.Context, c client.Client, key types.NamespacedName, to int64) (rollout.Revision, error) {
	var target rollout.Revision
	var first *corev1.PodTemplateSpec
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		frs, err := get(ctx, c, key)
		if err != nil {
			return err
		}
		if first == nil {
			first = frs.Spec.Template.DeepCopy()
		} else if !equality.Semantic.DeepEqual(*first, frs.Spec.Template) {
			return fmt.Errorf("undoing %s: %w", key, ErrTemplateChanged)
		}
		target, err = undoOnce(ctx, c, key, frs, to)
		return err
	})
	return target, err
}

// undoOnce is one attempt of Undo on frs as read.
func undoOnce(ctx context.Context, c client.Client, key types.NamespacedName, frs *v1alpha1.FederatedReplicaSet, to int64) (rollout.Revision, error) {
	if err := rolling(frs); err != nil {
		return rollout.Revision{}, err
	}
	revs, err := history.List(ctx, c, frs)
	if err != nil {
		return rollout.Revision{}, err
	}
	target, err := UndoTarget(revs, &frs.Spec.Template, to)
	if err != nil {
		return rollout.Revision{}, fmt.Errorf("undoing %s: %w", key, err)
	}
	base := frs.DeepCopy()
	frs.Spec.Template = *target.Template.DeepCopy()
	if err := c.Patch(ctx, frs, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return rollout.Revision{}, fmt.Errorf("restoring revision %d into %s: %w", target.Number, key, err)
	}
	return target, nil
}

// Row is one line of `kubectl replicafed history`.
type Row struct {
	// Number is the revision's number.
	Number int64
	// Name is the revision's name (FRS name and template hash).
	Name string
	// Images are the template's container images, in order.
	Images string
	// Current is true for the revision of spec.template.
	Current bool
}

// History returns the kept revisions, oldest first.
func History(ctx context.Context, c client.Reader, key types.NamespacedName) ([]Row, error) {
	frs, err := get(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if err := rolling(frs); err != nil {
		return nil, err
	}
	revs, err := history.List(ctx, c, frs)
	if err != nil {
		return nil, err
	}
	rows := make([]Row, 0, len(revs))
	for _, r := range revs {
		var images []string
		for _, ct := range r.Template.Spec.Containers {
			images = append(images, ct.Image)
		}
		rows = append(rows, Row{
			Number:  r.Number,
			Name:    r.Name,
			Images:  strings.Join(images, ","),
			Current: equality.Semantic.DeepEqual(r.Template, &frs.Spec.Template),
		})
	}
	return rows, nil
}
