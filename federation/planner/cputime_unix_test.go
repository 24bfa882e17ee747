//go:build unix

package planner

import "syscall"

// processCPU returns the user+system CPU time the test process has used, in
// nanoseconds; unlike wall time it does not grow while other processes hold
// the cores.
func processCPU() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
