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
	"sync"
	"syscall"
	"time"

	"github.com/replicafed/replicafed/internal/test/testnet"
)

// Process is one child process (a control-plane binary here, a replicafed
// replica in the e2e harness) whose output goes to LogPath. It runs in a
// process group of its own, so stopping it reaches any children and a Ctrl-C
// aimed at the test does not race our own shutdown. Start may be called again
// after the process ended.
type Process struct {
	Name    string
	Path    string
	Args    []string
	LogPath string

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Start starts the process; it does nothing while the process runs.
func (p *Process) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return nil
		}
	}
	logf, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening log for %s: %w", p.Name, err)
	}
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.err = cmd, done, nil
	go func() {
		err := cmd.Wait()
		_ = logf.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

// Exited reports whether the process has ended (or never started), and how.
func (p *Process) Exited() (bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
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

// Stop sends SIGTERM to the process group, waits up to grace, then kills it.
func (p *Process) Stop(grace time.Duration) { p.signal(syscall.SIGTERM, grace) }

// Kill ends the process group with SIGKILL, like a crash, and waits for it.
func (p *Process) Kill() { p.signal(syscall.SIGKILL, 0) }

func (p *Process) signal(sig syscall.Signal, grace time.Duration) {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return
	}
	select {
	case <-done:
		return
	default:
	}
	_ = syscall.Kill(-cmd.Process.Pid, sig)
	if sig == syscall.SIGKILL {
		<-done
		return
	}
	select {
	case <-done:
	case <-time.After(grace):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// Signal sends sig to the process group and returns at once; use it for
// SIGSTOP/SIGCONT or a SIGTERM whose outcome the caller waits for with Wait.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.mu.Unlock()
	if cmd == nil || done == nil {
		return fmt.Errorf("%s is not running", p.Name)
	}
	select {
	case <-done:
		return fmt.Errorf("%s has exited", p.Name)
	default:
	}
	if err := syscall.Kill(-cmd.Process.Pid, sig); err != nil {
		return fmt.Errorf("sending %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Wait waits up to timeout for the process to end and reports whether it did.
func (p *Process) Wait(timeout time.Duration) bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return true
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// Tail returns the last n bytes of the process log.
func (p *Process) Tail(n int64) string {
	f, err := os.Open(p.LogPath)
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

// FreePort returns a loopback port that was free a moment ago, below the
// kernel's ephemeral range and never handed out twice by this process
// (testnet.Port): a port from listen(":0") can be taken by any outgoing
// connection before the component binds it, or while a stopped API server
// is down before its restart.
func FreePort() (int, error) {
	return testnet.Port("127.0.0.1")
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// waitFor polls check until it succeeds, the process dies or ctx ends.
func waitFor(ctx context.Context, p *Process, what string, check func(context.Context) error) error {
	var last error
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if p != nil {
			if dead, err := p.Exited(); dead {
				return fmt.Errorf("%s exited while waiting for %s (%v); log tail:\n%s", p.Name, what, err, p.Tail(4000))
			}
		}
		if last = check(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			msg := ""
			if p != nil {
				msg = "; log tail:\n" + p.Tail(4000)
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
