package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// procSample is what /proc says about a process at one moment.
type procSample struct {
	// CPU is user plus system time.
	CPU time.Duration
	// RSS is the resident set now; PeakRSS the high-water mark since start.
	RSS, PeakRSS int64
}

// clockTick is USER_HZ, 100 on every Linux this runs on.
const clockTick = 100

// sampleProc reads /proc/<pid>/stat and /proc/<pid>/status.
func sampleProc(pid int) (procSample, error) {
	var s procSample
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("reading CPU time of process %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(string(stat))
	if err != nil {
		return s, fmt.Errorf("process %d: %w", pid, err)
	}
	s.CPU = cpu
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("reading memory of process %d: %w", pid, err)
	}
	s.RSS, s.PeakRSS = parseStatusKB(string(status), "VmRSS:"), parseStatusKB(string(status), "VmHWM:")
	return s, nil
}

// parseStatCPU returns utime+stime from a /proc/<pid>/stat line. The command
// name (field 2) may hold spaces, so fields are counted after its ")".
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// After the name: state is field 3, utime field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat %q", stat)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed CPU times in /proc stat %q", stat)
	}
	return time.Duration(utime+stime) * time.Second / clockTick, nil
}

// parseStatusKB returns the value of a "<key> <n> kB" line of
// /proc/<pid>/status in bytes, or 0.
func parseStatusKB(status, key string) int64 {
	for line := range strings.SplitSeq(status, "\n") {
		if !strings.HasPrefix(line, key) {
			continue
		}
		f := strings.Fields(strings.TrimPrefix(line, key))
		if len(f) == 0 {
			return 0
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0
		}
		return n * 1024
	}
	return 0
}
