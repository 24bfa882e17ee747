package worker

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/controller/podstate"
	"github.com/replicafed/replicafed/controller/ranking"
)

// CacheOptions sets a member cluster's informer transforms: pods and nodes
// are cached slimmed by TrimPod and TrimNode, every other object without
// managedFields. Every member cluster the product builds passes it to
// cluster.New, after the scheme. A member replica caches every pod of every
// member, so what a cached pod costs decides how large a fleet one replica
// can watch.
func CacheOptions(o *cluster.Options) {
	if o.Cache.ByObject == nil {
		o.Cache.ByObject = map[client.Object]cache.ByObject{}
	}
	o.Cache.ByObject[&corev1.Pod{}] = cache.ByObject{Transform: TrimPod}
	o.Cache.ByObject[&corev1.Node{}] = cache.ByObject{Transform: TrimNode}
	o.Cache.DefaultTransform = cache.TransformStripManagedFields()
}

// TrimPod is the member pod informer's transform. It returns a new pod
// holding only what is read from the member cache:
//
//   - the engine, claim and the event handlers: name, namespace, UID,
//     resourceVersion, labels, owner references, creation and deletion
//     timestamps;
//   - ranking: spec.nodeName, phase, the Ready condition, the
//     pod-deletion-cost annotation, restart counts of containers and of
//     sidecar init containers (which needs the init containers' names and
//     restartPolicy);
//   - status math: the Ready condition, PodScheduled=False (Unschedulable),
//     restart counts and a CrashLoopBackOff wait (the rollout's health gate);
//   - the hub's capacity estimate: spec.nodeName, phase, container and
//     init container requests, spec.overhead;
//   - the autoscaler (federation/autoscale): requests, phase, the Ready
//     condition and status.startTime (the CPU initialisation period).
//
// Dropped: managedFields, finalizers, other annotations, the rest of the
// spec (images, env, volumes, tolerations ...), container statuses with no
// restart, other conditions and condition messages, IPs, QoS class. Strings
// repeated across pods (namespace, owner, node, label keys and values) are
// interned. Objects other than pods pass unchanged; the result of TrimPod is
// unchanged by TrimPod, as informers require. Labels, owner references and
// container requests are shared between pods that have equal ones (see
// sharedValues): a cached pod must never be modified in place.
func TrimPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{Kind: intern(p.Kind), APIVersion: intern(p.APIVersion)},
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: intern(p.Namespace), UID: p.UID, ResourceVersion: p.ResourceVersion,
			CreationTimestamp: p.CreationTimestamp, DeletionTimestamp: p.DeletionTimestamp,
			Labels: labelsOf(p.Labels), OwnerReferences: refsOf(p.OwnerReferences),
		},
		Spec: corev1.PodSpec{
			NodeName:       intern(p.Spec.NodeName),
			InitContainers: containersOf(p.Spec.InitContainers, true),
			Containers:     containersOf(p.Spec.Containers, false),
			Overhead:       p.Spec.Overhead,
		},
		Status: corev1.PodStatus{
			Phase:                 corev1.PodPhase(intern(string(p.Status.Phase))),
			StartTime:             p.Status.StartTime,
			Conditions:            trimPodConditions(p.Status.Conditions),
			ContainerStatuses:     restarted(p.Status.ContainerStatuses),
			InitContainerStatuses: restarted(p.Status.InitContainerStatuses),
		},
	}
	if v, ok := p.Annotations[ranking.DeletionCostAnnotation]; ok {
		out.Annotations = map[string]string{ranking.DeletionCostAnnotation: v}
	}
	return out, nil
}

// TrimNode is the member node informer's transform: it keeps the name,
// UID, resourceVersion, labels (node cost tiers, node selectors and
// affinity), unschedulable, taints, allocatable and the Ready condition
// (the capacity estimate), and drops the rest (images, addresses, node
// info, managedFields, annotations). Objects other than nodes pass
// unchanged.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	out := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: intern(n.Kind), APIVersion: intern(n.APIVersion)},
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			CreationTimestamp: n.CreationTimestamp, DeletionTimestamp: n.DeletionTimestamp,
			Labels: labelsOf(n.Labels),
		},
		Spec:   corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, Taints: n.Spec.Taints},
		Status: corev1.NodeStatus{Allocatable: n.Status.Allocatable},
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status, Reason: c.Reason, LastTransitionTime: c.LastTransitionTime}}
			break
		}
	}
	return out, nil
}

// trimPodConditions keeps Ready (readiness and its transition time) and
// PodScheduled=False (unschedulable since), without messages.
func trimPodConditions(cs []corev1.PodCondition) []corev1.PodCondition {
	var out []corev1.PodCondition
	for _, c := range cs {
		switch {
		case c.Type == corev1.PodReady:
		case c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse:
		default:
			continue
		}
		out = append(out, corev1.PodCondition{
			Type: corev1.PodConditionType(intern(string(c.Type))), Status: corev1.ConditionStatus(intern(string(c.Status))),
			Reason: intern(c.Reason), LastTransitionTime: c.LastTransitionTime,
		})
	}
	return out
}

// restarted keeps the name and restart count of containers that restarted:
// ranking only compares the highest count, and a missing status counts 0.
func restarted(ss []corev1.ContainerStatus) []corev1.ContainerStatus {
	var out []corev1.ContainerStatus
	for _, s := range ss {
		// The rollout's health gate counts crash-looping pods.
		looping := s.State.Waiting != nil && s.State.Waiting.Reason == podstate.ReasonCrashLoopBackOff
		if s.RestartCount > 0 || looping {
			c := corev1.ContainerStatus{Name: intern(s.Name), RestartCount: s.RestartCount}
			if looping {
				c.State.Waiting = crashLoopBackOff
			}
			out = append(out, c)
		}
	}
	return out
}

// crashLoopBackOff is shared by every cached container status that waits
// in CrashLoopBackOff; cached pods are never modified in place.
var crashLoopBackOff = &corev1.ContainerStateWaiting{Reason: podstate.ReasonCrashLoopBackOff}
