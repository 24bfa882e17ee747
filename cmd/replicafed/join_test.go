package main

import (
	"bytes"
	"context"
	"io"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/registry/credentials"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testworkload"
)

func TestMemberCommandUsage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"join"}, "exactly one member NAME expected"},
		{[]string{"join", "a", "b", "--member-kubeconfig", "x"}, "exactly one member NAME expected"},
		{[]string{"join", "a", "--hub-kubeconfig", "/dev/null"}, "--member-kubeconfig is required"},
		{[]string{"unjoin", "a", "--labels", "x=y"}, "unknown flag: --labels"},
		{[]string{"unjoin", "a", "--rotate"}, "unknown flag: --rotate"},
		{[]string{"join", "a", "--rotate", "--member-kubeconfig", "x", "--hub-kubeconfig", "/dev/null", "--labels", "x=y"}, "--rotate changes only the token; drop --labels"},
	} {
		var stderr bytes.Buffer
		code := execute(context.Background(), tc.args, env(nil), io.Discard, &stderr)
		if code != exitConfig || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitConfig, tc.want)
		}
	}
}

func TestJoinUnjoinCommands(t *testing.T) {
	hubCRDs, err := crds.Hub()
	if err != nil {
		t.Fatal(err)
	}
	hub := testcluster.Start(t, testcluster.Options{Name: "hub", CRDs: hubCRDs})
	member := testcluster.Start(t, testcluster.Options{Name: "member"})
	ctx := context.Background()
	hubCl, err := client.New(hub.Config, client.Options{Scheme: kubescheme.Must()})
	if err != nil {
		t.Fatal(err)
	}
	if err := hubCl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fleet"}}); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (int, string, string) {
		var stdout, stderr bytes.Buffer
		code := runMemberCommand(ctx, args[0], args[1:], &stdout, &stderr)
		return code, stdout.String(), stderr.String()
	}

	code, out, errOut := run("join", "edge-1", "--member-kubeconfig", member.Kubeconfig, "--hub-kubeconfig", hub.Kubeconfig,
		"-n", "fleet", "--labels", "region=eu,tier=edge")
	if code != exitOK || !strings.Contains(out, "member edge-1 joined: Secret fleet/edge-1") {
		t.Fatalf("join: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	sec := &corev1.Secret{}
	if err := hubCl.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "edge-1"}, sec); err != nil {
		t.Fatal(err)
	}
	if sec.Labels["region"] != "eu" || sec.Labels["tier"] != "edge" || sec.Labels["sigs.k8s.io/multicluster-runtime-kubeconfig"] != "true" || len(sec.Data["kubeconfig"]) == 0 {
		t.Fatalf("hub Secret labels %v, keys %d", sec.Labels, len(sec.Data))
	}
	// The token must not be printed or logged.
	if tok := tokenOf(t, sec.Data["kubeconfig"]); strings.Contains(out+errOut, tok) {
		t.Fatal("join printed the member token")
	}

	rotateCommand(t, ctx, hubCl, run, member.Kubeconfig, hub.Kubeconfig, sec)

	frs := testworkload.FRS("default", "web", 1)
	if err := hubCl.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	frs.Status.Clusters = []v1alpha1.ClusterStatus{{Name: "edge-1", Target: 1, Replicas: 1, Health: v1alpha1.ClusterHealthy}}
	if err := hubCl.Status().Update(ctx, frs); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = run("unjoin", "edge-1", "--member-kubeconfig", member.Kubeconfig, "--hub-kubeconfig", hub.Kubeconfig, "-n", "fleet")
	if code != exitFailed || !strings.Contains(errOut, "member edge-1 still has replicas of 1 FederatedReplicaSet(s): default/web") {
		t.Fatalf("unjoin while in use: exit %d, stderr %s", code, errOut)
	}
	code, out, errOut = run("unjoin", "edge-1", "--member-kubeconfig", member.Kubeconfig, "--hub-kubeconfig", hub.Kubeconfig, "-n", "fleet", "--force")
	if code != exitOK || !strings.Contains(out, "member edge-1 unjoined") {
		t.Fatalf("forced unjoin: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), sec); !apierrors.IsNotFound(err) {
		t.Fatalf("hub Secret after unjoin: %v", err)
	}
}

// rotateCommand renews edge-1's token with join --rotate and checks that only
// the token changed, that it works and expires when asked.
func rotateCommand(t *testing.T, ctx context.Context, hubCl client.Client, run func(...string) (int, string, string), memberKC, hubKC string, sec *corev1.Secret) {
	t.Helper()
	// An annotation set after the join (taints, say) must survive.
	sec.Annotations = map[string]string{"replicafed.io/taints": "[]"}
	if err := hubCl.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	oldToken := tokenOf(t, sec.Data["kubeconfig"])
	before := time.Now()
	code, out, errOut := run("join", "edge-1", "--rotate", "--member-kubeconfig", memberKC, "--hub-kubeconfig", hubKC, "-n", "fleet", "--token-expiration", "2h")
	if code != exitOK || !strings.Contains(out, "member edge-1: token rotated in Secret fleet/edge-1 in the hub, valid until ") {
		t.Fatalf("rotate: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	rotated := &corev1.Secret{}
	if err := hubCl.Get(ctx, client.ObjectKeyFromObject(sec), rotated); err != nil {
		t.Fatal(err)
	}
	newToken := tokenOf(t, rotated.Data["kubeconfig"])
	if newToken == oldToken || strings.Contains(out+errOut, newToken) {
		t.Fatal("rotate kept the old token, or printed the new one")
	}
	if !maps.Equal(rotated.Labels, sec.Labels) || rotated.Annotations["replicafed.io/taints"] != "[]" {
		t.Errorf("rotate changed labels %v -> %v or annotations %v", sec.Labels, rotated.Labels, rotated.Annotations)
	}
	oldCfg, err := clientcmd.Load(sec.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	newCfg, err := clientcmd.Load(rotated.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(oldCfg.Clusters, newCfg.Clusters); diff != "" {
		t.Errorf("rotate changed the clusters (-before +after):\n%s", diff)
	}
	if oldCfg.CurrentContext != newCfg.CurrentContext {
		t.Errorf("rotate changed the context: %q -> %q", oldCfg.CurrentContext, newCfg.CurrentContext)
	}
	exp, ok := credentials.TokenExpiry(newToken)
	if !ok || exp.Before(before.Add(time.Hour)) || exp.After(time.Now().Add(3*time.Hour)) {
		t.Errorf("new token expires at %v (%v), want about 2h from now", exp, ok)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(rotated.Data["kubeconfig"])
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err != nil {
		t.Errorf("the rotated token does not reach the member: %v", err)
	}

	code, _, errOut = run("join", "edge-2", "--rotate", "--member-kubeconfig", memberKC, "--hub-kubeconfig", hubKC, "-n", "fleet")
	if code != exitFailed || !strings.Contains(errOut, "member edge-2 is not joined") {
		t.Errorf("rotate of a member never joined: exit %d, stderr %s", code, errOut)
	}
	*sec = *rotated
}
