package v1alpha1_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// TestPrinterColumns reads `kubectl get frs` and `-o wide` through the real
// kubectl and API server: the SPREAD, REVISION and STAGE columns by default,
// AVAILABLE and UNSCHEDULABLE only in the wide output.
func TestPrinterColumns(t *testing.T) {
	hub, c, ctx := startHub(t, "columns-hub")
	bin, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}

	frs := validFRS("web")
	frs.Spec.Replicas = ptr.To[int32](8)
	if err := c.Create(ctx, frs); err != nil {
		t.Fatal(err)
	}
	frs.Status = v1alpha1.FederatedReplicaSetStatus{
		Replicas: 8, ReadyReplicas: 7, AvailableReplicas: 6, UnschedulableReplicas: 2, ClusterCount: 3,
		Spread:   "member-a=4,member-b=2,member-c=2",
		Revision: 3, Rollout: &v1alpha1.RolloutStatus{Phase: v1alpha1.PhaseBaking, StageName: "canary"},
	}
	if err := c.Status().Update(ctx, frs); err != nil {
		t.Fatal(err)
	}

	kubectl := func(args ...string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %v: %v\n%s", args, err, out)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 2 {
			t.Fatalf("kubectl %v: want a header and one row, got\n%s", args, out)
		}
		return lines
	}
	columns := func(lines []string) map[string]string {
		head, row := strings.Fields(lines[0]), strings.Fields(lines[1])
		if len(head) != len(row) {
			t.Fatalf("header %q and row %q differ in width", lines[0], lines[1])
		}
		out := map[string]string{}
		for i, h := range head {
			out[h] = row[i]
		}
		return out
	}

	plain := columns(kubectl("get", "-n", "default", "frs", "web"))
	for col, want := range map[string]string{
		"NAME": "web", "DESIRED": "8", "CURRENT": "8", "READY": "7", "CLUSTERS": "3",
		"SPREAD": "member-a=4,member-b=2,member-c=2", "REVISION": "3", "STAGE": "canary",
	} {
		if plain[col] != want {
			t.Errorf("kubectl get frs: %s = %q, want %q (row %v)", col, plain[col], want, plain)
		}
	}
	for _, col := range []string{"AVAILABLE", "UNSCHEDULABLE"} {
		if _, ok := plain[col]; ok {
			t.Errorf("kubectl get frs shows %s; it belongs to -o wide", col)
		}
	}
	wide := columns(kubectl("get", "-n", "default", "frs", "web", "-o", "wide"))
	for col, want := range map[string]string{"AVAILABLE": "6", "UNSCHEDULABLE": "2", "SPREAD": "member-a=4,member-b=2,member-c=2"} {
		if wide[col] != want {
			t.Errorf("kubectl get frs -o wide: %s = %q, want %q (row %v)", col, wide[col], want, wide)
		}
	}

	mc := &v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: "member-b"}}
	if err := c.Create(ctx, mc); err != nil {
		t.Fatal(err)
	}
	mc.Status = v1alpha1.MemberClusterStatus{Health: v1alpha1.ClusterUnreachable, KubernetesVersion: "v1.36.3", Nodes: 3,
		FederatedReplicaSets: 2, Pods: 5, Problem: "kubeconfig-broken"}
	if err := c.Status().Update(ctx, mc); err != nil {
		t.Fatal(err)
	}
	got := columns(kubectl("get", "memberclusters"))
	for col, want := range map[string]string{"NAME": "member-b", "HEALTH": "Unreachable", "VERSION": "v1.36.3", "NODES": "3", "FRS": "2", "PODS": "5"} {
		if got[col] != want {
			t.Errorf("kubectl get memberclusters: %s = %q, want %q (row %v)", col, got[col], want, got)
		}
	}
	if _, ok := got["AGE"]; !ok {
		t.Errorf("kubectl get memberclusters has no AGE column: %v", got)
	}
	if got := columns(kubectl("get", "mc", "-o", "wide")); got["PROBLEM"] != "kubeconfig-broken" {
		t.Errorf("kubectl get mc -o wide: PROBLEM = %q", got["PROBLEM"])
	}
}
