// Package history keeps one ControllerRevision per revision of a rolling
// FederatedReplicaSet in the hub, as StatefulSets and DaemonSets keep
// theirs. The records outlive the revisions' MemberReplicaSets, so
// `kubectl replicafed undo` and `history` can name any kept template, and
// a new leader can number the next revision without the members.
package history

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/rollout"
)

// ErrCollision is returned by Record when a record of the revision's name
// holds a different template: the caller raises the collision count and
// identifies the template again.
var ErrCollision = errors.New("a different template already has this revision name")

// data is what a record's Data holds: the shape of a strategic-merge patch
// of the FederatedReplicaSet, as DaemonSets store theirs, so a record reads
// like the change it stands for.
type data struct {
	Spec struct {
		Template *corev1.PodTemplateSpec `json:"template"`
	} `json:"spec"`
}

// Build returns the record of rev, owned by frs.
func Build(frs *v1alpha1.FederatedReplicaSet, rev rollout.Revision) (*appsv1.ControllerRevision, error) {
	if rev.Template == nil {
		return nil, fmt.Errorf("building the history record %s: the revision has no template", rev.Name)
	}
	var d data
	d.Spec.Template = rev.Template
	raw, err := json.Marshal(&d)
	if err != nil {
		return nil, fmt.Errorf("encoding the template of revision %s: %w", rev.Name, err)
	}
	return &appsv1.ControllerRevision{
		ObjectMeta: metav1.ObjectMeta{
			Name:      rev.Name,
			Namespace: frs.Namespace,
			Labels: map[string]string{
				v1alpha1.LabelFederatedName: frs.Name,
				v1alpha1.LabelTemplateHash:  rev.Hash,
			},
			OwnerReferences: []metav1.OwnerReference{ownerRef(frs)},
		},
		Data:     runtime.RawExtension{Raw: raw},
		Revision: rev.Number,
	}, nil
}

func ownerRef(frs *v1alpha1.FederatedReplicaSet) metav1.OwnerReference {
	yes := true
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               "FederatedReplicaSet",
		Name:               frs.Name,
		UID:                frs.UID,
		Controller:         &yes,
		BlockOwnerDeletion: &yes,
	}
}

// Decode reads a record back into a revision.
func Decode(cr *appsv1.ControllerRevision) (rollout.Revision, error) {
	var d data
	if err := json.Unmarshal(cr.Data.Raw, &d); err != nil {
		return rollout.Revision{}, fmt.Errorf("decoding history record %s/%s: %w", cr.Namespace, cr.Name, err)
	}
	if d.Spec.Template == nil {
		return rollout.Revision{}, fmt.Errorf("decoding history record %s/%s: no spec.template", cr.Namespace, cr.Name)
	}
	return rollout.Revision{
		Name:     cr.Name,
		Hash:     cr.Labels[v1alpha1.LabelTemplateHash],
		Number:   cr.Revision,
		Template: d.Spec.Template,
	}, nil
}

// Record writes rev's record. A record that already has rev's template is
// kept, its number raised to rev's (a rollback makes an old template the
// newest revision, as Deployments renumber theirs) and its owner set to frs
// (an FRS deleted and created again under the same name). A record of the
// same name with another template fails with ErrCollision.
func Record(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet, rev rollout.Revision) error {
	want, err := Build(frs, rev)
	if err != nil {
		return err
	}
	switch err := c.Create(ctx, want); {
	case err == nil:
		return nil
	case !apierrors.IsAlreadyExists(err):
		return fmt.Errorf("creating history record %s/%s: %w", want.Namespace, want.Name, err)
	}
	var got appsv1.ControllerRevision
	if err := c.Get(ctx, client.ObjectKeyFromObject(want), &got); err != nil {
		return fmt.Errorf("reading history record %s/%s: %w", want.Namespace, want.Name, err)
	}
	old, err := Decode(&got)
	if err != nil {
		return err
	}
	if !equality.Semantic.DeepEqual(old.Template, rev.Template) {
		return fmt.Errorf("recording revision %s: %w", rev.Name, ErrCollision)
	}
	if got.Revision == rev.Number && ownedBy(&got, frs) {
		return nil
	}
	got.Revision = rev.Number
	got.OwnerReferences = []metav1.OwnerReference{ownerRef(frs)}
	if err := c.Update(ctx, &got); err != nil {
		return fmt.Errorf("renumbering history record %s/%s to %d: %w", got.Namespace, got.Name, rev.Number, err)
	}
	return nil
}

func ownedBy(cr *appsv1.ControllerRevision, frs *v1alpha1.FederatedReplicaSet) bool {
	ref := metav1.GetControllerOf(cr)
	return ref != nil && ref.UID == frs.UID
}

// List returns frs's revisions, oldest number first. Records another
// object owns (a deleted FRS of the same name, not yet collected) are left
// out; a record that does not decode fails the call, since undo must not
// pick a revision from a partial list.
func List(ctx context.Context, c client.Reader, frs *v1alpha1.FederatedReplicaSet) ([]rollout.Revision, error) {
	var l appsv1.ControllerRevisionList
	if err := c.List(ctx, &l, client.InNamespace(frs.Namespace), client.MatchingLabels{v1alpha1.LabelFederatedName: frs.Name}); err != nil {
		return nil, fmt.Errorf("listing the history of %s/%s: %w", frs.Namespace, frs.Name, err)
	}
	out := make([]rollout.Revision, 0, len(l.Items))
	for i := range l.Items {
		if !ownedBy(&l.Items[i], frs) {
			continue
		}
		r, err := Decode(&l.Items[i])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	slices.SortFunc(out, byNumber)
	return out, nil
}

func byNumber(a, b rollout.Revision) int {
	return cmp.Or(cmp.Compare(a.Number, b.Number), cmp.Compare(a.Name, b.Name))
}

// Stale names the records to delete so that at most limit revisions that
// are not live remain: the oldest numbers go first. Live revisions (the
// update and stable revisions and any with pods or targets) are never
// named, whatever the limit.
func Stale(revs []rollout.Revision, live map[string]bool, limit int32) []string {
	var old []rollout.Revision
	for _, r := range revs {
		if !live[r.Name] {
			old = append(old, r)
		}
	}
	excess := len(old) - int(max(limit, 0))
	if excess <= 0 {
		return nil
	}
	slices.SortFunc(old, byNumber)
	names := make([]string, 0, excess)
	for _, r := range old[:excess] {
		names = append(names, r.Name)
	}
	return names
}

// Prune deletes the records Stale names and returns how many it deleted.
func Prune(ctx context.Context, c client.Client, frs *v1alpha1.FederatedReplicaSet, live map[string]bool, limit int32) (int, error) {
	revs, err := List(ctx, c, frs)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, name := range Stale(revs, live, limit) {
		cr := &appsv1.ControllerRevision{ObjectMeta: metav1.ObjectMeta{Namespace: frs.Namespace, Name: name}}
		if err := c.Delete(ctx, cr); err != nil && !apierrors.IsNotFound(err) {
			return n, fmt.Errorf("pruning history record %s/%s: %w", frs.Namespace, name, err)
		}
		n++
	}
	return n, nil
}
