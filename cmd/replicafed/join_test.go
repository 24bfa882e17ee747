package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/testcluster"
	"github.com/replicafed/replicafed/internal/testworkload"
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
