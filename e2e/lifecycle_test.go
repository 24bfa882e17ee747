package e2e

import (
	"context"
	"testing"
	"time"

	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/podstate"
)

// TestLifecycle covers one FederatedReplicaSet's life on a healthy fleet. The
// subtests are independent (own namespace each) and run in parallel.
func TestLifecycle(t *testing.T) {
	getFleet(t)
	t.Run("Create", func(t *testing.T) { t.Parallel(); testCreate(t) })
	t.Run("Scale", func(t *testing.T) { t.Parallel(); testScale(t) })
	t.Run("ReplaceDeletedPods", func(t *testing.T) { t.Parallel(); testReplaceDeletedPods(t) })
	t.Run("DeleteBackground", func(t *testing.T) { t.Parallel(); testDeleteBackground(t) })
	t.Run("DeleteOrphan", func(t *testing.T) { t.Parallel(); testDeleteOrphan(t) })
	t.Run("DeleteOrphanMany", func(t *testing.T) { t.Parallel(); testDeleteOrphanMany(t) })
	t.Run("NamespaceMissingInMembers", func(t *testing.T) { t.Parallel(); testNamespaceMissingInMembers(t) })
}

// testNamespaceMissingInMembers: the namespace exists only in the hub;
// replicafed creates it in each member (controller.createNamespaces defaults to
// true), labelled as managed by replicafed, and the pods follow.
func testNamespaceMissingInMembers(t *testing.T) {
	e := newEnvIn(t, "e2e-new-namespace", false)
	const name = "web"
	e.create(frsSpec{name: name, replicas: 3, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1),
	}})
	e.waitSplit(name, split{memberA: 1, memberB: 1, memberC: 1})
	for _, m := range []string{memberA, memberB, memberC} {
		ns := &corev1.Namespace{}
		if err := e.f.MemberClients[m].Get(context.Background(), client.ObjectKey{Name: e.ns}, ns); err != nil {
			t.Fatalf("%s: namespace %s: %v", m, e.ns, err)
		}
		if got := ns.Labels[v1alpha1.LabelManagedBy]; got != v1alpha1.ManagedByValue {
			t.Errorf("%s: namespace %s label %s = %q, want %q", m, e.ns, v1alpha1.LabelManagedBy, got, v1alpha1.ManagedByValue)
		}
	}
}

// testCreate: 6 replicas at weights 3:2:1 are exactly 3/2/1 (Webster), Ready,
// and the status sums them with one row per member.
func testCreate(t *testing.T) {
	e := newEnv(t, "e2e-create")
	const name = "web"
	start := time.Now()
	created := e.create(frsSpec{name: name, replicas: 6, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 3, -1), pref(memberB, 2, -1), pref(memberC, 1, -1),
	}})
	// The fleet's hub has the chart's finalizer policy: the create's answer
	// carries the finalizer already, before replicafed saw the object.
	if !contains(created.Finalizers, v1alpha1.FinalizerCascade) {
		t.Errorf("created without the finalizer (%v): the admission policy did not add it", created.Finalizers)
	}
	want := split{memberA: 3, memberB: 2, memberC: 1}
	frs := e.waitSplit(name, want)
	logf(t, "figure: create of 6 replicas Ready in the planned split after %s", time.Since(start).Round(10*time.Millisecond))

	st := frs.Status
	if st.Replicas != 6 || st.ReadyReplicas != 6 || st.AvailableReplicas != 6 || st.FullyLabeledReplicas != 6 {
		t.Errorf("status sums = replicas %d ready %d available %d fullyLabeled %d, want 6 each",
			st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.FullyLabeledReplicas)
	}
	if st.ObservedGeneration != frs.Generation {
		t.Errorf("observedGeneration %d, generation %d", st.ObservedGeneration, frs.Generation)
	}
	if st.Selector != "e2e-app="+name {
		t.Errorf("status.selector = %q, want %q", st.Selector, "e2e-app="+name)
	}
	if st.ClusterCount != 3 {
		t.Errorf("clusterCount = %d, want 3", st.ClusterCount)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready condition = %+v, want True", c)
	}
	if c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionClusterUnavailable); c != nil && c.Status == metav1.ConditionTrue {
		t.Errorf("ClusterUnavailable = %+v on a healthy fleet", c)
	}
	if len(st.Clusters) != 3 {
		t.Fatalf("status has %d cluster rows, want 3: %s", len(st.Clusters), rows(frs))
	}
	for _, r := range st.Clusters {
		w := int32(want[r.Name])
		if r.Target != w || r.Replicas != w || r.ReadyReplicas != w || r.AvailableReplicas != w {
			t.Errorf("row %s = target %d replicas %d ready %d available %d, want %d each", r.Name, r.Target, r.Replicas, r.ReadyReplicas, r.AvailableReplicas, w)
		}
		if r.Health != v1alpha1.ClusterHealthy || r.LastReportTime == nil {
			t.Errorf("row %s: health %q lastReportTime %v, want Healthy and a report time", r.Name, r.Health, r.LastReportTime)
		}
	}
	if frs.Finalizers == nil || !contains(frs.Finalizers, v1alpha1.FinalizerCascade) {
		t.Errorf("finalizers = %v, want %s", frs.Finalizers, v1alpha1.FinalizerCascade)
	}

	// Each member has a MemberReplicaSet recording its target and the hub
	// object, and it is the controller owner of every pod there.
	ctx := context.Background()
	for _, m := range allMembers {
		mrs := &v1alpha1.MemberReplicaSet{}
		if err := e.f.MemberClients[m].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, mrs); err != nil {
			t.Errorf("%s: MemberReplicaSet: %v", m, err)
			continue
		}
		if int(mrs.Spec.Replicas) != want[m] || mrs.Spec.Hub.UID != frs.UID || mrs.Spec.Hub.Name != name || mrs.Spec.Hub.Namespace != e.ns {
			t.Errorf("%s: MemberReplicaSet spec = %+v, want replicas %d for hub %s/%s uid %s", m, mrs.Spec, want[m], e.ns, name, frs.UID)
		}
		if mrs.Labels[v1alpha1.LabelManagedBy] != v1alpha1.ManagedByValue {
			t.Errorf("%s: MemberReplicaSet labels %v lack %s=%s", m, mrs.Labels, v1alpha1.LabelManagedBy, v1alpha1.ManagedByValue)
		}
		pods, err := e.pods(ctx, m, name)
		if err != nil {
			t.Fatal(err)
		}
		for i := range pods {
			checkOwnedBy(t, &pods[i], mrs)
		}
	}
}

// checkOwnedBy fails unless the pod's controller is mrs, blocking its deletion.
func checkOwnedBy(t *testing.T, p *corev1.Pod, mrs *v1alpha1.MemberReplicaSet) {
	t.Helper()
	ref := metav1.GetControllerOf(p)
	if ref == nil || ref.Kind != "MemberReplicaSet" || ref.APIVersion != v1alpha1.GroupVersion.String() ||
		ref.Name != mrs.Name || ref.UID != mrs.UID || !ptr.Deref(ref.BlockOwnerDeletion, false) {
		t.Errorf("pod %s: controller ref %+v, want MemberReplicaSet %s uid %s blocking deletion", p.Name, ref, mrs.Name, mrs.UID)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// testScale scales through the scale subresource and spec.replicas. Weights
// 2:1:1 with deletionCost 100/50/0 (examples/frontend.yaml). Expected splits
// follow federation/planner/doc.go:
//   - 8 -> 4/2/2 (Webster).
//   - 8 -> 6: ready seats are kept highest deletionCost first, so the cheapest
//     member (c) loses both its pods: 4/2/0.
//   - 6 -> 9: the delta goes on top of what each member holds, by Webster
//     priority weight/(2*seats+1): c (1/1), c (1/3), a (2/9 > 1/5): 5/2/2.
//   - 9 -> 5: a's five ready seats come first: 5/0/0 (c and b shrink, a keeps).
func testScale(t *testing.T) {
	e := newEnv(t, "e2e-scale")
	const name = "frontend"
	ctx := context.Background()
	e.create(frsSpec{name: name, replicas: 8, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 2, 100), pref(memberB, 1, 50), pref(memberC, 1, 0),
	}})
	e.waitSplit(name, split{memberA: 4, memberB: 2, memberC: 2})

	frs := e.getFRS(name)
	sc := &autoscalingv1.Scale{}
	if err := e.f.HubClient.SubResource("scale").Get(ctx, frs, sc); err != nil {
		t.Fatalf("reading scale subresource: %v", err)
	}
	if sc.Spec.Replicas != 8 || sc.Status.Replicas != 8 || sc.Status.Selector != "e2e-app="+name {
		t.Errorf("scale = spec %d status %d selector %q, want 8, 8, e2e-app=%s", sc.Spec.Replicas, sc.Status.Replicas, sc.Status.Selector, name)
	}

	scaleTo := func(n int32) {
		t.Helper()
		frs := e.getFRS(name)
		sc := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Namespace: e.ns, Name: name}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		if err := e.f.HubClient.SubResource("scale").Update(ctx, frs, client.WithSubResourceBody(sc)); err != nil {
			t.Fatalf("scaling to %d through the scale subresource: %v", n, err)
		}
		logf(t, "scaled to %d through the scale subresource", n)
	}
	setReplicas := func(n int32) {
		t.Helper()
		frs := e.getFRS(name)
		patch := client.MergeFrom(frs.DeepCopy())
		frs.Spec.Replicas = ptr.To(n)
		if err := e.f.HubClient.Patch(ctx, frs, patch); err != nil {
			t.Fatalf("setting spec.replicas to %d: %v", n, err)
		}
		logf(t, "set spec.replicas to %d", n)
	}

	scaleTo(6)
	e.waitSplit(name, split{memberA: 4, memberB: 2})
	setReplicas(9)
	e.waitSplit(name, split{memberA: 5, memberB: 2, memberC: 2})
	scaleTo(5)
	e.waitSplit(name, split{memberA: 5})
}

// testReplaceDeletedPods deletes pods by hand in a member; the member engine
// replaces them with pods owned by the same MemberReplicaSet.
func testReplaceDeletedPods(t *testing.T) {
	e := newEnv(t, "e2e-replace")
	const name = "replace"
	ctx := context.Background()
	e.create(frsSpec{name: name, replicas: 6, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 1, -1), pref(memberB, 1, -1),
	}})
	e.waitSplit(name, split{memberA: 3, memberB: 3})

	pods, err := e.pods(ctx, memberA, name)
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for _, p := range pods[:2] {
		if err := e.f.MemberClients[memberA].Delete(ctx, &p); err != nil {
			t.Fatalf("deleting pod %s by hand: %v", p.Name, err)
		}
		gone[string(p.UID)] = true
	}
	start := time.Now()
	logf(t, "deleted 2 pods in %s by hand", memberA)
	e.poll("deleted pods replaced", func(ctx context.Context) (bool, error) {
		ps, err := e.pods(ctx, memberA, name)
		if err != nil {
			return false, nil
		}
		n := 0
		for i := range ps {
			if gone[string(ps[i].UID)] {
				return false, nil // wait until the deleted pods are really gone
			}
			if podstate.IsActive(&ps[i]) && podstate.IsReady(&ps[i]) {
				n++
			}
		}
		return n == 3, nil
	})
	logf(t, "figure: 2 hand-deleted pods replaced and Ready after %s", time.Since(start).Round(10*time.Millisecond))
	e.waitSplit(name, split{memberA: 3, memberB: 3})

	mrs := &v1alpha1.MemberReplicaSet{}
	if err := e.f.MemberClients[memberA].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, mrs); err != nil {
		t.Fatal(err)
	}
	pods, err = e.pods(ctx, memberA, name)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 3 {
		t.Fatalf("%s has %d pods, want 3", memberA, len(pods))
	}
	for i := range pods {
		checkOwnedBy(t, &pods[i], mrs)
	}
}

// testDeleteBackground: deleting the FederatedReplicaSet (background
// propagation) removes pods and MemberReplicaSets from every member before the
// hub object disappears.
func testDeleteBackground(t *testing.T) {
	e := newEnv(t, "e2e-delete-bg")
	const name = "bg"
	ctx := context.Background()
	frs := e.create(frsSpec{name: name, replicas: 6})
	// No placement: every registered member, weight 1.
	e.waitSplit(name, split{memberA: 2, memberB: 2, memberC: 2})

	start := time.Now()
	if err := e.f.HubClient.Delete(ctx, frs, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	e.poll("FederatedReplicaSet gone from the hub", func(ctx context.Context) (bool, error) {
		err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), &v1alpha1.FederatedReplicaSet{})
		return apierrors.IsNotFound(err), nil
	})
	logf(t, "figure: background deletion of 6 pods over 3 members finished after %s", time.Since(start).Round(10*time.Millisecond))
	// The finalizer is released only after every member is clean.
	for _, m := range allMembers {
		pods, err := e.pods(ctx, m, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != 0 {
			t.Errorf("%s still has %d pods after the hub object is gone", m, len(pods))
		}
		err = e.f.MemberClients[m].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &v1alpha1.MemberReplicaSet{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("%s: MemberReplicaSet still there after the hub object is gone (err %v)", m, err)
		}
	}
}

// testDeleteOrphan: deleting with orphan propagation removes the hub object
// and the MemberReplicaSets, but the pods keep running without a controller
// and are no longer managed.
func testDeleteOrphan(t *testing.T) {
	e := newEnv(t, "e2e-delete-orphan")
	const name = "orphan"
	ctx := context.Background()
	frs := e.create(frsSpec{name: name, replicas: 4, clusters: []v1alpha1.ClusterPreference{
		pref(memberA, 1, -1), pref(memberB, 1, -1),
	}})
	e.waitSplit(name, split{memberA: 2, memberB: 2})
	t.Cleanup(func() {
		for _, m := range allMembers {
			_ = e.f.MemberClients[m].DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(e.ns),
				client.MatchingLabelsSelector{Selector: selector(name)})
		}
	})
	before := map[string]map[string]bool{}
	for _, m := range []string{memberA, memberB} {
		pods, err := e.pods(ctx, m, name)
		if err != nil {
			t.Fatal(err)
		}
		before[m] = map[string]bool{}
		for _, p := range pods {
			before[m][string(p.UID)] = true
		}
	}

	if err := e.f.HubClient.Delete(ctx, frs, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
		t.Fatalf("deleting with orphan propagation: %v", err)
	}
	e.poll("FederatedReplicaSet gone from the hub", func(ctx context.Context) (bool, error) {
		err := e.f.HubClient.Get(ctx, client.ObjectKeyFromObject(frs), &v1alpha1.FederatedReplicaSet{})
		return apierrors.IsNotFound(err), nil
	})
	e.poll("MemberReplicaSets gone", func(ctx context.Context) (bool, error) {
		for _, m := range allMembers {
			err := e.f.MemberClients[m].Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, &v1alpha1.MemberReplicaSet{})
			if !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		return true, nil
	})
	for _, m := range []string{memberA, memberB} {
		pods, err := e.pods(ctx, m, name)
		if err != nil {
			t.Fatal(err)
		}
		if len(pods) != len(before[m]) {
			t.Errorf("%s has %d pods after orphan deletion, want the same %d", m, len(pods), len(before[m]))
		}
		for i := range pods {
			p := &pods[i]
			if !before[m][string(p.UID)] || !podstate.IsActive(p) {
				t.Errorf("%s: pod %s (uid %s) is new or terminating after orphan deletion", m, p.Name, p.UID)
			}
			if len(p.OwnerReferences) != 0 {
				t.Errorf("%s: orphaned pod %s still has owner references %+v", m, p.Name, p.OwnerReferences)
			}
		}
	}
	if t.Failed() {
		return
	}

	// Unmanaged: a deleted orphan is not replaced.
	pods, err := e.pods(ctx, memberA, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.f.MemberClients[memberA].Delete(ctx, &pods[0]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(10 * time.Second)
	c, err := e.count(ctx, memberA, name)
	if err != nil {
		t.Fatal(err)
	}
	if c.active != len(before[memberA])-1 {
		t.Errorf("%s has %d active pods 10s after deleting one orphan, want %d (orphans are not managed)", memberA, c.active, len(before[memberA])-1)
	}
}

// testDeleteOrphanMany deletes several FederatedReplicaSets with orphan
// propagation at once. The hub's garbage collector removes the "orphan"
// finalizer as soon as it sees it (a FederatedReplicaSet has no dependents in
// the hub), so replicafed must not depend on still seeing that finalizer when
// it gets round to each object: every pod must survive.
func testDeleteOrphanMany(t *testing.T) {
	e := newEnv(t, "e2e-delete-orphan-many")
	ctx := context.Background()
	names := []string{"o1", "o2", "o3", "o4", "o5"}
	var objs []*v1alpha1.FederatedReplicaSet
	for _, n := range names {
		objs = append(objs, e.create(frsSpec{name: n, replicas: 2, clusters: []v1alpha1.ClusterPreference{
			pref(memberA, 1, -1), pref(memberB, 1, -1),
		}}))
	}
	for _, n := range names {
		e.waitSplit(n, split{memberA: 1, memberB: 1})
	}
	t.Cleanup(func() {
		for _, m := range allMembers {
			_ = e.f.MemberClients[m].DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(e.ns))
		}
	})
	for _, frs := range objs {
		if err := e.f.HubClient.Delete(ctx, frs, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil {
			t.Fatalf("deleting %s with orphan propagation: %v", frs.Name, err)
		}
	}
	e.poll("FederatedReplicaSets and MemberReplicaSets gone", func(ctx context.Context) (bool, error) {
		l := &v1alpha1.FederatedReplicaSetList{}
		if err := e.f.HubClient.List(ctx, l, client.InNamespace(e.ns)); err != nil || len(l.Items) != 0 {
			return false, nil
		}
		for _, m := range allMembers {
			ml := &v1alpha1.MemberReplicaSetList{}
			if err := e.f.MemberClients[m].List(ctx, ml, client.InNamespace(e.ns)); err != nil || len(ml.Items) != 0 {
				return false, nil
			}
		}
		return true, nil
	})
	time.Sleep(2 * time.Second) // let any wrongly cascaded pod deletion show
	for _, n := range names {
		for _, m := range []string{memberA, memberB} {
			c, err := e.count(ctx, m, n)
			if err != nil {
				t.Fatal(err)
			}
			if c.active != 1 {
				t.Errorf("%s: %s has %d running pods after orphan deletion, want 1 (pods were cascaded)", n, m, c.active)
			}
		}
	}
}
