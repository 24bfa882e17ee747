package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// baseline is one kube-controller-manager per member running only the
// ReplicaSet controller, at the client QPS replicafed gets per member: what
// a user without replicafed runs in each cluster.
type baseline struct {
	procs map[string]*exec.Cmd
	done  map[string]chan struct{}
}

// startBaseline starts the controller-managers; kubeconfigs are by member.
func startBaseline(bin, dir string, kubeconfigs map[string]string, qps float64, burst int) (*baseline, error) {
	b := &baseline{procs: map[string]*exec.Cmd{}, done: map[string]chan struct{}{}}
	for member, kc := range kubeconfigs {
		logf, err := os.OpenFile(filepath.Join(dir, "kcm-replicaset-"+member+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
		if err != nil {
			b.stop()
			return nil, fmt.Errorf("opening controller-manager log: %w", err)
		}
		cmd := exec.Command(filepath.Join(bin, "kube-controller-manager"),
			"--kubeconfig="+kc,
			"--authentication-kubeconfig="+kc,
			"--authorization-kubeconfig="+kc,
			"--leader-elect=false",
			"--secure-port=0",
			"--use-service-account-credentials=false",
			"--controllers=replicaset",
			"--kube-api-qps="+strconv.FormatFloat(qps, 'f', -1, 64),
			"--kube-api-burst="+strconv.Itoa(burst),
		)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			_ = logf.Close()
			b.stop()
			return nil, fmt.Errorf("starting controller-manager for %s: %w", member, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
		b.procs[member], b.done[member] = cmd, done
	}
	return b, nil
}

// pids are the controller-managers' process IDs by member.
func (b *baseline) pids() map[string]int {
	out := map[string]int{}
	for m, c := range b.procs {
		out[m] = c.Process.Pid
	}
	return out
}

// stop ends every controller-manager (SIGTERM, then SIGKILL after 10 s).
func (b *baseline) stop() {
	for m, c := range b.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.done[m]:
		case <-time.After(10 * time.Second):
			_ = c.Process.Kill()
			<-b.done[m]
		}
	}
}
