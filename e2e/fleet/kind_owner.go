package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
)

// A test process that dies before its cleanup (a CI job's hard stop, a
// killed `go test`) leaves its kind clusters behind, and Docker starts them
// again with the daemon: several idle control planes then load the next run
// so much that kubeadm gives up on its own clusters. So every ephemeral
// cluster has an owner lock, an flock(2) held by the process that created
// it for as long as it lives, and the first kind cluster a process starts
// first deletes the ephemeral clusters whose lock nobody holds.

// ephemeralName matches the names KindProvider gives clusters it deletes
// itself (rf-<spec name>-<6 hex>); kept clusters (rf-<name>) and the demo's
// (rf-demo-<name>) never match.
var ephemeralName = regexp.MustCompile(`^rf-.+-[0-9a-f]{6}$`)

// ownerDir holds one lock file per ephemeral cluster.
func ownerDir() string { return filepath.Join(os.TempDir(), "replicafed-kind-owners") }

// ownerLock is a held owner lock; release drops it and its file.
type ownerLock struct{ f *os.File }

// lockOwner takes the owner lock of cluster name, without waiting. held is
// false when another live process holds it.
func lockOwner(name string) (l *ownerLock, held bool, err error) {
	if err := os.MkdirAll(ownerDir(), 0o755); err != nil {
		return nil, false, fmt.Errorf("creating the kind owner lock directory: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(ownerDir(), name+".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, false, fmt.Errorf("opening the owner lock of kind cluster %s: %w", name, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if err == syscall.EWOULDBLOCK {
			return nil, true, nil
		}
		return nil, false, fmt.Errorf("locking the owner lock of kind cluster %s: %w", name, err)
	}
	return &ownerLock{f: f}, false, nil
}

// release removes the lock file and drops the lock.
func (l *ownerLock) release() {
	if l == nil {
		return
	}
	_ = os.Remove(l.f.Name())
	_ = l.f.Close()
}

var reapOnce sync.Once

// reapOrphans deletes, once per process, every ephemeral kind cluster whose
// owner is gone, and returns their names.
func (k kindTools) reapOrphans(ctx context.Context) (reaped []string, err error) {
	reapOnce.Do(func() {
		var out []byte
		if out, err = k.kind(ctx, "get", "clusters"); err != nil {
			err = fmt.Errorf("kind get clusters: %w\n%s", err, out)
			return
		}
		for _, name := range strings.Fields(string(out)) {
			if !ephemeralName.MatchString(name) {
				continue
			}
			l, held, lerr := lockOwner(name)
			if lerr != nil || held {
				continue
			}
			if dout, derr := k.kind(ctx, "delete", "cluster", "--name", name); derr != nil {
				err = fmt.Errorf("deleting orphaned kind cluster %s: %w\n%s", name, derr, dout)
			} else {
				reaped = append(reaped, name)
			}
			l.release()
		}
	})
	return reaped, err
}
