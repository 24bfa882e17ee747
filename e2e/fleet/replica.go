package fleet

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testpki"
)

// Replica is one replicafed process.
type Replica struct {
	// ID is the raft ID (also the replica's name).
	ID string
	// AdminAddress serves /status.
	AdminAddress string
	// ConfigPath and LogPath live in the replica's directory.
	ConfigPath, LogPath string
	// MetricsAddress serves /metrics over HTTPS with the replica's raft
	// certificate (signed by CAFile) to callers the hub authorizes.
	MetricsAddress string
	// CAFile is the fleet's raft CA.
	CAFile string

	proc       *testcluster.Process
	adminToken string
	keyFile    string
	// admin calls the admin endpoint over TLS with the replica's own
	// certificate, which the endpoint accepts for reads.
	admin *http.Client
}

func newReplica(id, admin, token, binary, dir string, certs testpki.Files) (*Replica, error) {
	tlsCfg, err := testpki.ClientTLS(certs)
	if err != nil {
		return nil, fmt.Errorf("admin client of %s: %w", id, err)
	}
	tlsCfg.ServerName = "127.0.0.1"
	r := &Replica{
		ID: id, AdminAddress: admin, adminToken: token, keyFile: certs.KeyFile, CAFile: certs.CAFile,
		ConfigPath: filepath.Join(dir, "config.yaml"), LogPath: filepath.Join(dir, "replicafed.log"),
		admin: &http.Client{Transport: &http.Transport{TLSClientConfig: tlsCfg}},
	}
	r.proc = &testcluster.Process{Name: id, Path: binary, Args: []string{"--config", r.ConfigPath}, LogPath: r.LogPath}
	return r, nil
}

// Status is what a replica's admin endpoint reports.
type Status struct {
	ID            string `json:"id"`
	Leading       bool   `json:"leading"`
	Term          uint64 `json:"term"`
	LeaderID      string `json:"leaderID"`
	LeaderAddress string `json:"leaderAddress"`
	Ready         bool   `json:"ready"`
	// LeaderSince is when raft elected this replica, while it leads.
	LeaderSince time.Time `json:"leaderSince,omitzero"`
	// FirstMemberWrite is when this leader's first pod write to a member
	// left in its term; zero while none has.
	FirstMemberWrite time.Time `json:"firstMemberWrite,omitzero"`
	// Owners is the committed member ownership table (sharding), by member.
	Owners map[string]Owner `json:"owners,omitempty"`
}

// Owner is one row of the member ownership table.
type Owner struct {
	Owner string `json:"owner"`
	Epoch uint64 `json:"epoch"`
}

// Start starts the process (again, after Kill or Stop).
func (r *Replica) Start() error { return r.proc.Start() }

// Running reports whether the process is alive.
func (r *Replica) Running() bool {
	dead, _ := r.proc.Exited()
	return !dead
}

// Kill ends the process with SIGKILL, like a crashed pod.
func (r *Replica) Kill() { r.proc.Kill() }

// Stop ends the process with SIGTERM (graceful: leadership is handed over).
func (r *Replica) Stop() { r.proc.Stop(15 * time.Second) }

// Terminate sends SIGTERM and waits up to grace for the process to exit. It
// reports whether the process exited on its own; if not, it was killed with
// SIGKILL after grace.
func (r *Replica) Terminate(grace time.Duration) (graceful bool) {
	if err := r.proc.Signal(syscall.SIGTERM); err != nil {
		return !r.Running()
	}
	if r.proc.Wait(grace) {
		return true
	}
	r.proc.Kill()
	return false
}

// Pause freezes the process (SIGSTOP), like a long GC pause or a throttled
// container; Resume (SIGCONT) lets it run on from where it was.
func (r *Replica) Pause() error { return r.proc.Signal(syscall.SIGSTOP) }

// Resume continues a paused process.
func (r *Replica) Resume() error { return r.proc.Signal(syscall.SIGCONT) }

// TransferLeadership asks the replica (which must lead) to hand leadership to
// another voter through the admin API.
func (r *Replica) TransferLeadership(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+r.AdminAddress+"/raft/leadership-transfer", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+r.adminToken)
	resp, err := r.admin.Do(req)
	if err != nil {
		return fmt.Errorf("leadership transfer on %s: %w", r.ID, err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("leadership transfer on %s: %s: %s", r.ID, resp.Status, strings.TrimSpace(string(b)))
	}
	return nil
}

// Status asks the replica's admin endpoint.
func (r *Replica) Status(ctx context.Context) (Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+r.AdminAddress+"/status", nil)
	if err != nil {
		return Status{}, err
	}
	resp, err := r.admin.Do(req)
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
func (r *Replica) LogTail(n int64) string { return r.proc.Tail(n) }

func replicaDir(root, id string) string { return filepath.Join(root, id) }
