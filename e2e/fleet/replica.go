package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// Replica is one replicafed process.
type Replica struct {
	// ID is the raft ID (also the replica's name).
	ID string
	// AdminAddress serves /status.
	AdminAddress string
	// ConfigPath and LogPath live in the replica's directory.
	ConfigPath, LogPath string

	binary string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
}

// Status is what a replica's admin endpoint reports.
type Status struct {
	ID            string `json:"id"`
	Leading       bool   `json:"leading"`
	Term          uint64 `json:"term"`
	LeaderID      string `json:"leaderID"`
	LeaderAddress string `json:"leaderAddress"`
	Ready         bool   `json:"ready"`
}

// Start starts the process (again, after Kill or Stop).
func (r *Replica) Start() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd != nil {
		select {
		case <-r.done:
		default:
			return nil
		}
	}
	logf, err := os.OpenFile(r.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening replica log: %w", err)
	}
	cmd := exec.Command(r.binary, "--config", r.ConfigPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting replica %s: %w", r.ID, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	r.cmd, r.done = cmd, done
	return nil
}

// Running reports whether the process is alive.
func (r *Replica) Running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

// Kill ends the process with SIGKILL, like a crashed pod.
func (r *Replica) Kill() { r.signal(syscall.SIGKILL, 0) }

// Stop ends the process with SIGTERM (graceful: leadership is handed over).
func (r *Replica) Stop() { r.signal(syscall.SIGTERM, 15*time.Second) }

func (r *Replica) signal(sig syscall.Signal, grace time.Duration) {
	r.mu.Lock()
	cmd, done := r.cmd, r.done
	r.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(cmd.Process.Pid, sig)
	if grace == 0 {
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

// Status asks the replica's admin endpoint.
func (r *Replica) Status(ctx context.Context) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.AdminAddress+"/status", nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return Status{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	var st Status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return Status{}, fmt.Errorf("decoding status of %s: %w", r.ID, err)
	}
	return st, nil
}

// LogTail returns the end of the replica's log.
func (r *Replica) LogTail(n int64) string {
	b, err := os.ReadFile(r.LogPath)
	if err != nil {
		return ""
	}
	if int64(len(b)) > n {
		b = b[int64(len(b))-n:]
	}
	return string(b)
}

func replicaDir(root, id string) string { return filepath.Join(root, id) }
