//go:build !unix

package planner

// processCPU is not measured off unix; the benchmark then reports 0.
func processCPU() int64 { return 0 }
