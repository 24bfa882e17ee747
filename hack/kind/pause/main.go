// Command pause is the kind node's pod sandbox process: it holds a pod's
// namespaces open, reaps the zombies it inherits as the namespace's first
// process, and exits on SIGINT or SIGTERM. Built static, it is the whole of
// the registry.k8s.io/pause image hack/kind/images assembles (no registry
// to pull the upstream one from).
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if os.Getpid() != 1 {
		os.Stderr.WriteString("pause: warning: not pid 1\n")
	}
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Stderr.WriteString("pause: shutting down on " + sig.String() + "\n")
			os.Exit(0)
		}
		// Reap every exited child: pid 1 inherits orphans.
		for {
			var ws syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
