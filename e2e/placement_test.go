package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry"
)

// The placement tests change the shared members' registration (labels,
// taints) and restore it when they end; like every top-level e2e test they
// run one at a time.

// TestCostOrdered fills the members in tiers of deletionCost, the highest
// (reserved capacity) first, each up to its capacity or maxReplicas before the
// next tier gets a replica, and drains them in the reverse order. member-a
// (cost 300) has room for 4 pods of 16 cpu (two nodes of 32), member-b (200)
// has maxReplicas 3, member-c (100) takes the rest.
func TestCostOrdered(t *testing.T) {
	e := newEnv(t, "e2e-costordered")
	for _, m := range allMembers {
		e.waitNoPods(m)
	}
	const name = "tiers"
	b := pref(memberB, 1, 200)
	b.MaxReplicas = ptr.To[int32](3)
	e.create(frsSpec{name: name, replicas: 2, cpu: "16",
		clusters:  []v1alpha1.ClusterPreference{pref(memberA, 1, 300), b, pref(memberC, 1, 100)},
		placement: v1alpha1.Placement{Strategy: v1alpha1.StrategyCostOrdered}})
	// No member ever runs more than its capacity or maxReplicas: a replica
	// placed beyond them would be a Pending pod.
	s := e.startSampler(name, 500*time.Millisecond, split{memberA: 4, memberB: 3, memberC: 4}, 10)
	steps := []scaleStep{
		{2, split{memberA: 2}},
		{6, split{memberA: 4, memberB: 2}},
		{10, split{memberA: 4, memberB: 3, memberC: 3}},
		{5, split{memberA: 4, memberB: 1}},
		{2, split{memberA: 2}},
	}
	e.scaleThrough(name, steps)
	s.finish(t)
}

// scaleStep is one step of scaleThrough: scale to replicas, wait for want.
type scaleStep struct {
	replicas int32
	want     split
}

// scaleThrough waits for each step's split in turn, scaling name to the
// step's replicas first (the first step is the created object's).
func (e *env) scaleThrough(name string, steps []scaleStep) {
	e.t.Helper()
	for i, st := range steps {
		if i > 0 {
			e.scale(name, st.replicas)
		}
		e.waitSplit(name, st.want)
	}
}

// TestPacked runs the replicas on as few members as their capacity allows:
// the highest weight first, each member up to its room (4 pods of 16 cpu,
// two nodes of 32) before the next gets a replica; a scale-down empties the
// member with the fewest replicas first.
func TestPacked(t *testing.T) {
	e := newEnv(t, "e2e-packed")
	for _, m := range allMembers {
		e.waitNoPods(m)
	}
	const name = "packed"
	e.create(frsSpec{name: name, replicas: 3, cpu: "16",
		clusters:  []v1alpha1.ClusterPreference{pref(memberA, 3, -1), pref(memberB, 2, -1), pref(memberC, 1, -1)},
		placement: v1alpha1.Placement{Strategy: v1alpha1.StrategyPacked}})
	s := e.startSampler(name, 500*time.Millisecond, split{memberA: 4, memberB: 4, memberC: 4}, 10)
	steps := []scaleStep{
		{3, split{memberA: 3}},
		{6, split{memberA: 4, memberB: 2}},
		{9, split{memberA: 4, memberB: 4, memberC: 1}},
		{5, split{memberA: 4, memberB: 1}},
		{2, split{memberA: 2}},
	}
	e.scaleThrough(name, steps)
	s.finish(t)
}

// TestSpreadConstraints spreads replicas over two regions given as labels
// on the members' registration Secrets: minGroups 2 puts a replica in the
// region the weights alone would leave empty, maxGroups 1 keeps every
// replica in one region, and minGroups 3 (only two regions) is reported as
// SpreadUnsatisfied while the replicas run in the regions there are.
func TestSpreadConstraints(t *testing.T) {
	e := newEnv(t, "e2e-spread")
	regions := map[string]string{memberA: "east", memberB: "east", memberC: "west"}
	for m, r := range regions {
		e.relabel(m, "region", r)
	}
	t.Cleanup(func() {
		e.dumpIfFailed()
		for m := range regions {
			e.relabel(m, "region", "")
		}
		// The next test starts from members without the label.
		e.waitMemberLabels("region", map[string]string{memberA: "", memberB: "", memberC: ""})
	})
	e.waitMemberLabels("region", regions)

	const name = "spread"
	clusters := []v1alpha1.ClusterPreference{pref(memberA, 5, -1), pref(memberB, 4, -1), pref(memberC, 1, -1)}
	e.create(frsSpec{name: name, replicas: 2, clusters: clusters, placement: v1alpha1.Placement{
		SpreadConstraints: []v1alpha1.SpreadConstraint{{TopologyKey: "region", MinGroups: ptr.To[int32](2)}},
	}})
	// By weight alone 2 replicas would go to member-a and member-b (east).
	e.waitSplit(name, split{memberA: 1, memberC: 1})
	e.checkCondition(name, v1alpha1.ConditionSpreadUnsatisfied, false, "")

	e.setSpread(name, v1alpha1.SpreadConstraint{TopologyKey: "region", MaxGroups: ptr.To[int32](1)})
	e.waitSplit(name, split{memberA: 1, memberB: 1})

	e.setSpread(name, v1alpha1.SpreadConstraint{TopologyKey: "region", MinGroups: ptr.To[int32](3)})
	e.checkCondition(name, v1alpha1.ConditionSpreadUnsatisfied, true, "2 groups can run replicas, minGroups is 3")
	got := e.waitSettled(name, 2)
	if got[memberA]+got[memberB] == 0 || got[memberC] == 0 {
		t.Errorf("unsatisfiable spread runs %s; want replicas in both regions there are", got)
	}
	e.checkWarningEvent(name, "SpreadUnsatisfied")

	e.setSpread(name, v1alpha1.SpreadConstraint{TopologyKey: "region", MinGroups: ptr.To[int32](2)})
	e.checkCondition(name, v1alpha1.ConditionSpreadUnsatisfied, false, "")
}

// TestTaintNoExecute taints member-c NoExecute through its registration
// Secret (replicafed.io/taints): a FederatedReplicaSet without a toleration
// leaves it at once, one tolerating the taint for 10 seconds leaves it once
// they ran out, and never before.
func TestTaintNoExecute(t *testing.T) {
	e := newEnv(t, "e2e-taint")
	clusters := []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)}
	const tolerated = 10
	e.create(frsSpec{name: "intolerant", replicas: 3, clusters: clusters})
	e.create(frsSpec{name: "tolerant", replicas: 3, clusters: clusters, placement: v1alpha1.Placement{
		Tolerations: []v1alpha1.ClusterToleration{{Key: "maintenance", Operator: v1alpha1.TolerationExists,
			Effect: v1alpha1.TaintNoExecute, TolerationSeconds: ptr.To[int64](tolerated)}},
	}})
	e.waitSplit("intolerant", split{memberA: 1, memberB: 1, memberC: 1})
	e.waitSplit("tolerant", split{memberA: 1, memberB: 1, memberC: 1})

	// timeAdded has whole seconds; the toleration counts from it.
	added := time.Now().Truncate(time.Second)
	taints, err := json.Marshal([]v1alpha1.ClusterTaint{{Key: "maintenance", Effect: v1alpha1.TaintNoExecute, TimeAdded: ptr.To(metav1.NewTime(added))}})
	if err != nil {
		t.Fatal(err)
	}
	e.annotate(memberC, registry.AnnotationTaints, string(taints))
	t.Cleanup(func() {
		e.dumpIfFailed()
		e.annotate(memberC, registry.AnnotationTaints, "")
		// The next test starts from an untainted member-c.
		e.poll("the taint of "+memberC+" to be gone", func(ctx context.Context) (bool, error) {
			mc := &v1alpha1.MemberCluster{}
			return e.f.HubClient.Get(ctx, client.ObjectKey{Name: memberC}, mc) == nil && len(mc.Status.Taints) == 0, nil
		})
	})
	logf(t, "tainted %s: %s", memberC, taints)

	// Each leaves member-c; record when it was first seen gone from there.
	gone := map[string]time.Time{}
	e.poll("both FederatedReplicaSets to leave the tainted member", func(ctx context.Context) (bool, error) {
		for _, name := range []string{"intolerant", "tolerant"} {
			if _, ok := gone[name]; ok {
				continue
			}
			c, err := e.count(ctx, memberC, name)
			if err != nil {
				return false, nil
			}
			if c.active == 0 {
				gone[name] = time.Now()
				logf(t, "%s left %s %s after timeAdded", name, memberC, gone[name].Sub(added).Round(10*time.Millisecond))
			}
		}
		return len(gone) == 2, nil
	})
	if early := added.Add(tolerated * time.Second); gone["tolerant"].Before(early) {
		t.Errorf("the tolerating replica left %s at %s, before its toleration ran out at %s", memberC,
			gone["tolerant"].Format(time.RFC3339Nano), early.Format(time.RFC3339Nano))
	}
	for _, name := range []string{"intolerant", "tolerant"} {
		got := e.waitSettled(name, 3)
		if got[memberC] != 0 {
			t.Errorf("%s runs %s, want nothing on the tainted %s", name, got, memberC)
		}
	}
}

// TestDuplicated runs spec.replicas in every selected member; the status
// sums the members.
func TestDuplicated(t *testing.T) {
	e := newEnv(t, "e2e-duplicated")
	const name = "copies"
	e.create(frsSpec{name: name, replicas: 2,
		clusters:  []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1), pref(memberC, 1, -1)},
		placement: v1alpha1.Placement{Mode: v1alpha1.PlacementDuplicated}})
	e.waitSplit(name, split{memberA: 2, memberB: 2, memberC: 2})
	e.scale(name, 3)
	frs := e.waitSplit(name, split{memberA: 3, memberB: 3, memberC: 3})
	if st := frs.Status; st.Replicas != 9 || st.ReadyReplicas != 9 || st.AvailableReplicas != 9 || st.ClusterCount != 3 || len(st.Clusters) != 3 {
		t.Errorf("status = replicas %d ready %d available %d clusters %d rows %d, want 9, 9, 9, 3, 3",
			st.Replicas, st.ReadyReplicas, st.AvailableReplicas, st.ClusterCount, len(st.Clusters))
	}
}

// annotate sets (or, with an empty value, removes) an annotation on a
// member's registration Secret in the hub.
func (e *env) annotate(member, key, value string) {
	e.t.Helper()
	e.patchRegistration(member, "annotating", func(sec *corev1.Secret) { sec.Annotations = withKey(sec.Annotations, key, value) })
}

// waitMemberLabels waits until the MemberClusters show each member's value
// of a label ("": no such label): the leader has read the relabelled
// Secrets.
func (e *env) waitMemberLabels(key string, want map[string]string) {
	e.t.Helper()
	e.poll("MemberClusters to show label "+key, func(ctx context.Context) (bool, error) {
		for m, v := range want {
			mc := &v1alpha1.MemberCluster{}
			if err := e.f.HubClient.Get(ctx, client.ObjectKey{Name: m}, mc); err != nil {
				return false, nil
			}
			if got, ok := mc.Status.Labels[key]; got != v || ok != (v != "") {
				return false, nil
			}
		}
		return true, nil
	})
}

// waitNoPods waits until no pod of any namespace is left in a member, so
// its whole capacity is free.
func (e *env) waitNoPods(member string) {
	e.t.Helper()
	var left []string
	ok := tryPoll(waitTimeout, func(ctx context.Context) (bool, error) {
		l := &corev1.PodList{}
		if err := e.memberClient(member).List(ctx, l); err != nil {
			return false, nil
		}
		left = left[:0]
		for _, p := range l.Items {
			left = append(left, p.Namespace+"/"+p.Name)
		}
		return len(left) == 0, nil
	})
	if !ok {
		e.t.Fatalf("%s still runs pods after %s, its capacity is not free: %v", member, waitTimeout, left)
	}
}

// setSpread replaces a FederatedReplicaSet's spread constraints.
func (e *env) setSpread(name string, constraints ...v1alpha1.SpreadConstraint) {
	e.t.Helper()
	frs := e.getFRS(name)
	patch := client.MergeFrom(frs.DeepCopy())
	frs.Spec.Placement.SpreadConstraints = constraints
	if err := e.f.HubClient.Patch(context.Background(), frs, patch); err != nil {
		e.t.Fatalf("setting the spread constraints of %s: %v", name, err)
	}
	logf(e.t, "spread of %s set to %s", name, spreadText(constraints))
}

func spreadText(cs []v1alpha1.SpreadConstraint) string {
	var parts []string
	for _, c := range cs {
		s := c.TopologyKey
		if c.MinGroups != nil {
			s += fmt.Sprintf(" minGroups=%d", *c.MinGroups)
		}
		if c.MaxGroups != nil {
			s += fmt.Sprintf(" maxGroups=%d", *c.MaxGroups)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// checkCondition waits until a condition of the current generation has the
// status wanted (a missing condition counts as False) and, when True, a
// message containing msg.
func (e *env) checkCondition(name, typ string, want bool, msg string) {
	e.t.Helper()
	var last string
	ok := tryPoll(waitTimeout, func(ctx context.Context) (bool, error) {
		frs := &v1alpha1.FederatedReplicaSet{}
		if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: name}, frs); err != nil {
			return false, nil
		}
		c := meta.FindStatusCondition(frs.Status.Conditions, typ)
		last = fmt.Sprintf("generation %d, condition %+v", frs.Generation, c)
		if frs.Status.ObservedGeneration != frs.Generation {
			return false, nil
		}
		if !want {
			return c == nil || c.Status == metav1.ConditionFalse, nil
		}
		return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == frs.Generation && strings.Contains(c.Message, msg), nil
	})
	if !ok {
		e.t.Fatalf("%s: condition %s did not become %v (message %q) within %s; last: %s", name, typ, want, msg, waitTimeout, last)
	}
	logf(e.t, "%s: condition %s is %v: %s", name, typ, want, last)
}

// checkWarningEvent waits for a Warning event with the reason on a
// FederatedReplicaSet in the hub.
func (e *env) checkWarningEvent(name, reason string) {
	e.t.Helper()
	e.poll("a "+reason+" warning event on "+name, func(ctx context.Context) (bool, error) {
		l := &corev1.EventList{}
		if err := e.f.HubClient.List(ctx, l, client.InNamespace(e.ns)); err != nil {
			return false, nil
		}
		for _, ev := range l.Items {
			if ev.InvolvedObject.Name == name && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				logf(e.t, "event %s %s: %s", ev.Type, ev.Reason, ev.Message)
				return true, nil
			}
		}
		return false, nil
	})
}

// waitSettled waits until a FederatedReplicaSet runs total ready pods, split
// in whatever way, with nothing terminating and a status that reports that
// split for the current generation, and returns the split.
func (e *env) waitSettled(name string, total int) split {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var got split
	var last string
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		got = split{}
		for _, m := range e.memberNames() {
			c, err := e.count(ctx, m, name)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			if c.active > 0 {
				got[m] = c.active
			}
		}
		if got.total() != total {
			last = "pods " + got.String()
			return false, nil
		}
		ok, msg := e.splitReached(ctx, name, got)
		last = msg
		return ok, nil
	})
	if err != nil {
		e.t.Fatalf("%s/%s did not settle on %d ready replicas within %s: %s", e.ns, name, total, waitTimeout, last)
	}
	logf(e.t, "%s settled on %s", name, got)
	return got
}
