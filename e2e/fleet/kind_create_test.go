package fleet

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFailureGist(t *testing.T) {
	stack := strings.Repeat("\tk8s.io/kubernetes/cmd/kubeadm/app/cmd/phases/workflow.(*Runner).Run\n", 40)
	long := "error execution phase wait-control-plane: " + strings.Repeat("x", 400)
	tests := []struct {
		name, out string
		want      []string
	}{{
		name: "kubeadm init gave up",
		out: "Creating cluster \"rf-hub-0a1b2c\" ...\n ✓ Ensuring node image\n ✗ Starting control-plane 🕹️\n" +
			"ERROR: failed to create cluster: failed to init node with kubeadm: command \"docker exec rf-hub-0a1b2c-control-plane kubeadm init\" failed with error: exit status 1 Command Output: I1126 10:00:00 init.go:1] [init] Using Kubernetes version\n" +
			"[wait-control-plane] Waiting for the kubelet to boot up the control plane\n" +
			"[control-plane-check] kube-apiserver is not healthy after 4m0s\n" +
			"context deadline exceeded\n" +
			"error execution phase wait-control-plane: could not initialize a Kubernetes cluster\n" + stack,
		want: []string{
			"✗ Starting control-plane 🕹️",
			"ERROR: failed to create cluster: failed to init node with kubeadm: command \"docker exec rf-hub-0a1b2c-control-plane kubeadm init\" failed with error: exit status 1",
			"context deadline exceeded",
			"error execution phase wait-control-plane: could not initialize a Kubernetes cluster",
		},
	}, {
		name: "a repeated line once, a long line cut",
		out:  "timed out waiting\ntimed out waiting\n" + long + "\n",
		want: []string{"timed out waiting", long[:300] + "…"},
	}, {
		name: "nothing that says error",
		out:  "Creating cluster\n ✓ Ensuring node image\n",
		want: []string{"(no error line in kind's output)"},
	}, {
		name: "many error lines keep the first and the last",
		out:  "failed 1\nfailed 2\nfailed 3\nfailed 4\nfailed 5\nfailed 6\nfailed 7\nfailed 8\nfailed 9\nfailed 10\nfailed 11\nfailed 12\nfailed 13\nfailed 14\n",
		want: []string{"failed 1", "failed 2", "failed 3", "failed 4", "failed 5", "failed 6", "…",
			"failed 9", "failed 10", "failed 11", "failed 12", "failed 13", "failed 14"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, l := range strings.Split(failureGist(tc.out), "\n") {
				got = append(got, strings.TrimSpace(l))
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("failureGist (-want +got):\n%s", d)
			}
		})
	}
}

func TestEphemeralName(t *testing.T) {
	for name, want := range map[string]bool{
		"rf-hub-0a1b2c":      true,
		"rf-member-a-9f8e7d": true,
		"rf-hub":             false, // kept (REPLICAFED_KIND_KEEP)
		"rf-demo-member-a":   false, // make demo-kind's
		"rf-hub-0A1B2C":      false,
		"kind":               false,
	} {
		if got := ephemeralName.MatchString(name); got != want {
			t.Errorf("ephemeralName(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestOwnerLock: a cluster's owner lock is exclusive while held (flock
// conflicts between open files even in one process) and free again once
// released, which is what tells the reaper an owner has died.
func TestOwnerLock(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	first, held, err := lockOwner("rf-hub-0a1b2c")
	if err != nil || held || first == nil {
		t.Fatalf("first lock: lock %v, held %v, err %v; want the lock", first, held, err)
	}
	second, held, err := lockOwner("rf-hub-0a1b2c")
	if err != nil || !held || second != nil {
		t.Fatalf("second lock while the first is held: lock %v, held %v, err %v; want held by another", second, held, err)
	}
	other, held, err := lockOwner("rf-member-a-9f8e7d")
	if err != nil || held {
		t.Fatalf("another cluster's lock: held %v, err %v", held, err)
	}
	other.release()
	first.release()
	again, held, err := lockOwner("rf-hub-0a1b2c")
	if err != nil || held {
		t.Fatalf("lock after release: held %v, err %v; want it free", held, err)
	}
	again.release()
}

// TestDockerShim runs hack/kind/bin/docker against a stand-in docker that
// prints its arguments: --privileged becomes the node flags on run and is
// dropped on exec; kind's restart policy is replaced only for ephemeral
// clusters; other commands pass through untouched.
func TestDockerShim(t *testing.T) {
	dir := t.TempDir()
	echo := filepath.Join(dir, "docker")
	if err := os.WriteFile(echo, []byte("#!/bin/sh\necho \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	shim, err := filepath.Abs("../../hack/kind/bin/docker")
	if err != nil {
		t.Fatal(err)
	}
	run := func(ephemeral string, args ...string) string {
		t.Helper()
		cmd := exec.Command(shim, args...)
		cmd.Env = append(os.Environ(), "REPLICAFED_REAL_DOCKER="+echo, "REPLICAFED_KIND_EPHEMERAL="+ephemeral)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("shim %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	tests := []struct {
		name, ephemeral string
		args            []string
		want            string
	}{
		{"run, kept cluster", "", []string{"run", "--privileged", "--restart=on-failure:1", "img"},
			"run --cgroupns=private --cap-add=ALL --cap-drop=SYS_RESOURCE --security-opt=seccomp=unconfined --security-opt=apparmor=unconfined --security-opt=systempaths=unconfined --device=/dev/kmsg --device-cgroup-rule=a *:* rwm --restart=on-failure:1 img"},
		{"run, ephemeral cluster", "1", []string{"run", "--restart=on-failure:1", "img"}, "run --restart=no img"},
		{"exec drops --privileged", "1", []string{"exec", "--privileged", "node", "kubeadm"}, "exec node kubeadm"},
		{"other commands pass through", "1", []string{"ps", "--restart=x", "--privileged"}, "ps --restart=x --privileged"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := run(tc.ephemeral, tc.args...); got != tc.want {
				t.Errorf("shim %v:\n got %s\nwant %s", tc.args, got, tc.want)
			}
		})
	}
}

// TestDockerShimSkipsOtherCopies: with two checkouts' hack/kind/bin on PATH
// (each shim sees the other as "another docker"), a call still reaches the
// real docker further down PATH instead of bouncing between the shims.
func TestDockerShimSkipsOtherCopies(t *testing.T) {
	src, err := filepath.Abs("../../hack/kind")
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var path []string
	for _, checkout := range []string{"a", "b"} {
		bin := filepath.Join(root, checkout, "bin")
		if err := os.MkdirAll(bin, 0o755); err != nil {
			t.Fatal(err)
		}
		for from, to := range map[string]string{"bin/docker": "bin/docker", "nodeflags.sh": "nodeflags.sh"} {
			b, err := os.ReadFile(filepath.Join(src, from))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, checkout, to), b, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		path = append(path, bin)
	}
	realDir := filepath.Join(root, "real")
	if err := os.MkdirAll(realDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(realDir, "docker"), []byte("#!/bin/sh\necho real \"$@\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	path = append(path, realDir, "/usr/bin", "/bin")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(path[0], "docker"), "-v")
	cmd.Env = []string{"PATH=" + strings.Join(path, ":")}
	out, err := cmd.CombinedOutput()
	if got := strings.TrimSpace(string(out)); err != nil || got != "real -v" {
		t.Fatalf("shim with another copy on PATH: %q, %v; want the real docker's \"real -v\"", got, err)
	}
}
