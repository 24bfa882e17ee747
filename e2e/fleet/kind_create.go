package fleet

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"time"
)

// createAttempts is how many times `kind create cluster` runs before the
// cluster counts as failed. The second attempt is for the machine, not the
// product: kubeadm on a loaded 2-core host sometimes gives up on its own
// control plane. Every failed attempt is logged with its gist and the
// nodes' kubelet and container state, so a repeat is seen and can be fixed.
const createAttempts = 2

// create runs `kind create cluster` for c under its owner lock, keeping the
// nodes of a failed attempt long enough to read their state.
func (p KindProvider) create(ctx context.Context, c *KindCluster, config string) error {
	k := c.tools
	lock, held, err := lockOwner(c.kind)
	if err != nil {
		return err
	}
	if held {
		return fmt.Errorf("kind cluster %s: another process owns that name", c.kind)
	}
	c.owner = lock
	if reaped, err := k.reapOrphans(ctx); err != nil {
		p.logf("kind: deleting orphaned clusters: %v", err)
	} else if len(reaped) > 0 {
		p.logf("kind: deleted %d orphaned cluster(s) no live process owns: %s", len(reaped), strings.Join(reaped, ", "))
	}
	var failures []string
	for attempt := 1; attempt <= createAttempts; attempt++ {
		start := time.Now()
		out, err := k.kind(ctx, "create", "cluster", "--name", c.kind, "--image", k.image, "--config", config,
			"--kubeconfig", c.kubeconfig, "--wait", kindWait, "--retain")
		if err == nil {
			return nil
		}
		diag := k.nodeState(ctx, c.kind)
		_, _ = k.kind(context.Background(), "delete", "cluster", "--name", c.kind)
		// The gist last: a CI excerpt shows a log's tail.
		gist := fmt.Sprintf("attempt %d after %s: %v\nthe nodes:\n%swhat kind said:\n%s", attempt, time.Since(start).Round(time.Second), err, diag, failureGist(string(out)))
		failures = append(failures, gist)
		if ctx.Err() != nil || attempt == createAttempts {
			break
		}
		p.logf("kind create cluster %s failed, trying once more; %s", c.kind, gist)
	}
	return fmt.Errorf("kind create cluster %s failed %d time(s):\n%s", c.kind, len(failures), strings.Join(failures, "\n"))
}

// logf logs through the provider's Log, if any.
func (p KindProvider) logf(format string, args ...any) {
	if p.Log != nil {
		p.Log(format, args...)
	}
}

// gistMarkers pick, from kind's output (which embeds kubeadm's --v=6 log and
// stack trace), the lines that say what failed.
var gistMarkers = []string{
	"ERROR:", "error execution phase", "[ERROR", "timed out", "deadline exceeded",
	"connection refused", "unhealthy", "failed", "couldn't", "✗",
}

// maxGistLines bounds the gist, so a CI excerpt of the test log's tail
// still shows it whole.
const maxGistLines = 12

// failureGist is the lines of kind's output that say what failed: kind's
// ERROR line cut before the embedded command output, and kubeadm's error
// lines, each at most 300 bytes.
func failureGist(out string) string {
	var gist []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if i := strings.Index(l, "Command Output:"); i >= 0 {
			l = strings.TrimSpace(l[:i])
		}
		if l == "" || seen[l] || !hasMarker(l) {
			continue
		}
		seen[l] = true
		if len(l) > 300 {
			l = l[:300] + "…"
		}
		gist = append(gist, "  "+l)
	}
	if len(gist) > maxGistLines {
		gist = append(gist[:maxGistLines/2], append([]string{"  …"}, gist[len(gist)-maxGistLines/2:]...)...)
	}
	if len(gist) == 0 {
		return "  (no error line in kind's output)"
	}
	return strings.Join(gist, "\n")
}

func hasMarker(l string) bool {
	for _, m := range gistMarkers {
		if strings.Contains(l, m) {
			return true
		}
	}
	return false
}

// nodeState is each retained node's kubelet journal tail and containers:
// why kubeadm's control plane did not come up.
func (k kindTools) nodeState(ctx context.Context, cluster string) string {
	// Its own minute even when the create's context ran out: a timeout is
	// the failure whose node state is most wanted.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	out, err := k.kind(ctx, "get", "nodes", "--name", cluster)
	if err != nil {
		return fmt.Sprintf("  (no node state: kind get nodes: %v)", err)
	}
	var b strings.Builder
	for _, node := range strings.Fields(string(out)) {
		for _, cmd := range [][]string{
			{"crictl", "ps", "-a"},
			{"journalctl", "-u", "kubelet", "--no-pager", "-n", "8", "-o", "cat"},
		} {
			res, _ := exec.CommandContext(ctx, "docker", append([]string{"exec", node}, cmd...)...).CombinedOutput()
			fmt.Fprintf(&b, "  %s$ %s\n%s", node, strings.Join(cmd, " "), indentLines(string(res), "    "))
		}
	}
	return b.String()
}

func indentLines(s, prefix string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return ""
	}
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) + "\n"
}
