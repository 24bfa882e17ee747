package hub

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/fedref"
)

func TestDeletionOrphans(t *testing.T) {
	tests := []struct {
		name   string
		policy v1alpha1.DeletionPolicy
		final  []string
		annot  string
		seen   bool
		want   bool
	}{
		{"default policy, nothing seen: pods deleted", "", nil, "", false, false},
		{"Delete policy, nothing seen", v1alpha1.DeletionPolicyDelete, nil, "", false, false},
		{"Orphan policy, nothing seen: pods kept", v1alpha1.DeletionPolicyOrphan, nil, "", false, true},
		{"orphan finalizer present", "", []string{metav1.FinalizerOrphanDependents}, "", false, true},
		{"orphan seen on the event path", v1alpha1.DeletionPolicyDelete, nil, "", true, true},
		{"orphan recorded by an earlier leader", "", nil, "Orphan", false, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := frs(1, deleting(tc.final...))
			f.Spec.DeletionPolicy = tc.policy
			if tc.annot != "" {
				f.Annotations = map[string]string{AnnotationPropagation: tc.annot}
			}
			if got := deletionOrphans(f, tc.seen); got != tc.want {
				t.Fatalf("deletionOrphans = %v, want %v", got, tc.want)
			}
		})
	}
}

func memberPod(name string, owner string, ownerUID types.UID, labels map[string]string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("pod-" + name), Labels: labels}}
	if owner != "" {
		p.OwnerReferences = []metav1.OwnerReference{{
			APIVersion: v1alpha1.GroupVersion.String(), Kind: "MemberReplicaSet", Name: owner, UID: ownerUID, Controller: ptr.To(true),
		}}
	}
	return p
}

// The member's garbage collector finished the foreground delete of the
// MemberReplicaSet before it had seen two fresh pods: the finalizer holds
// until replicafed has deleted them, and other pods are left alone.
func TestDeletionWaitsForPodsThatOutliveTheMemberReplicaSet(t *testing.T) {
	web := map[string]string{"app": "web"}
	objs := []client.Object{
		memberPod("web-late1", "web", "mrs-uid-1", web),
		memberPod("web-late2", "web", "mrs-uid-1", web),
		memberPod("other-owner", "api", "mrs-api", web),
		memberPod("unowned", "", "", web),
		memberPod("other-labels", "web", "mrs-uid-1", map[string]string{"app": "db"}),
	}
	var deletes []string
	funcs := interceptor.Funcs{Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
		o := &client.DeleteOptions{}
		o.ApplyOptions(opts)
		if o.Preconditions == nil || o.Preconditions.UID == nil || *o.Preconditions.UID != obj.GetUID() {
			t.Errorf("delete of %s without its UID precondition", obj.GetName())
		}
		deletes = append(deletes, obj.GetName())
		return c.Delete(ctx, obj, opts...)
	}}
	e := newEnv(t, true, frs(2, deleting()), healthy("a"), map[string][]client.Object{"a": objs}, map[string]interceptor.Funcs{"a": funcs})
	_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2})

	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	hubObj := get(t, e.hub)
	if !contains(hubObj.Finalizers, v1alpha1.FinalizerCascade) {
		t.Fatalf("finalizer released while pods of the MemberReplicaSet were left")
	}
	if len(deletes) != 2 || !contains(deletes, "web-late1") || !contains(deletes, "web-late2") {
		t.Fatalf("deleted %v, want exactly the two leftover pods", deletes)
	}
	for _, keep := range []string{"other-owner", "unowned", "other-labels"} {
		if err := e.members["a"].Get(context.Background(), types.NamespacedName{Namespace: "default", Name: keep}, &corev1.Pod{}); err != nil {
			t.Fatalf("pod %s: %v", keep, err)
		}
	}
	// Next pass: nothing left, the finalizer goes.
	if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
		t.Fatal(err)
	}
	err := e.hub.Get(context.Background(), req().NamespacedName, hubObj)
	if !apierrors.IsNotFound(err) && (err != nil || contains(hubObj.Finalizers, v1alpha1.FinalizerCascade)) {
		t.Fatalf("finalizer not released after the pods were gone: %v %v", err, hubObj.Finalizers)
	}
}

// spec.deletionPolicy Orphan keeps the pods when no replica saw the orphan
// intent; leftover pods are then not touched either.
func TestDeletionPolicyOrphanWhenIntentUnseen(t *testing.T) {
	var policies []metav1.DeletionPropagation
	obj := frs(2, deleting())
	obj.Spec.DeletionPolicy = v1alpha1.DeletionPolicyOrphan
	e := newEnv(t, true, obj, healthy("a"), map[string][]client.Object{"a": {mrs("uid-1")}},
		map[string]interceptor.Funcs{"a": recordDeletes(&policies)})
	e.r.Intents = &DeletionIntents{}
	for range 3 {
		if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
			t.Fatal(err)
		}
	}
	if len(policies) != 1 || policies[0] != metav1.DeletePropagationOrphan {
		t.Fatalf("member delete policies = %v, want [Orphan]", policies)
	}
}
