package hub

import (
	"context"
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
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
		// Someone else's pod with replicafed's owner name and labels: not
		// deleted, and it does not hold the deletion.
		memberPod("forged", "web", "mrs-forged", web),
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
	obj := frs(2, deleting())
	obj.Annotations = map[string]string{AnnotationMemberOwners: `{"a":"mrs-uid-1"}`}
	e := newEnv(t, true, obj, healthy("a"), map[string][]client.Object{"a": objs}, map[string]interceptor.Funcs{"a": funcs})
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
	for _, keep := range []string{"other-owner", "unowned", "other-labels", "forged"} {
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

// A pod made to look like replicafed's (the MemberReplicaSet's name in a
// controller reference, the selector's labels) never holds a deletion: only
// the UID of the MemberReplicaSet replicafed deleted, recorded on the hub
// object before the delete, marks its pods.
func TestForgedPodDoesNotHoldDeletion(t *testing.T) {
	web := map[string]string{"app": "web"}
	for _, tc := range []struct {
		name    string
		forged  *corev1.Pod
		release bool
	}{
		{"same owner name, another UID", memberPod("web-x", "web", "forged-uid", web), true},
		{"same owner name, no UID", memberPod("web-y", "web", "", web), true},
		{"the real owner's UID", memberPod("web-z", "web", "mrs-uid-1", web), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The forged pod carries a finalizer so that a delete would not
			// remove it: were it matched, it would hold the deletion for ever.
			tc.forged.Finalizers = []string{"example.com/hold"}
			e := newEnv(t, true, frs(2, deleting()), healthy("a"),
				map[string][]client.Object{"a": {mrs("uid-1"), tc.forged}}, nil)
			_ = e.targets.SetTargets(context.Background(), fedref.FRS{Namespace: "default", Name: "web"}, 3, map[string]int32{"a": 2})
			// Pass 1 records the MemberReplicaSet's UID and deletes it
			// (the fake client has no garbage collector: it is gone at once).
			if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
				t.Fatal(err)
			}
			hubObj := &v1alpha1.FederatedReplicaSet{}
			if err := e.hub.Get(context.Background(), req().NamespacedName, hubObj); err != nil {
				t.Fatal(err)
			}
			if got := recordedOwners(hubObj)["a"]; got != "mrs-uid-1" {
				t.Fatalf("recorded owner of a = %q, want mrs-uid-1", got)
			}
			for range 2 {
				if _, err := e.r.Reconcile(context.Background(), req()); err != nil {
					t.Fatal(err)
				}
			}
			err := e.hub.Get(context.Background(), req().NamespacedName, hubObj)
			released := apierrors.IsNotFound(err) || (err == nil && !contains(hubObj.Finalizers, v1alpha1.FinalizerCascade))
			if released != tc.release {
				t.Fatalf("finalizer released = %v, want %v", released, tc.release)
			}
			pod := &corev1.Pod{}
			if err := e.members["a"].Get(context.Background(), client.ObjectKeyFromObject(tc.forged), pod); err != nil {
				t.Fatal(err)
			}
			if deleting := pod.DeletionTimestamp != nil; deleting == tc.release {
				t.Fatalf("pod %s being deleted = %v, want %v", pod.Name, deleting, !tc.release)
			}
		})
	}
}

func TestDeletionWaitMessage(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		waiting, unreachable []string
		want                 string
	}{
		{name: "nothing", want: ""},
		{name: "waiting, in name order", waiting: []string{"c", "a"}, want: "waiting for deletion in: a, c"},
		{name: "unreachable, in name order", unreachable: []string{"b", "a"}, want: "waiting for unreachable members: a, b"},
		{name: "both, unreachable first", waiting: []string{"c"}, unreachable: []string{"b"},
			want: "waiting for unreachable members: b; waiting for deletion in: c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := deletionWaitMessage(tc.waiting, tc.unreachable); got != tc.want {
				t.Errorf("deletionWaitMessage = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestOwnersToRecord(t *testing.T) {
	a, b, c, d := &registry.Member{Name: "a"}, &registry.Member{Name: "b"}, &registry.Member{Name: "c"}, &registry.Member{Name: "d"}
	gone := mrs("uid-c")
	gone.DeletionTimestamp = &metav1.Time{Time: now}
	found := map[*registry.Member]ownedMRS{
		a: {mrs: mrs("uid-a")},
		b: {err: errors.New("unreadable")},
		c: {mrs: gone},
		d: {},
	}
	want := map[string]types.UID{"a": mrs("uid-a").UID}
	if got := ownersToRecord(found); !maps.Equal(got, want) {
		t.Errorf("ownersToRecord = %v, want %v (only MemberReplicaSets found and not yet being deleted)", got, want)
	}
}
