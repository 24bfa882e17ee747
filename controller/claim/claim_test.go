package claim

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
)

func testScheme(t *testing.T) *runtime.Scheme {
	s, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func owner() *v1alpha1.MemberReplicaSet {
	return &v1alpha1.MemberReplicaSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "mrs-uid"}}
}

func mkPod(name string, lbls map[string]string, refs ...metav1.OwnerReference) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name + "-uid"), Labels: lbls, OwnerReferences: refs}}
}

var (
	match    = map[string]string{"app": "web"}
	mismatch = map[string]string{"app": "other"}
	ours     = OwnerRef(owner())
	theirs   = metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "x", UID: "other-uid", Controller: ptr.To(true)}
)

func TestClaim(t *testing.T) {
	deleting := metav1.Now()
	cases := []struct {
		name         string
		pod          *corev1.Pod
		ownerDying   bool
		canAdopt     error
		patchErr     error
		wantClaimed  bool
		wantPatches  int
		wantErr      bool
		wantAdoption bool
	}{
		{name: "adopt matching orphan", pod: mkPod("p", match), wantClaimed: true, wantPatches: 1, wantAdoption: true},
		{name: "no adoption while owner deleting", pod: mkPod("p", match), ownerDying: true},
		{name: "owned and matching claimed while deleting", pod: mkPod("p", match, ours), ownerDying: true, wantClaimed: true},
		{name: "owned and matching claimed", pod: mkPod("p", match, ours), wantClaimed: true},
		{name: "controlled by another ignored", pod: mkPod("p", match, theirs)},
		{name: "owned not matching released", pod: mkPod("p", mismatch, ours), wantPatches: 1},
		{name: "owned not matching kept while deleting", pod: mkPod("p", mismatch, ours), ownerDying: true},
		{name: "orphan not matching ignored", pod: mkPod("p", mismatch)},
		{name: "deleting orphan not adopted", pod: func() *corev1.Pod {
			p := mkPod("p", match)
			p.DeletionTimestamp = &deleting
			p.Finalizers = []string{"hold"}
			return p
		}()},
		{name: "orphan in other namespace ignored", pod: func() *corev1.Pod { p := mkPod("p", match); p.Namespace = "elsewhere"; return p }()},
		{name: "can't adopt", pod: mkPod("p", match), canAdopt: errors.New("gone"), wantErr: true},
		{name: "adopt NotFound ignored", pod: mkPod("p", match), patchErr: apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "p"), wantPatches: 1},
		{name: "adopt error reported", pod: mkPod("p", match), patchErr: errors.New("boom"), wantPatches: 1, wantErr: true},
		{name: "release Invalid ignored", pod: mkPod("p", mismatch, ours), patchErr: apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil), wantPatches: 1},
		{name: "release error reported", pod: mkPod("p", mismatch, ours), patchErr: errors.New("boom"), wantPatches: 1, wantErr: true},
		{name: "non-controller ref to owner upgraded", pod: mkPod("p", match, func() metav1.OwnerReference { r := ours; r.Controller = nil; r.BlockOwnerDeletion = nil; return r }()), wantClaimed: true, wantPatches: 1, wantAdoption: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var patches atomic.Int32
			cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(c.pod.DeepCopy()).
				WithInterceptorFuncs(interceptor.Funcs{Patch: func(ctx context.Context, cl client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					patches.Add(1)
					if c.patchErr != nil {
						return c.patchErr
					}
					return cl.Patch(ctx, obj, patch, opts...)
				}}).Build()
			o := owner()
			if c.ownerDying {
				o.DeletionTimestamp = &deleting
			}
			var adoptChecks int
			cm := &Claimer{Patcher: cl, Owner: o, Selector: labels.SelectorFromSet(match), Deleting: c.ownerDying,
				CanAdopt: func(context.Context) error { adoptChecks++; return c.canAdopt }}
			claimed, err := cm.Claim(context.Background(), []*corev1.Pod{c.pod})
			if (err != nil) != c.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, c.wantErr)
			}
			if (len(claimed) == 1) != c.wantClaimed {
				t.Fatalf("claimed = %d pods, want claimed=%v", len(claimed), c.wantClaimed)
			}
			if int(patches.Load()) != c.wantPatches {
				t.Fatalf("patches = %d, want %d", patches.Load(), c.wantPatches)
			}
			if c.wantAdoption {
				got := &corev1.Pod{}
				if err := cl.Get(context.Background(), client.ObjectKeyFromObject(c.pod), got); err != nil {
					t.Fatal(err)
				}
				ref := metav1.GetControllerOf(got)
				if ref == nil || ref.UID != o.UID || ref.Kind != Kind || ref.APIVersion != "replicafed.io/v1alpha1" || !ptr.Deref(ref.BlockOwnerDeletion, false) || len(got.OwnerReferences) != 1 {
					t.Fatalf("owner references after adoption: %+v", got.OwnerReferences)
				}
			}
		})
	}
}

// TestClaimCanAdoptOnce mirrors TestPatchPodFails/TestDoNotAdoptOrCreateIfBeingDeletedRace:
// the live check runs once per pass and its failure fails every adoption.
func TestClaimCanAdoptOnce(t *testing.T) {
	pods := []*corev1.Pod{mkPod("a", match), mkPod("b", match)}
	var patches atomic.Int32
	cl := fake.NewClientBuilder().WithScheme(testScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(context.Context, client.WithWatch, client.Object, client.Patch, ...client.PatchOption) error {
			patches.Add(1)
			return nil
		}}).Build()
	checks := 0
	cm := &Claimer{Patcher: cl, Owner: owner(), Selector: labels.SelectorFromSet(match),
		CanAdopt: func(context.Context) error { checks++; return errors.New("has just been deleted") }}
	claimed, err := cm.Claim(context.Background(), pods)
	if err == nil || len(claimed) != 0 || patches.Load() != 0 || checks != 1 {
		t.Fatalf("err=%v claimed=%d patches=%d checks=%d", err, len(claimed), patches.Load(), checks)
	}
	if !strings.Contains(err.Error(), "can't adopt Pod ns/a") || !strings.Contains(err.Error(), "can't adopt Pod ns/b") {
		t.Fatalf("error does not name both pods: %v", err)
	}
}

func TestRecheckOwner(t *testing.T) {
	s := testScheme(t)
	now := metav1.Now()
	live := owner()
	cases := []struct {
		name    string
		objs    []client.Object
		wantErr string
	}{
		{name: "alive", objs: []client.Object{live.DeepCopy()}},
		{name: "gone", wantErr: "not found"},
		{name: "recreated", objs: []client.Object{func() *v1alpha1.MemberReplicaSet { o := live.DeepCopy(); o.UID = "new"; return o }()}, wantErr: "is gone"},
		{name: "being deleted", objs: []client.Object{func() *v1alpha1.MemberReplicaSet {
			o := live.DeepCopy()
			o.DeletionTimestamp = &now
			o.Finalizers = []string{"x"}
			return o
		}()}, wantErr: "has just been deleted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl := fake.NewClientBuilder().WithScheme(s).WithObjects(c.objs...).Build()
			err := RecheckOwner(cl, live)(context.Background())
			if c.wantErr == "" && err != nil || c.wantErr != "" && (err == nil || !strings.Contains(err.Error(), c.wantErr)) {
				t.Fatalf("err = %v, want %q", err, c.wantErr)
			}
		})
	}
}

func TestPatchBytes(t *testing.T) {
	rel, err := ReleasePatch("owner", "pod")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"ownerReferences":[{"$patch":"delete","uid":"owner"}],"uid":"pod"}}`; string(rel) != want {
		t.Fatalf("release patch = %s, want %s", rel, want)
	}
	ad, err := AdoptPatch(owner(), "pod")
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"metadata":{"ownerReferences":[{"apiVersion":"replicafed.io/v1alpha1","kind":"MemberReplicaSet","name":"web","uid":"mrs-uid","controller":true,"blockOwnerDeletion":true}],"uid":"pod"}}`; string(ad) != want {
		t.Fatalf("adopt patch = %s, want %s", ad, want)
	}
}
