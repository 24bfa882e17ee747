package charts

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/hubpolicy"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

const (
	frsNamespace = "shop"
	frsName      = "web"
	memberName   = "member-a"
	crdName      = "federatedreplicasets.replicafed.io"
	guardName    = fullname + "-finalizer-guard." + namespace
)

// installFlags installs the chart with free ports, so the test never
// collides with anything listening on the defaults.
func installFlags(t *testing.T) []string {
	t.Helper()
	flags := []string{"--namespace", namespace}
	for _, key := range []string{"raft.port", "raft.adminPort", "metrics.port", "health.port"} {
		p, err := testcluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		flags = append(flags, "--set", key+"="+strconv.Itoa(p))
	}
	return flags
}

// TestInstallOnHub installs the chart with `helm install` into a real hub,
// runs its StatefulSet's pods as replicafed processes with the chart's
// config, env and ServiceAccount token, and takes a FederatedReplicaSet
// through create, scale and delete in a real member. Then it uninstalls with
// a FederatedReplicaSet left (the guard refuses a deletion that would hang),
// reinstalls, deletes it, and uninstalls in the documented order.
func TestInstallOnHub(t *testing.T) {
	h := startHub(t, "hub", testcluster.Options{})
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	// The member has the MemberReplicaSet CRD before its garbage collector
	// starts, as a member joined a while ago has (join finds it in place);
	// installed by join here, the FederatedReplicaSet's deletion would wait
	// up to 30 s for the collector to rediscover resources.
	member := testcluster.Start(t, testcluster.Options{Name: memberName, Scheduler: true, Nodes: 2, CRDs: memberCRDs})
	memberClient := clientFor(t, member)
	binary := buildReplicafed(t)
	flags := installFlags(t)
	pods := newPodRunner(t, h, binary)
	// The chart's generated certificate names the pods' DNS names; the
	// runner's pods dial each other at loopback addresses instead.
	flags = append(flags, "--set-json", fmt.Sprintf(`raft.tls.extraIPAddresses=["%s","%s","%s"]`, pods.ipOf(0), pods.ipOf(1), pods.ipOf(2)))

	out := h.helm(t, append([]string{"install", release, chartDir, "--create-namespace"}, flags...)...)
	if !strings.Contains(out, "replicafed join member-a") || !strings.Contains(out, "--namespace "+namespace) {
		t.Errorf("NOTES lack the member registration step the test follows:\n%s", out)
	}
	checkInstalledObjects(t, h)
	if err := hubpolicy.WaitFinalizer(context.Background(), h.cl, 2*time.Minute); err != nil {
		t.Fatal(err)
	}

	cfg := configOf(t, h)
	registerMember(t, h, binary, cfg, memberName, member)
	pods.startAll(t, namespace, fullname)
	pods.waitReady(t)

	ctx := context.Background()
	if err := h.cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: frsNamespace}}); err != nil {
		t.Fatal(err)
	}
	frs := newFRS(t, 2)
	if err := h.cl.Create(ctx, frs); err != nil {
		t.Fatalf("creating the FederatedReplicaSet: %v", err)
	}
	waitReplicas(t, h, memberClient, 2)

	patch := client.MergeFrom(frs.DeepCopy())
	frs.Spec.Replicas = ptrTo[int32](4)
	if err := h.cl.Patch(ctx, frs, patch); err != nil {
		t.Fatalf("scaling: %v", err)
	}
	waitReplicas(t, h, memberClient, 4)

	if err := h.cl.Delete(ctx, frs); err != nil {
		t.Fatalf("deleting: %v", err)
	}
	waitDeleted(t, h, memberClient)
	if lines := pods.forbidden(nil); len(lines) > 0 {
		t.Fatalf("the hub refused replicafed (chart RBAC is short):\n%s", strings.Join(lines, "\n"))
	}

	// Uninstall while a FederatedReplicaSet is left: the pre-delete hook
	// puts the guard in place before anything is deleted.
	frs = newFRS(t, 1)
	if err := h.cl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	waitReplicas(t, h, memberClient, 1)
	out = h.helm(t, "uninstall", release, "--namespace", namespace)
	if !strings.Contains(out, crdName) {
		t.Errorf("helm uninstall does not report keeping the CRD:\n%s", out)
	}
	pods.stopAll() // the StatefulSet is gone: its pods get SIGTERM
	checkUninstalled(t, h)
	poll(t, "the guard to refuse deleting the FederatedReplicaSet", func(ctx context.Context) (bool, error) {
		err := h.cl.Delete(ctx, newFRS(t, 1), client.DryRunAll)
		if err == nil {
			return false, fmt.Errorf("dry-run delete allowed")
		}
		return strings.Contains(err.Error(), guardName), err
	})
	if err := h.cl.Delete(ctx, newFRS(t, 1)); err == nil || !strings.Contains(err.Error(), guardName) {
		t.Fatalf("deleting a FederatedReplicaSet with replicafed uninstalled: got %v, want the guard's refusal", err)
	}
	if err := h.cl.Get(ctx, client.ObjectKeyFromObject(frs), frs); err != nil || frs.DeletionTimestamp != nil {
		t.Fatalf("FederatedReplicaSet after the refused delete: deletionTimestamp %v, err %v; want it untouched", frs.DeletionTimestamp, err)
	}

	// Reinstall (the raft data was kept, as the PVCs are), this time with
	// raft mutual TLS from a Secret: the guard lifts and the finalizer is
	// released as usual.
	raftTLSSecret(t, h, namespace, "raft-tls", []string{pods.ipOf(0), pods.ipOf(1), pods.ipOf(2)})
	h.helm(t, append([]string{"install", release, chartDir, "--set", "raft.tls.secretName=raft-tls"}, flags...)...)
	registerMember(t, h, binary, configOf(t, h), memberName, member)
	reinstalled := pods.logSizes()
	pods.startAll(t, namespace, fullname)
	pods.waitReady(t)
	for _, p := range pods.pods {
		if last := p.lastLine("Raft node started"); !strings.Contains(last, `"mutualTLS":true`) {
			t.Errorf("%s did not start raft with mutual TLS: %s", p.name, last)
		}
	}
	poll(t, "the guard to allow deletes again", func(ctx context.Context) (bool, error) {
		err := h.cl.Delete(ctx, newFRS(t, 1), client.DryRunAll)
		return err == nil, err
	})
	// The documented order, with the commands NOTES.txt and docs/install.md give:
	// delete every FederatedReplicaSet, wait for them to go, uninstall.
	h.kubectl(t, "delete", "frs", "--all", "-A")
	h.kubectl(t, "wait", "--for=delete", "frs", "--all", "-A", "--timeout=90s")
	waitDeleted(t, h, memberClient)
	if lines := pods.forbidden(reinstalled); len(lines) > 0 {
		t.Fatalf("the hub refused the reinstalled replicafed (chart RBAC is short):\n%s", strings.Join(lines, "\n"))
	}
	h.helm(t, "uninstall", release, "--namespace", namespace)
	pods.stopAll()
	checkUninstalled(t, h)
}

func ptrTo[T any](v T) *T { return &v }

func clientFor(t *testing.T, c *testcluster.Cluster) client.Client {
	t.Helper()
	scheme, err := kubescheme.New()
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(c.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// newFRS is the test's FederatedReplicaSet: pods for the member's kwok nodes.
func newFRS(t *testing.T, replicas int32) *v1alpha1.FederatedReplicaSet {
	t.Helper()
	frs := &v1alpha1.FederatedReplicaSet{}
	manifest := fmt.Sprintf(`
apiVersion: replicafed.io/v1alpha1
kind: FederatedReplicaSet
metadata: {name: %s, namespace: %s}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  placement:
    clusters: [{name: %s}]
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: registry.k8s.io/pause:3.10}]
      tolerations: [{key: kwok.x-k8s.io/node, operator: Equal, value: fake, effect: NoSchedule}]
`, frsName, frsNamespace, replicas, memberName)
	if err := yaml.UnmarshalStrict([]byte(manifest), frs); err != nil {
		t.Fatal(err)
	}
	return frs
}

// waitReplicas waits for n ready pods in the member and the hub status
// saying so.
func waitReplicas(t *testing.T, h *hub, member client.Client, n int32) {
	t.Helper()
	poll(t, fmt.Sprintf("%d ready replicas", n), func(ctx context.Context) (bool, error) {
		var pods corev1.PodList
		if err := member.List(ctx, &pods, client.InNamespace(frsNamespace), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err
		}
		var ready int32
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if p.DeletionTimestamp == nil && c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		frs := &v1alpha1.FederatedReplicaSet{}
		if err := h.cl.Get(ctx, types.NamespacedName{Namespace: frsNamespace, Name: frsName}, frs); err != nil {
			return false, err
		}
		if ready != n || int32(len(pods.Items)) != n || frs.Status.ReadyReplicas != n {
			return false, fmt.Errorf("member has %d pods (%d ready), hub status readyReplicas %d", len(pods.Items), ready, frs.Status.ReadyReplicas)
		}
		return true, nil
	})
}

// waitDeleted waits for the FederatedReplicaSet, its MemberReplicaSet and
// its pods to be gone: the cascade finalizer was released.
func waitDeleted(t *testing.T, h *hub, member client.Client) {
	t.Helper()
	poll(t, "the FederatedReplicaSet and its pods to be deleted", func(ctx context.Context) (bool, error) {
		err := h.cl.Get(ctx, types.NamespacedName{Namespace: frsNamespace, Name: frsName}, &v1alpha1.FederatedReplicaSet{})
		if !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("FederatedReplicaSet still there (%v)", err)
		}
		var pods corev1.PodList
		if err := member.List(ctx, &pods, client.InNamespace(frsNamespace), client.MatchingLabels{"app": "web"}); err != nil {
			return false, err
		}
		var mrs v1alpha1.MemberReplicaSetList
		if err := member.List(ctx, &mrs, client.InNamespace(frsNamespace)); err != nil {
			return false, err
		}
		return len(pods.Items) == 0 && len(mrs.Items) == 0, fmt.Errorf("%d pods and %d MemberReplicaSets left", len(pods.Items), len(mrs.Items))
	})
}

// checkInstalledObjects reads back what `helm install` created.
func checkInstalledObjects(t *testing.T, h *hub) {
	t.Helper()
	ctx := context.Background()
	for _, obj := range []client.Object{
		named(&corev1.ServiceAccount{}, namespace, fullname),
		named(&corev1.ConfigMap{}, namespace, fullname+"-config"),
		named(&corev1.Service{}, namespace, headless),
		named(&corev1.Service{}, namespace, fullname+"-metrics"),
	} {
		if err := h.cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Errorf("%T %s: %v", obj, obj.GetName(), err)
		}
	}
	kube := h.kube
	if _, err := kube.AppsV1().StatefulSets(namespace).Get(ctx, fullname, metav1.GetOptions{}); err != nil {
		t.Errorf("StatefulSet: %v", err)
	}
	if _, err := kube.PolicyV1().PodDisruptionBudgets(namespace).Get(ctx, fullname, metav1.GetOptions{}); err != nil {
		t.Errorf("PodDisruptionBudget: %v", err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Get(ctx, fullname, metav1.GetOptions{}); err != nil {
		t.Errorf("ClusterRole: %v", err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, fullname, metav1.GetOptions{}); err != nil {
		t.Errorf("ClusterRoleBinding: %v", err)
	}
	if _, err := kube.RbacV1().Roles(namespace).Get(ctx, fullname+"-cluster-registry", metav1.GetOptions{}); err != nil {
		t.Errorf("Role: %v", err)
	}
	if _, err := kube.RbacV1().RoleBindings(namespace).Get(ctx, fullname+"-cluster-registry", metav1.GetOptions{}); err != nil {
		t.Errorf("RoleBinding: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("selector ValidatingAdmissionPolicy: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, crdName, metav1.GetOptions{}); err != nil {
		t.Errorf("selector ValidatingAdmissionPolicyBinding: %v", err)
	}
	// The hub (Kubernetes 1.36) serves MutatingAdmissionPolicy, so helm's
	// capability check installs the finalizer policy.
	finalizerPolicy := "federatedreplicasets-finalizer.replicafed.io"
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicies().Get(ctx, finalizerPolicy, metav1.GetOptions{}); err != nil {
		t.Errorf("finalizer MutatingAdmissionPolicy: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingAdmissionPolicyBindings().Get(ctx, finalizerPolicy, metav1.GetOptions{}); err != nil {
		t.Errorf("finalizer MutatingAdmissionPolicyBinding: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, guardName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the uninstall guard exists before uninstall (%v)", err)
	}
	poll(t, "the CRD to be established", func(ctx context.Context) (bool, error) {
		crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, fmt.Errorf("not established")
	})
}

// checkUninstalled: the release's objects are gone; the CRD and the guard
// stay.
func checkUninstalled(t *testing.T, h *hub) {
	t.Helper()
	poll(t, "the release's objects to be deleted", func(ctx context.Context) (bool, error) {
		for _, obj := range []client.Object{
			named(&corev1.ServiceAccount{}, namespace, fullname),
			named(&corev1.ConfigMap{}, namespace, fullname+"-config"),
			named(&corev1.Service{}, namespace, headless),
		} {
			if err := h.cl.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("%T %s still there (%v)", obj, obj.GetName(), err)
			}
		}
		if _, err := h.kube.AppsV1().StatefulSets(namespace).Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("StatefulSet still there (%v)", err)
		}
		if _, err := h.kube.RbacV1().ClusterRoles().Get(ctx, fullname, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return false, fmt.Errorf("ClusterRole still there (%v)", err)
		}
		return true, nil
	})
	ctx := context.Background()
	if crd, err := h.ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crdName, metav1.GetOptions{}); err != nil || crd.DeletionTimestamp != nil {
		t.Errorf("the CRD was not kept: %v", err)
	}
	if _, err := h.kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(ctx, guardName, metav1.GetOptions{}); err != nil {
		t.Errorf("the uninstall guard policy: %v", err)
	}
	if _, err := h.kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Get(ctx, guardName, metav1.GetOptions{}); err != nil {
		t.Errorf("the uninstall guard binding: %v", err)
	}
}

func named[T client.Object](obj T, ns, name string) T {
	obj.SetNamespace(ns)
	obj.SetName(name)
	return obj
}
