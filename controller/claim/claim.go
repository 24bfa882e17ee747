// Package claim decides which pods a MemberReplicaSet owns: it keeps pods it
// controls that still match, releases those that stopped matching, adopts
// matching orphans, and leaves pods controlled by anyone else alone, with
// upstream's ControllerRefManager rules.
package claim

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// Kind is the owner kind pods point to.
const Kind = "MemberReplicaSet"

// OwnerRef is the controller reference a pod of mrs carries.
func OwnerRef(mrs *v1alpha1.MemberReplicaSet) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         v1alpha1.GroupVersion.String(),
		Kind:               Kind,
		Name:               mrs.Name,
		UID:                mrs.UID,
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

type patchMeta struct {
	OwnerReferences []any     `json:"ownerReferences"`
	UID             types.UID `json:"uid"`
}

// AdoptPatch is the strategic merge patch that makes mrs the pod's controller.
// ownerReferences merge by uid, so a non-controller reference to mrs is
// upgraded in place; the pod UID guards against a recreated pod.
func AdoptPatch(mrs *v1alpha1.MemberReplicaSet, podUID types.UID) ([]byte, error) {
	return json.Marshal(map[string]patchMeta{"metadata": {
		OwnerReferences: []any{OwnerRef(mrs)}, UID: podUID,
	}})
}

// ReleasePatch is the strategic merge patch removing ownerUID's reference.
func ReleasePatch(ownerUID, podUID types.UID) ([]byte, error) {
	return json.Marshal(map[string]patchMeta{"metadata": {
		OwnerReferences: []any{map[string]any{"$patch": "delete", "uid": ownerUID}}, UID: podUID,
	}})
}

// RecheckOwner returns the adoption guard: a live (uncached) read of mrs that
// fails when it is gone, was recreated under a new UID, or is being deleted,
// so a stale cache cannot make a dying owner adopt pods.
func RecheckOwner(live client.Reader, mrs *v1alpha1.MemberReplicaSet) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		fresh := &v1alpha1.MemberReplicaSet{}
		if err := live.Get(ctx, client.ObjectKeyFromObject(mrs), fresh); err != nil {
			return fmt.Errorf("reading MemberReplicaSet %s/%s: %w", mrs.Namespace, mrs.Name, err)
		}
		if fresh.UID != mrs.UID {
			return fmt.Errorf("original MemberReplicaSet %s/%s is gone: got uid %s, wanted %s", mrs.Namespace, mrs.Name, fresh.UID, mrs.UID)
		}
		if fresh.DeletionTimestamp != nil {
			return fmt.Errorf("%s/%s has just been deleted at %v", mrs.Namespace, mrs.Name, fresh.DeletionTimestamp)
		}
		return nil
	}
}

// Claimer claims pods for one MemberReplicaSet during one sync.
type Claimer struct {
	// Patcher sends adoption and release patches.
	Patcher client.Writer
	// Owner is the cached MemberReplicaSet.
	Owner *v1alpha1.MemberReplicaSet
	// Selector is Owner's pod selector.
	Selector labels.Selector
	// Deleting is true when the owner is going away (its DeletionTimestamp or
	// the hub object's); then nothing is adopted or released.
	Deleting bool
	// CanAdopt is consulted at most once per Claim, before the first adoption.
	CanAdopt func(ctx context.Context) error

	once     sync.Once
	adoptErr error
}

// Claim returns the pods the owner controls after adopting and releasing as
// needed, with every patch error aggregated (any error fails the sync).
func (c *Claimer) Claim(ctx context.Context, pods []*corev1.Pod) ([]*corev1.Pod, error) {
	var claimed []*corev1.Pod
	var errs []error
	for _, p := range pods {
		ok, err := c.claimOne(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			claimed = append(claimed, p)
		}
	}
	return claimed, utilerrors.NewAggregate(errs)
}

func (c *Claimer) claimOne(ctx context.Context, p *corev1.Pod) (bool, error) {
	matches := c.Selector.Matches(labels.Set(p.Labels))
	if ref := metav1.GetControllerOfNoCopy(p); ref != nil {
		if ref.UID != c.Owner.UID {
			return false, nil
		}
		if matches {
			return true, nil
		}
		if c.Deleting {
			return false, nil
		}
		if err := c.release(ctx, p); err != nil {
			if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
				return false, nil
			}
			return false, err
		}
		return false, nil
	}
	if c.Deleting || !matches || p.DeletionTimestamp != nil ||
		(c.Owner.Namespace != "" && c.Owner.Namespace != p.Namespace) {
		return false, nil
	}
	if err := c.adopt(ctx, p); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

func (c *Claimer) adopt(ctx context.Context, p *corev1.Pod) error {
	c.once.Do(func() {
		if c.CanAdopt != nil {
			c.adoptErr = c.CanAdopt(ctx)
		}
	})
	if c.adoptErr != nil {
		return fmt.Errorf("can't adopt Pod %s/%s (%s): %w", p.Namespace, p.Name, p.UID, c.adoptErr)
	}
	data, err := AdoptPatch(c.Owner, p.UID)
	if err != nil {
		return fmt.Errorf("building adoption patch for pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Adopting pod", "pod", klog.KObj(p), "owner", klog.KObj(c.Owner))
	return c.patch(ctx, p, data)
}

func (c *Claimer) release(ctx context.Context, p *corev1.Pod) error {
	data, err := ReleasePatch(c.Owner.UID, p.UID)
	if err != nil {
		return fmt.Errorf("building release patch for pod %s/%s: %w", p.Namespace, p.Name, err)
	}
	klog.FromContext(ctx).V(2).Info("Releasing pod", "pod", klog.KObj(p), "owner", klog.KObj(c.Owner))
	return c.patch(ctx, p, data)
}

func (c *Claimer) patch(ctx context.Context, p *corev1.Pod, data []byte) error {
	// A fresh object, so the response never overwrites a cached pod.
	target := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}}
	if err := c.Patcher.Patch(ctx, target, client.RawPatch(types.StrategicMergePatchType, data)); err != nil {
		return fmt.Errorf("patching pod %s/%s owner references: %w", p.Namespace, p.Name, err)
	}
	return nil
}
