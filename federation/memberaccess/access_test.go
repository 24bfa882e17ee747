package memberaccess_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/controller/expectations"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/memberaccess"
	"github.com/replicafed/replicafed/federation/membersetup"
	"github.com/replicafed/replicafed/internal/fedref"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

// One hub and one member serve every subtest: control planes are the
// expensive part on a loaded machine.
func TestOnRealClusters(t *testing.T) {
	// Failures name what was refused in the assertion messages (the
	// MemberReplicaSet's ReplicaFailure condition carries the API error).
	ctrllog.SetLogger(logr.Discard())
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	member := testcluster.Start(t, testcluster.Options{
		Name: "member", Nodes: 1, Scheduler: true,
		// In place before the garbage collector starts, as in a member
		// joined a while ago: installed later, a foreground deletion waits
		// up to 30 s for the collector to rediscover resources. Grant and
		// EnsureCRDs find it; `replicafed join` installing it is covered
		// by cmd/replicafed and e2e.
		CRDs: memberCRDs,
		// Real clusters often enforce that whoever sets blockOwnerDeletion may
		// update the owner's finalizers; prove the role covers it.
		APIServerArgs: []string{"--enable-admission-plugins=OwnerReferencesPermissionEnforcement"},
	})
	hub := testcluster.Start(t, testcluster.Options{Name: "hub", CRDs: hubCRDs})

	t.Run("RoleSufficesForMemberEngine", func(t *testing.T) { roleSuffices(t, member) })
	t.Run("RoleDeniesEverythingElse", func(t *testing.T) { roleDenies(t, member) })
	t.Run("JoinUnjoin", func(t *testing.T) { joinUnjoin(t, hub, member) })
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func eventually(t *testing.T, what string, cond func(ctx context.Context) (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, msg := cond(ctx)
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not reached; last: %s", what, last)
	}
}

// roleSuffices runs the real member engine, and every other call replicafed
// makes in a member, with nothing but the granted token.
func roleSuffices(t *testing.T, member *testcluster.Cluster) {
	ctx := ctxFor(t)
	// As the e2e fleet does: a kubeconfig file per member.
	path := filepath.Join(t.TempDir(), "member.kubeconfig")
	acc, err := memberaccess.Grant(ctx, member.Config, memberaccess.GrantOptions{Role: memberaccess.RoleOptions{CreateNamespaces: true}})
	if err != nil {
		t.Fatalf("granting access: %v", err)
	}
	if err := os.WriteFile(path, acc.Kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	fromFile, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil || fromFile.BearerToken != acc.Config.BearerToken {
		t.Fatalf("kubeconfig file: %v", err)
	}
	if !acc.ExpiresAt.After(time.Now().Add(time.Hour)) {
		t.Fatalf("token expires at %v; want a long-lived token", acc.ExpiresAt)
	}
	limited := rest.CopyConfig(acc.Config)
	limited.QPS, limited.Burst = 50, 100
	admin, err := client.New(member.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}

	// Member preparation: the CRD exists, so replicafed reads (and would
	// update) it by name.
	memberCRDs, err := crds.Member()
	if err != nil {
		t.Fatal(err)
	}
	if err := membersetup.EnsureCRDs(ctx, limited, memberCRDs); err != nil {
		t.Fatalf("member preparation with the member role: %v", err)
	}
	// The health probe.
	hc := rest.CopyConfig(limited)
	hc.GroupVersion, hc.APIPath, hc.NegotiatedSerializer = &schema.GroupVersion{}, "/", scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(hc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rc.Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Fatalf("health probe with the member role: %v", err)
	}

	mc, err := cluster.New(limited, func(o *cluster.Options) { o.Scheme = kubescheme.Must() })
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	go func() { _ = mc.Start(runCtx) }()
	src := testworkload.NewSource()
	mgr := worker.NewManager(worker.Options{CreateNamespaces: true, Store: expectations.NewMemory(0, nil), Source: src})
	if err := mgr.Engage(runCtx, "member", mc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stop(); mgr.Stop() })

	// The capacity estimate's node informer.
	eventually(t, "nodes listed from the member cache", func(ctx context.Context) (bool, string) {
		var nodes corev1.NodeList
		if err := mc.GetCache().List(ctx, &nodes); err != nil {
			return false, err.Error()
		}
		return len(nodes.Items) > 0, fmt.Sprintf("%d nodes", len(nodes.Items))
	})

	// A namespace the member lacks: the engine creates it.
	const ns, name = "shop", "web"
	key := fedref.MemberObject{Cluster: "member", Namespace: ns, Name: name}
	lbls := map[string]string{"app": name}
	workload := func(target int32) *engine.Workload { return testworkload.Workload(key, target) }
	converged := func(want int32) {
		t.Helper()
		eventually(t, fmt.Sprintf("%d replicas", want), func(ctx context.Context) (bool, string) {
			mrs := &v1alpha1.MemberReplicaSet{}
			if err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mrs); err != nil {
				return false, err.Error()
			}
			var pods corev1.PodList
			if err := admin.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(lbls)); err != nil {
				return false, err.Error()
			}
			active := 0
			for i := range pods.Items {
				if metav1.IsControlledBy(&pods.Items[i], mrs) && pods.Items[i].DeletionTimestamp == nil {
					active++
				}
			}
			return int32(active) == want && mrs.Status.Replicas == want && mrs.Status.ObservedGeneration == mrs.Generation,
				fmt.Sprintf("pods=%d status=%+v", active, mrs.Status)
		})
	}
	src.Set(key, workload(3))
	mgr.Enqueue(key)
	converged(3)
	// An orphan matching the selector: adopted with a patch, then the
	// surplus deleted.
	orphan := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "orphan", Labels: lbls},
		Spec:       workload(0).Template.Spec,
	}
	if err := admin.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	eventually(t, "orphan adopted", func(ctx context.Context) (bool, string) {
		p := &corev1.Pod{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(orphan), p); err != nil {
			return apierrors.IsNotFound(err), err.Error() // adopted, then chosen for deletion
		}
		ref := metav1.GetControllerOf(p)
		return ref != nil && ref.Kind == "MemberReplicaSet", fmt.Sprintf("controller %v", ref)
	})
	converged(3)
	src.Set(key, workload(1))
	mgr.Enqueue(key)
	converged(1)

	var evs eventsv1.EventList
	if err := admin.List(ctx, &evs, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	reasons := map[string]bool{}
	for _, e := range evs.Items {
		reasons[e.Reason] = true
	}
	if !reasons[engine.ReasonSuccessfulCreate] || !reasons[engine.ReasonSuccessfulDelete] {
		t.Fatalf("member events %v; want the engine's create and delete events (events.k8s.io create/patch)", reasons)
	}

	// The raft leader's live pod list, then the hub's cascading delete of
	// the MemberReplicaSet when the FederatedReplicaSet goes.
	var live corev1.PodList
	if err := mc.GetAPIReader().List(ctx, &live, client.InNamespace(ns)); err != nil {
		t.Fatalf("live pod list with the member role: %v", err)
	}
	src.Set(key, nil)
	mrs := &v1alpha1.MemberReplicaSet{}
	if err := mc.GetAPIReader().Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, mrs); err != nil {
		t.Fatalf("live MemberReplicaSet read with the member role: %v", err)
	}
	if err := mc.GetClient().Delete(ctx, mrs, client.PropagationPolicy(metav1.DeletePropagationForeground),
		client.Preconditions{UID: &mrs.UID}); err != nil {
		t.Fatalf("deleting the MemberReplicaSet with the member role: %v", err)
	}
	eventually(t, "MemberReplicaSet and pods gone", func(ctx context.Context) (bool, string) {
		var pods corev1.PodList
		if err := admin.List(ctx, &pods, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		err := admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &v1alpha1.MemberReplicaSet{})
		return apierrors.IsNotFound(err) && len(pods.Items) == 0, fmt.Sprintf("pods=%d get=%v", len(pods.Items), err)
	})
}

// roleDenies checks the token gets nothing beyond the role.
func roleDenies(t *testing.T, member *testcluster.Cluster) {
	ctx := ctxFor(t)
	o := memberaccess.GrantOptions{ServiceAccount: "narrow", ClusterRoleName: "replicafed-member-narrow"}
	acc, err := memberaccess.Grant(ctx, member.Config, o)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(acc.Config)
	if err != nil {
		t.Fatal(err)
	}
	// Something to be denied: a Secret the token must not read.
	adminCS := kubernetes.NewForConfigOrDie(member.Config)
	if _, err := adminCS.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "private"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	crd.Name = "widgets.example.com"
	cases := []struct {
		name string
		call func() error
	}{
		{"list secrets", func() error { _, err := cs.CoreV1().Secrets("").List(ctx, metav1.ListOptions{}); return err }},
		{"get secret", func() error {
			_, err := cs.CoreV1().Secrets("default").Get(ctx, "private", metav1.GetOptions{})
			return err
		}},
		{"list configmaps", func() error { _, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{}); return err }},
		{"create namespace without createNamespaces", func() error {
			_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "denied"}}, metav1.CreateOptions{})
			return err
		}},
		{"delete namespace", func() error { return cs.CoreV1().Namespaces().Delete(ctx, "default", metav1.DeleteOptions{}) }},
		{"delete node", func() error { return cs.CoreV1().Nodes().Delete(ctx, member.NodeName(0), metav1.DeleteOptions{}) }},
		{"pod exec", func() error {
			return cs.CoreV1().RESTClient().Post().Namespace("default").Resource("pods").Name("x").SubResource("exec").Do(ctx).Error()
		}},
		{"read serviceaccounts", func() error {
			_, err := cs.CoreV1().ServiceAccounts(memberaccess.DefaultNamespace).Get(ctx, "narrow", metav1.GetOptions{})
			return err
		}},
		{"create clusterrolebinding", func() error {
			_, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "escalate"},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: memberaccess.DefaultNamespace, Name: "narrow"}},
			}, metav1.CreateOptions{})
			return err
		}},
		{"list deployments", func() error { _, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{}); return err }},
		{"update pod status", func() error {
			_, err := cs.CoreV1().Pods("default").UpdateStatus(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: "default"}}, metav1.UpdateOptions{})
			return err
		}},
	}
	for _, c := range cases {
		if err := c.call(); !apierrors.IsForbidden(err) {
			t.Errorf("%s with the member role: got %v, want Forbidden", c.name, err)
		}
	}
	// CRDs: only the MemberReplicaSet CRD, and never create.
	ext := kubernetesExt(t, acc.Config)
	if err := ext.Post().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions").Body(mustJSON(t, crd)).Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Errorf("create CRD with the member role: got %v, want Forbidden", err)
	}
	if err := ext.Get().AbsPath("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/federatedreplicasets.replicafed.io").Do(ctx).Error(); !apierrors.IsForbidden(err) {
		t.Errorf("get another CRD with the member role: got %v, want Forbidden", err)
	}

	// Revoking deletes the ServiceAccount, which invalidates its tokens.
	if err := memberaccess.Revoke(ctx, member.Config, o); err != nil {
		t.Fatal(err)
	}
	eventually(t, "token refused after revoke", func(ctx context.Context) (bool, string) {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err), fmt.Sprintf("%v", err)
	})
}

func kubernetesExt(t *testing.T, cfg *rest.Config) *rest.RESTClient {
	c := rest.CopyConfig(cfg)
	c.GroupVersion, c.APIPath, c.NegotiatedSerializer = &schema.GroupVersion{}, "/", scheme.Codecs.WithoutConversion()
	rc, err := rest.UnversionedRESTClientFor(c)
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func joinUnjoin(t *testing.T, hub, member *testcluster.Cluster) {
	ctx := ctxFor(t)
	hubCl, err := client.New(hub.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	if err := hubCl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: memberaccess.DefaultNamespace}}); err != nil {
		t.Fatal(err)
	}
	jo := memberaccess.JoinOptions{
		Name: "member-a", Labels: map[string]string{"region": "eu"},
		Member: member.Config, Hub: hub.Config,
		Grant: memberaccess.GrantOptions{ServiceAccount: "joined", ClusterRoleName: "replicafed-member-joined"},
	}
	if _, err := memberaccess.Join(ctx, jo); err != nil {
		t.Fatalf("join: %v", err)
	}
	sec := &corev1.Secret{}
	if err := hubCl.Get(ctx, client.ObjectKey{Namespace: memberaccess.DefaultNamespace, Name: "member-a"}, sec); err != nil {
		t.Fatalf("hub Secret after join: %v", err)
	}
	if sec.Labels["sigs.k8s.io/multicluster-runtime-kubeconfig"] != "true" || sec.Labels["region"] != "eu" {
		t.Fatalf("hub Secret labels %v", sec.Labels)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatalf("hub Secret kubeconfig: %v", err)
	}
	if cfg.Host != member.Config.Host || len(cfg.CAData) == 0 || cfg.BearerToken == "" || cfg.ExecProvider != nil {
		t.Fatalf("hub Secret kubeconfig: host %q, CA %d bytes, token set %v, exec %v", cfg.Host, len(cfg.CAData), cfg.BearerToken != "", cfg.ExecProvider)
	}
	cs := kubernetes.NewForConfigOrDie(cfg)
	if _, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the registered kubeconfig cannot list member pods: %v", err)
	}

	// Joining again refreshes labels and token.
	jo.Labels = map[string]string{"region": "us"}
	if _, err := memberaccess.Join(ctx, jo); err != nil {
		t.Fatalf("second join: %v", err)
	}
	if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil || sec.Labels["region"] != "us" {
		t.Fatalf("relabelled Secret: %v %v", err, sec.Labels)
	}

	// A FederatedReplicaSet placing replicas in member-a blocks unjoin.
	frs := testworkload.FRS("default", "web", 2)
	if err := hubCl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	frs.Status.Clusters = []v1alpha1.ClusterStatus{{Name: "member-a", Target: 2, Replicas: 2, Health: v1alpha1.ClusterHealthy}}
	if err := hubCl.Status().Update(ctx, frs); err != nil {
		t.Fatal(err)
	}
	uo := memberaccess.UnjoinOptions{Name: "member-a", Member: member.Config, Hub: hub.Config, Grant: jo.Grant}
	err = memberaccess.Unjoin(ctx, uo)
	var inUse *memberaccess.InUseError
	if !errors.As(err, &inUse) || len(inUse.Users) != 1 || inUse.Users[0] != "default/web" {
		t.Fatalf("unjoin while in use: got %v, want InUseError naming default/web", err)
	}
	if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), sec); err != nil {
		t.Fatalf("a refused unjoin removed the hub Secret: %v", err)
	}
	uo.Force = true
	if err := memberaccess.Unjoin(ctx, uo); err != nil {
		t.Fatalf("forced unjoin: %v", err)
	}
	if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), sec); !apierrors.IsNotFound(err) {
		t.Fatalf("hub Secret after unjoin: %v", err)
	}
	adminCS := kubernetes.NewForConfigOrDie(member.Config)
	if _, err := adminCS.CoreV1().ServiceAccounts(memberaccess.DefaultNamespace).Get(ctx, "joined", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member ServiceAccount after unjoin: %v", err)
	}
	if _, err := adminCS.RbacV1().ClusterRoleBindings().Get(ctx, "replicafed-member-joined", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("member ClusterRoleBinding after unjoin: %v", err)
	}
	eventually(t, "registered token refused after unjoin", func(ctx context.Context) (bool, string) {
		_, err := cs.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		return apierrors.IsUnauthorized(err), fmt.Sprintf("%v", err)
	})
}
