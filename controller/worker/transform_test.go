package worker_test

import (
	"fmt"
	"maps"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/diff"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/controller/ranking"
	"github.com/replicafed/replicafed/controller/replicastatus"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/capacity"
)

var (
	t0      = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	owner   = metav1.OwnerReference{APIVersion: "replicafed.io/v1alpha1", Kind: "MemberReplicaSet", Name: "web", UID: "mrs-uid", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}
	sidecar = corev1.ContainerRestartPolicyAlways
)

func req(cpu, mem string) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
}

// fullPod is a pod as a kubelet-run member returns it, with everything the
// transform drops.
func fullPod() *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-abc", GenerateName: "web-", Namespace: "shop", UID: "pod-uid", ResourceVersion: "42", Generation: 1,
			CreationTimestamp: metav1.NewTime(t0), DeletionTimestamp: ptr.To(metav1.NewTime(t0.Add(time.Hour))), DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels: map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{
				ranking.DeletionCostAnnotation:                     "-5",
				"kubectl.kubernetes.io/last-applied-configuration": `{"huge":"json"}`,
				"prometheus.io/scrape":                             "true",
			},
			OwnerReferences: []metav1.OwnerReference{owner, {APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm-uid"}},
			Finalizers:      []string{"example.com/keep"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}},
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			InitContainers: []corev1.Container{
				{Name: "setup", Image: "busybox", Command: []string{"sh", "-c", "true"}},
				{Name: "proxy", Image: "envoy", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: req("100m", "64Mi"), Limits: req("1", "1Gi")}},
			},
			Containers: []corev1.Container{
				{Name: "app", Image: "web:1", Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, Resources: corev1.ResourceRequirements{Requests: req("250m", "128Mi"), Limits: req("2", "2Gi")},
					ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready"}}}},
				{Name: "logs", Image: "fluent"},
			},
			Overhead:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
			Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Volumes:     []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "", Message: "all good", LastProbeTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)},
			},
			ContainerStatuses: []corev1.ContainerStatus{
				{Name: "app", RestartCount: 3, Ready: true, Image: "web:1", ImageID: "sha256:abc", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}}},
				{Name: "logs", RestartCount: 0, Ready: true},
			},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "setup"}, {Name: "proxy", RestartCount: 7}},
			HostIP:                "10.0.0.1", PodIP: "10.1.0.1", PodIPs: []corev1.PodIP{{IP: "10.1.0.1"}},
			QOSClass: corev1.PodQOSBurstable, StartTime: ptr.To(metav1.NewTime(t0)),
		},
	}
}

func TestTrimPod(t *testing.T) {
	unsched := fullPod()
	unsched.Spec.NodeName = ""
	unsched.DeletionTimestamp = nil
	unsched.Annotations = nil
	unsched.Status = corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, Message: "0/3 nodes are available", LastTransitionTime: metav1.NewTime(t0)},
	}}

	for _, c := range []struct {
		name string
		in   *corev1.Pod
		want *corev1.Pod
	}{{
		name: "running pod keeps what is read",
		in:   fullPod(),
		want: &corev1.Pod{
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-abc", Namespace: "shop", UID: "pod-uid", ResourceVersion: "42",
				CreationTimestamp: metav1.NewTime(t0), DeletionTimestamp: ptr.To(metav1.NewTime(t0.Add(time.Hour))),
				Labels:          map[string]string{"app": "web", "tier": "front"},
				Annotations:     map[string]string{ranking.DeletionCostAnnotation: "-5"},
				OwnerReferences: []metav1.OwnerReference{owner, {APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm-uid"}},
			},
			Spec: corev1.PodSpec{
				NodeName: "node-1",
				InitContainers: []corev1.Container{
					{Name: "setup"},
					{Name: "proxy", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: req("100m", "64Mi")}},
				},
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: req("250m", "128Mi")}}, {Name: "logs"}},
				Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
			},
			Status: corev1.PodStatus{
				Phase:                 corev1.PodRunning,
				StartTime:             ptr.To(metav1.NewTime(t0)),
				Conditions:            []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0.Add(time.Minute))}},
				ContainerStatuses:     []corev1.ContainerStatus{{Name: "app", RestartCount: 3}},
				InitContainerStatuses: []corev1.ContainerStatus{{Name: "proxy", RestartCount: 7}},
			},
		},
	}, {
		name: "unschedulable pod keeps its PodScheduled=False condition",
		in:   unsched,
		want: &corev1.Pod{
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-abc", Namespace: "shop", UID: "pod-uid", ResourceVersion: "42", CreationTimestamp: metav1.NewTime(t0),
				Labels:          map[string]string{"app": "web", "tier": "front"},
				OwnerReferences: []metav1.OwnerReference{owner, {APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "cm-uid"}},
			},
			Spec: corev1.PodSpec{
				InitContainers: []corev1.Container{
					{Name: "setup"},
					{Name: "proxy", RestartPolicy: &sidecar, Resources: corev1.ResourceRequirements{Requests: req("100m", "64Mi")}},
				},
				Containers: []corev1.Container{{Name: "app", Resources: corev1.ResourceRequirements{Requests: req("250m", "128Mi")}}, {Name: "logs"}},
				Overhead:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
			},
			Status: corev1.PodStatus{
				Phase: corev1.PodPending,
				Conditions: []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
					LastTransitionTime: metav1.NewTime(t0)}},
			},
		},
	}, {
		name: "bare pod",
		in:   &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", ResourceVersion: "1"}},
		want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "n", UID: "u", ResourceVersion: "1"}},
	}} {
		t.Run(c.name, func(t *testing.T) {
			in := c.in.DeepCopy()
			got, err := worker.TrimPod(c.in)
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(got, c.want) {
				t.Fatalf("TrimPod: got != want:\n%s", diff.Diff(c.want, got))
			}
			if !equality.Semantic.DeepEqual(c.in, in) {
				t.Fatalf("TrimPod changed its input:\n%s", diff.Diff(in, c.in))
			}
			again, _ := worker.TrimPod(got)
			if !equality.Semantic.DeepEqual(again, got) {
				t.Fatalf("TrimPod is not idempotent:\n%s", diff.Diff(got, again))
			}
		})
	}
}

func TestTrimPassesOtherObjects(t *testing.T) {
	tomb := toolscache.DeletedFinalStateUnknown{Key: "n/p", Obj: fullPod()}
	for _, obj := range []any{tomb, &corev1.ConfigMap{}, &v1alpha1.MemberReplicaSet{}, nil} {
		for name, f := range map[string]func(any) (any, error){"TrimPod": worker.TrimPod, "TrimNode": worker.TrimNode} {
			got, err := f(obj)
			if err != nil || !equality.Semantic.DeepEqual(got, obj) {
				t.Errorf("%s(%T) = %v, %v; want it unchanged", name, obj, got, err)
			}
		}
	}
	if got, _ := worker.TrimNode(fullPod()); got.(*corev1.Pod).Spec.Volumes == nil {
		t.Error("TrimNode changed a pod")
	}
}

func TestTrimNode(t *testing.T) {
	in := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n-uid", ResourceVersion: "9", CreationTimestamp: metav1.NewTime(t0),
			Labels:        map[string]string{"topology.kubernetes.io/zone": "a", "cost": "spot"},
			Annotations:   map[string]string{"kwok.x-k8s.io/node": "fake"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}},
		Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.1.0.0/24", ProviderID: "kwok://node-1",
			Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Capacity:    corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status", LastHeartbeatTime: metav1.NewTime(t0), LastTransitionTime: metav1.NewTime(t0)},
			},
			Images:   []corev1.ContainerImage{{Names: []string{"registry.k8s.io/pause:3.10"}, SizeBytes: 1}},
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: "v1.36.0"},
		},
	}
	want := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1", UID: "n-uid", ResourceVersion: "9", CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{"topology.kubernetes.io/zone": "a", "cost": "spot"}},
		Spec: corev1.NodeSpec{Unschedulable: true, Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Allocatable: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("110")},
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastTransitionTime: metav1.NewTime(t0)}},
		},
	}
	got, err := worker.TrimNode(in)
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Fatalf("TrimNode: got != want:\n%s", diff.Diff(want, got))
	}
	again, _ := worker.TrimNode(got)
	if !equality.Semantic.DeepEqual(again, got) {
		t.Fatalf("TrimNode is not idempotent:\n%s", diff.Diff(got, again))
	}
}

// variedPods returns pods that differ in everything the engine, ranking,
// status math and capacity estimate look at.
func variedPods() []*corev1.Pod {
	var out []*corev1.Pod
	for i := range 48 {
		p := fullPod()
		p.Name, p.UID = fmt.Sprintf("web-%02d", i), types.UID(fmt.Sprintf("uid-%02d", i))
		p.CreationTimestamp = metav1.NewTime(t0.Add(-time.Duration(i%5) * time.Hour))
		p.DeletionTimestamp = nil
		if i%7 == 0 {
			p.DeletionTimestamp = ptr.To(metav1.NewTime(t0))
		}
		p.Spec.NodeName = []string{"", "node-1", "node-2", "node-3"}[i%4]
		p.Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodPending, corev1.PodUnknown, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed}[i%6]
		p.Annotations = map[string]string{"other": "x"}
		if i%3 == 0 {
			p.Annotations[ranking.DeletionCostAnnotation] = fmt.Sprint(i % 4)
		}
		if i%2 == 0 {
			p.Labels = map[string]string{"app": "web"}
		}
		ready := corev1.ConditionTrue
		if i%5 == 0 {
			ready = corev1.ConditionFalse
		}
		p.Status.Conditions[1].Status = ready
		p.Status.Conditions[1].LastTransitionTime = metav1.NewTime(t0.Add(-time.Duration(i%9) * time.Minute))
		if i%8 == 1 {
			p.Status.Conditions[3] = corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable, LastTransitionTime: metav1.NewTime(t0.Add(-time.Duration(i) * time.Minute))}
		}
		p.Status.ContainerStatuses[0].RestartCount = int32(i % 3)
		p.Status.InitContainerStatuses[1].RestartCount = int32(i % 4)
		switch i % 7 {
		case 1:
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: podstate.ReasonCrashLoopBackOff, Message: "back-off 5m0s"}}
		case 3:
			p.Status.InitContainerStatuses[1].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: podstate.ReasonCrashLoopBackOff}}
		case 5:
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}
		}
		if i%6 == 2 {
			p.OwnerReferences = nil
		}
		out = append(out, p)
	}
	return out
}

// TestTrimPodKeepsWhatTheEngineReads runs every reader of cached pods on full
// and on trimmed copies of the same pods and wants the same answers.
func TestTrimPodKeepsWhatTheEngineReads(t *testing.T) {
	full := variedPods()
	trimmed := make([]*corev1.Pod, len(full))
	for i, p := range full {
		got, err := worker.TrimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		trimmed[i] = got.(*corev1.Pod)
	}
	now := t0.Add(2 * time.Hour)
	for i := range full {
		f, tr := full[i], trimmed[i]
		checks := []struct {
			what      string
			got, want any
		}{
			{"IsActive", podstate.IsActive(tr), podstate.IsActive(f)},
			{"IsTerminating", podstate.IsTerminating(tr), podstate.IsTerminating(f)},
			{"IsReady", podstate.IsReady(tr), podstate.IsReady(f)},
			{"ReadySince", podstate.ReadySince(tr).String(), podstate.ReadySince(f).String()},
			{"IsAvailable", podstate.IsAvailable(tr, 300, now), podstate.IsAvailable(f, 300, now)},
			{"Restarts", podstate.Restarts(tr), podstate.Restarts(f)},
			{"CrashLooping", podstate.CrashLooping(tr), podstate.CrashLooping(f)},
			{"UnschedulableSince", fmt.Sprint(podstate.UnschedulableSince(tr)), fmt.Sprint(podstate.UnschedulableSince(f))},
			{"DeletionCost", ranking.DeletionCost(tr.Annotations), ranking.DeletionCost(f.Annotations)},
			{"PodControllerIndex", engine.PodControllerIndexFunc(tr), engine.PodControllerIndexFunc(f)},
			{"ControllerOf", metav1.GetControllerOf(tr), metav1.GetControllerOf(f)},
		}
		for _, c := range checks {
			if !equality.Semantic.DeepEqual(c.got, c.want) {
				t.Errorf("pod %s: %s on the trimmed pod = %v, on the full pod %v", f.Name, c.what, c.got, c.want)
			}
		}
	}
	names := func(ps []*corev1.Pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, p.Name)
		}
		return out
	}
	tier := func(p *corev1.Pod) ranking.NodeTier {
		return ranking.NodeTier{Ranked: p.Spec.NodeName != "node-2", Cost: int64(len(p.Spec.NodeName))}
	}
	for _, n := range []int{1, 10, 30, len(full) - 1} {
		for _, tierOf := range []func(*corev1.Pod) ranking.NodeTier{nil, tier} {
			got := names(ranking.PodsToDelete(append([]*corev1.Pod(nil), trimmed...), trimmed, n, now, tierOf))
			want := names(ranking.PodsToDelete(append([]*corev1.Pod(nil), full...), full, n, now, tierOf))
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("PodsToDelete(%d, tiers %v) on trimmed pods = %v, on full pods %v", n, tierOf != nil, got, want)
			}
		}
	}
	in := replicastatus.Input{Target: 10, TemplateLabels: map[string]string{"app": "web", "tier": "front"}, MinReadySeconds: 120, Now: now}
	inTr := in
	in.Active, in.Terminating = full[:30], full[30:]
	inTr.Active, inTr.Terminating = trimmed[:30], trimmed[30:]
	if got, want := replicastatus.Calculate(inTr), replicastatus.Calculate(in); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("status from trimmed pods differs:\n%s", diff.Diff(want, got))
	}
	gotN, gotT := replicastatus.Unschedulable(trimmed)
	wantN, wantT := replicastatus.Unschedulable(full)
	if gotN != wantN || !gotT.Equal(wantT) {
		t.Errorf("Unschedulable on trimmed pods = %d, %v; on full pods %d, %v", gotN, gotT, wantN, wantT)
	}

	// The hub's capacity estimate reads the member's pods and nodes too.
	var nodes, nodesTr []corev1.Node
	for i := range 4 {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", i), Labels: map[string]string{"zone": fmt.Sprint(i % 2)}},
			Spec: corev1.NodeSpec{Unschedulable: i == 3},
			Status: corev1.NodeStatus{
				Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi"), corev1.ResourcePods: resource.MustParse("110")},
				Images:      []corev1.ContainerImage{{Names: []string{"x"}}},
				Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Message: "ok"}}}}
		tr, _ := worker.TrimNode(&n)
		nodes, nodesTr = append(nodes, n), append(nodesTr, *tr.(*corev1.Node))
	}
	var pods, podsTr []corev1.Pod
	for i := range full {
		pods, podsTr = append(pods, *full[i]), append(podsTr, *trimmed[i])
	}
	tmpl := &corev1.PodTemplateSpec{Spec: corev1.PodSpec{NodeSelector: map[string]string{"zone": "1"},
		Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req("500m", "1Gi")}}}}}
	if got, want := capacity.Estimate(nodesTr, podsTr, tmpl), capacity.Estimate(nodes, pods, tmpl); got != want {
		t.Errorf("capacity.Estimate on trimmed objects = %d, on full objects %d", got, want)
	}
	if got, want := capacity.Summarize(nodesTr, podsTr), capacity.Summarize(nodes, pods); !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("capacity.Summarize on trimmed objects differs:\n%s", diff.Diff(want, got))
	}
}

// TestTrimPodShares checks that pods with equal labels, owners and requests
// share one copy in the cache, and that unequal ones do not.
func TestTrimPodShares(t *testing.T) {
	trim := func(mut func(*corev1.Pod)) *corev1.Pod {
		p := fullPod()
		mut(p)
		got, err := worker.TrimPod(p)
		if err != nil {
			t.Fatal(err)
		}
		return got.(*corev1.Pod)
	}
	a := trim(func(*corev1.Pod) {})
	b := trim(func(p *corev1.Pod) {
		p.Name, p.UID = "web-other", "other-uid"
		// Equal quantities written differently are equal requests.
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0.25")
	})
	c := trim(func(p *corev1.Pod) {
		p.Labels = map[string]string{"app": "web", "tier": "back"}
		p.OwnerReferences[0].UID = "other-owner"
		p.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("300m")
	})
	same := func(x, y any) bool { return fmt.Sprintf("%p", x) == fmt.Sprintf("%p", y) }
	if !same(a.Labels, b.Labels) || !same(a.OwnerReferences, b.OwnerReferences) || !same(a.Spec.Containers, b.Spec.Containers) {
		t.Error("pods with equal labels, owners and requests do not share them")
	}
	if same(a.Labels, c.Labels) || same(a.OwnerReferences, c.OwnerReferences) || same(a.Spec.Containers, c.Spec.Containers) {
		t.Error("pods with different labels, owners or requests share them")
	}
	if got := c.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; got.MilliValue() != 300 {
		t.Errorf("requests of the third pod: cpu %v, want 300m", got.String())
	}
}

// TestTrimPodManyDistinctLabels passes more distinct label sets than the
// sharing tables keep, twice: every pod must still get its own labels.
func TestTrimPodManyDistinctLabels(t *testing.T) {
	for round := range 2 {
		for i := range 3000 {
			p := fullPod()
			p.Labels = map[string]string{"app": "web", "statefulset.kubernetes.io/pod-name": fmt.Sprintf("web-%d", i)}
			got, err := worker.TrimPod(p)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got.(*corev1.Pod).Labels, p.Labels) {
				t.Fatalf("round %d pod %d: labels %v, want %v", round, i, got.(*corev1.Pod).Labels, p.Labels)
			}
		}
	}
}
