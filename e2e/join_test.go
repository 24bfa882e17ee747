package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/federation/memberaccess"
	"github.com/replicafed/replicafed/internal/test/testcluster"
)

// joinedMember is the member TestJoinUnjoin starts and joins.
const joinedMember = "member-d"

// TestJoinUnjoin joins a fourth member to the shared fleet with the real
// `replicafed join` binary, places replicas on it through a clusterSelector
// on the labels join wrote, reads `kubectl get memberclusters` and `kubectl
// get frs -o wide` through the real kubectl, moves the replicas by
// relabelling the members' registration Secrets (no restart), and unjoins
// it: refused while it runs replicas, accepted once they moved away and,
// after a second join, with --force; each unjoin removes the hub Secret, the
// MemberCluster and the member's ServiceAccount, ClusterRole and binding.
func TestJoinUnjoin(t *testing.T) {
	f := getFleet(t)
	e := newEnvIn(t, "e2e-join", false)
	ctx := context.Background()

	start := time.Now()
	sctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	member, memberClient, err := f.StartMember(sctx, joinedMember)
	cancel()
	if err != nil {
		t.Fatalf("starting %s: %v", joinedMember, err)
	}
	t.Cleanup(member.Stop)
	logf(t, "started unregistered member %s in %s", joinedMember, time.Since(start).Round(time.Millisecond))
	e.addMember(joinedMember, memberClient)

	joinArgs := []string{"join", joinedMember, "--member-kubeconfig", member.Kubeconfig(), "--hub-kubeconfig", f.Hub.Kubeconfig()}
	unjoinArgs := []string{"unjoin", joinedMember, "--member-kubeconfig", member.Kubeconfig(), "--hub-kubeconfig", f.Hub.Kubeconfig()}

	// Join with labels, as an operator would.
	out := e.replicafedOK(append(joinArgs, "--labels", "tier=edge,region=south")...)
	if !strings.Contains(out, "member "+joinedMember+" joined: Secret "+fleet.Namespace+"/"+joinedMember+" in the hub") {
		t.Errorf("join printed %q", out)
	}
	e.checkRegistered(member, map[string]string{"tier": "edge", "region": "south"})

	// The only member labelled tier=edge gets every replica; its namespace
	// exists only in the hub, so the joined role must be enough to create it.
	const name = "edge"
	e.create(frsSpec{name: name, replicas: 4, placement: v1alpha1.Placement{
		ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}},
	}})
	e.waitSplit(name, split{joinedMember: 4})
	logf(t, "figure: member joined to 4 replicas Ready on it in %s", time.Since(start).Round(time.Millisecond))

	e.checkMemberClustersTable(member)
	e.checkFRSTable(name, map[string]string{
		"NAME": name, "DESIRED": "4", "CURRENT": "4", "READY": "4", "CLUSTERS": "1",
		// unschedulableReplicas is omitted when 0, so the cell is empty.
		"SPREAD": joinedMember + "=4", "AVAILABLE": "4", "UNSCHEDULABLE": "",
	})
	lctx, lcancel := context.WithTimeout(ctx, time.Minute)
	found, err := f.SecretsInLogs(lctx)
	lcancel()
	if err != nil || len(found) > 0 {
		t.Errorf("replica logs with the joined member's Secret in place: findings %v, error %v", found, err)
	}

	// Unjoin refuses while the member runs replicas, and changes nothing.
	code, stdout, stderr := e.replicafed(unjoinArgs...)
	logf(t, "unjoin while in use: exit %d\n$ replicafed unjoin %s\n%s%s", code, joinedMember, stdout, stderr)
	if code == 0 || !strings.Contains(stderr, "member "+joinedMember+" still has replicas of 1 FederatedReplicaSet(s): "+e.ns+"/"+name) ||
		!strings.Contains(stderr, "--force") {
		t.Fatalf("unjoin while in use: exit %d, stdout %q, stderr %q; want a refusal naming %s/%s", code, stdout, stderr, e.ns, name)
	}
	e.checkRegistered(member, map[string]string{"tier": "edge", "region": "south"})

	// Relabelling the registration Secrets moves the replicas: member-c
	// joins the selector, member-d leaves it. Nothing restarts.
	e.kubectlOK("label", "secret", "-n", fleet.Namespace, memberC, "tier=edge")
	t.Cleanup(func() {
		e.dumpIfFailed()
		e.relabel(memberC, "tier", "")
		e.waitMemberLabels("tier", map[string]string{memberC: ""})
	})
	e.kubectlOK("label", "secret", "-n", fleet.Namespace, joinedMember, "tier=retired", "--overwrite")
	relabelled := time.Now()
	e.waitSplit(name, split{memberC: 4})
	logf(t, "figure: relabelling moved 4 replicas from %s to %s in %s", joinedMember, memberC, time.Since(relabelled).Round(time.Millisecond))

	// Scaled away: unjoin succeeds and removes both sides.
	out = e.replicafedOK(unjoinArgs...)
	if !strings.Contains(out, "member "+joinedMember+" unjoined") {
		t.Errorf("unjoin printed %q", out)
	}
	e.checkUnjoined(member)

	// Join again; growth goes to the member furthest below its share.
	e.replicafedOK(append(joinArgs, "--labels", "tier=edge")...)
	e.checkRegistered(member, map[string]string{"tier": "edge"})
	e.scale(name, 6)
	e.waitSplit(name, split{memberC: 4, joinedMember: 2})

	// In use again: refused, then forced.
	if code, stdout, stderr := e.replicafed(unjoinArgs...); code == 0 || !strings.Contains(stderr, "still has replicas") {
		t.Fatalf("second unjoin while in use: exit %d, stdout %q, stderr %q; want a refusal", code, stdout, stderr)
	}
	out = e.replicafedOK(append(unjoinArgs, "--force")...)
	if !strings.Contains(out, "member "+joinedMember+" unjoined") {
		t.Errorf("unjoin --force printed %q", out)
	}
	e.checkUnjoined(member)
	// Its replicas are planned on the remaining selected member; the pods
	// left in the unjoined member are no longer replicafed's to touch.
	delete(e.extra, joinedMember)
	e.waitSplit(name, split{memberC: 6})
	left, err := e.countIn(ctx, memberClient, name)
	if err != nil {
		t.Fatal(err)
	}
	logf(t, "after unjoin --force, %s still runs %d pods of %s (active %d); replicafed no longer manages them", joinedMember, left.active+left.terminating, name, left.active)
	if left.active != 2 {
		t.Errorf("%s runs %d active pods of %s after unjoin --force, want the 2 it had (nothing is deleted in a member replicafed cannot see)", joinedMember, left.active, name)
	}
}

// replicafed runs the replicafed binary the fleet's replicas run.
func (e *env) replicafed(args ...string) (code int, stdout, stderr string) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, e.f.Binary(), args...)
	var o, s bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &s
	err := cmd.Run()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), o.String(), s.String()
		}
		e.t.Fatalf("running replicafed %v: %v", args, err)
	}
	return 0, o.String(), s.String()
}

// replicafedOK runs replicafed, fails the test unless it succeeds, and
// returns its standard output.
func (e *env) replicafedOK(args ...string) string {
	e.t.Helper()
	code, stdout, stderr := e.replicafed(args...)
	logf(e.t, "$ replicafed %s %s\n%s", args[0], args[1], stdout)
	if code != 0 {
		e.t.Fatalf("replicafed %v: exit %d\nstdout: %s\nstderr: %s", args, code, stdout, stderr)
	}
	return stdout
}

// kubectl runs the real kubectl against the hub.
func (e *env) kubectl(args ...string) (string, error) {
	e.t.Helper()
	bin, err := testcluster.FindBinDir()
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kubectl"), append([]string{"--kubeconfig", e.f.Hub.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return string(out), nil
}

func (e *env) kubectlOK(args ...string) string {
	e.t.Helper()
	out, err := e.kubectl(args...)
	if err != nil {
		e.t.Fatal(err)
	}
	return out
}

// table parses kubectl's column output into one map per row, keyed by
// header. Values are cut at the headers' offsets, so empty cells read as "".
func table(out string) []map[string]string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) == 0 {
		return nil
	}
	head := lines[0]
	var starts []int
	var names []string
	for i := 0; i < len(head); {
		if head[i] == ' ' {
			i++
			continue
		}
		j := i
		for j < len(head) && head[j] != ' ' {
			j++
		}
		starts, names = append(starts, i), append(names, head[i:j])
		i = j
	}
	var rows []map[string]string
	for _, l := range lines[1:] {
		row := map[string]string{}
		for k, s := range starts {
			end := len(l)
			if k+1 < len(starts) && starts[k+1] < end {
				end = starts[k+1]
			}
			if s < end {
				row[names[k]] = strings.TrimSpace(l[s:end])
			} else {
				row[names[k]] = ""
			}
		}
		rows = append(rows, row)
	}
	return rows
}

// checkMemberClustersTable waits until `kubectl get memberclusters` lists the
// three shared members Healthy and the joined one with its version, nodes,
// one FederatedReplicaSet and 4 pods.
func (e *env) checkMemberClustersTable(member fleet.Cluster) {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(member.Config())
	if err != nil {
		e.t.Fatal(err)
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		e.t.Fatal(err)
	}
	want := map[string]string{"NAME": joinedMember, "HEALTH": "Healthy", "VERSION": v.GitVersion, "NODES": "2", "FRS": "1", "PODS": "4"}
	var last string
	ok := tryPoll(waitTimeout, func(context.Context) (bool, error) {
		out, err := e.kubectl("get", "memberclusters")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = out
		byName := map[string]map[string]string{}
		for _, r := range table(out) {
			byName[r["NAME"]] = r
		}
		got := byName[joinedMember]
		if got == nil || len(byName) != 4 {
			return false, nil
		}
		for k, w := range want {
			if got[k] != w {
				return false, nil
			}
		}
		if got["AGE"] == "" {
			return false, nil
		}
		for _, m := range allMembers {
			r := byName[m]
			if r == nil || r["HEALTH"] != "Healthy" || r["NODES"] != "2" || r["VERSION"] != v.GitVersion {
				return false, nil
			}
		}
		return true, nil
	})
	if !ok {
		e.t.Fatalf("kubectl get memberclusters did not show %v for %s and the shared members Healthy within %s; last:\n%s", want, joinedMember, waitTimeout, last)
	}
	logf(e.t, "$ kubectl get memberclusters\n%s", last)
}

// checkFRSTable waits until `kubectl get frs NAME -o wide` shows want.
func (e *env) checkFRSTable(name string, want map[string]string) {
	e.t.Helper()
	var last string
	ok := tryPoll(waitTimeout, func(context.Context) (bool, error) {
		out, err := e.kubectl("get", "frs", "-n", e.ns, "-o", "wide")
		if err != nil {
			last = err.Error()
			return false, nil
		}
		last = out
		rows := table(out)
		if len(rows) != 1 {
			return false, nil
		}
		for k, w := range want {
			if rows[0][k] != w {
				return false, nil
			}
		}
		return rows[0]["AGE"] != "", nil
	})
	if !ok {
		e.t.Fatalf("kubectl get frs -o wide did not show %v within %s; last:\n%s", want, waitTimeout, last)
	}
	logf(e.t, "$ kubectl get frs -n %s -o wide\n%s", e.ns, last)
}

// checkRegistered checks what join wrote: the labelled kubeconfig Secret in
// the hub and replicafed's ServiceAccount, ClusterRole and binding in the
// member.
func (e *env) checkRegistered(member fleet.Cluster, labels map[string]string) {
	e.t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{}
	if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: member.Name()}, sec); err != nil {
		e.t.Fatalf("registration Secret of %s: %v", member.Name(), err)
	}
	if sec.Labels["sigs.k8s.io/multicluster-runtime-kubeconfig"] != "true" || len(sec.Data["kubeconfig"]) == 0 {
		e.t.Errorf("registration Secret of %s: labels %v, %d bytes of kubeconfig", member.Name(), sec.Labels, len(sec.Data["kubeconfig"]))
	}
	for k, v := range labels {
		if sec.Labels[k] != v {
			e.t.Errorf("registration Secret of %s: label %s=%q, want %q", member.Name(), k, sec.Labels[k], v)
		}
	}
	for _, obj := range e.memberAccessObjects() {
		if err := e.extra[member.Name()].Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			e.t.Errorf("%s: %T %s after join: %v", member.Name(), obj, obj.GetName(), err)
		}
	}
}

// checkUnjoined waits until both sides of the registration are gone: the
// hub Secret and MemberCluster, the member's ServiceAccount, ClusterRole and
// binding.
func (e *env) checkUnjoined(member fleet.Cluster) {
	e.t.Helper()
	cl := e.memberClient(member.Name())
	if cl == nil {
		e.t.Fatalf("no client for %s", member.Name())
	}
	gone := func(ctx context.Context, c client.Client, obj client.Object) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj)
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		return apierrors.IsNotFound(err), nil
	}
	e.poll(member.Name()+" to be unjoined on both sides", func(ctx context.Context) (bool, error) {
		hub := []client.Object{
			&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.Namespace, Name: member.Name()}},
			&v1alpha1.MemberCluster{ObjectMeta: metav1.ObjectMeta{Name: member.Name()}},
		}
		for _, obj := range hub {
			if ok, err := gone(ctx, e.f.HubClient, obj); !ok || err != nil {
				return false, err
			}
		}
		for _, obj := range e.memberAccessObjects() {
			if ok, err := gone(ctx, cl, obj); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// memberAccessObjects are the objects join creates in a member.
func (e *env) memberAccessObjects() []client.Object {
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: memberaccess.DefaultNamespace, Name: memberaccess.DefaultServiceAccount}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: memberaccess.ClusterRoleName}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: memberaccess.ClusterRoleName}},
	}
}

// patchRegistration applies change to a member's registration Secret in
// the hub as a merge patch; what names the change in a failure.
func (e *env) patchRegistration(member, what string, change func(sec *corev1.Secret)) {
	e.t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{}
	if err := e.f.HubClient.Get(ctx, client.ObjectKey{Namespace: fleet.Namespace, Name: member}, sec); err != nil {
		e.t.Fatalf("reading registration Secret of %s: %v", member, err)
	}
	patch := client.MergeFrom(sec.DeepCopy())
	change(sec)
	if err := e.f.HubClient.Patch(ctx, sec, patch); err != nil {
		e.t.Fatalf("%s registration Secret of %s: %v", what, member, err)
	}
}

// relabel sets (or, with an empty value, removes) a label on a member's
// registration Secret in the hub.
func (e *env) relabel(member, key, value string) {
	e.t.Helper()
	e.patchRegistration(member, "labelling", func(sec *corev1.Secret) { sec.Labels = withKey(sec.Labels, key, value) })
}

// withKey returns m with key set to value, or without key when value is
// empty.
func withKey(m map[string]string, key, value string) map[string]string {
	if value == "" {
		delete(m, key)
		return m
	}
	if m == nil {
		m = map[string]string{}
	}
	m[key] = value
	return m
}

// scale sets spec.replicas of a FederatedReplicaSet.
func (e *env) scale(name string, replicas int32) {
	e.t.Helper()
	frs := e.getFRS(name)
	patch := client.MergeFrom(frs.DeepCopy())
	frs.Spec.Replicas = ptr.To(replicas)
	if err := e.f.HubClient.Patch(context.Background(), frs, patch); err != nil {
		e.t.Fatalf("scaling %s to %d: %v", name, replicas, err)
	}
}
