package testcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// process is one control-plane binary started by a cluster. Its output goes
// to <dir>/<name>.log, which tests print on failure.
type process struct {
	name    string
	path    string
	args    []string
	logPath string
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

func (p *process) start() error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening log for %s: %w", p.name, err)
	}
	cmd := exec.Command(p.path, p.args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	// A process group of its own lets stop() reach any children, and keeps a
	// Ctrl-C aimed at the test from racing our own shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	p.cmd = cmd
	p.done = make(chan struct{})
	go func() {
		p.err = cmd.Wait()
		_ = logf.Close()
		close(p.done)
	}()
	return nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	if p.done == nil {
		return true, nil
	}
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// stop sends SIGTERM, waits up to grace, then kills the process group.
func (p *process) stop(grace time.Duration) {
	if p.cmd == nil || p.done == nil {
		return
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// tail returns the last n bytes of the process log.
func (p *process) tail(n int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer func() { _ = f.Close() }()
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(buf, off)
	return string(buf)
}

// FreePort asks the kernel for a free loopback port. Another process could
// take it before it is bound; callers retry the whole start on a bind failure.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitFor polls check until it succeeds, the process dies or ctx ends.
func waitFor(ctx context.Context, p *process, what string, check func(context.Context) error) error {
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p != nil {
			if dead, err := p.exited(); dead {
				return fmt.Errorf("%s exited while waiting for %s (%v); log tail:\n%s", p.name, what, err, p.tail(4000))
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := ""
			if p != nil {
				msg = "; log tail:\n" + p.tail(4000)
			}
			return fmt.Errorf("waiting for %s: %w (last error: %v)%s", what, ctx.Err(), last, msg)
		case <-tick.C:
		}
	}
}

func writeFile(dir, name string, data []byte) (string, error) {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", p, err)
	}
	return p, nil
}

var errStopped = errors.New("cluster stopped")
