// Package heapclass sums a heap profile's in-use bytes by what holds
// them: a class is every sample with a frame whose function name matches
// its pattern. It is pure.
package heapclass

import (
	"fmt"
	"io"
	"regexp"

	"github.com/google/pprof/profile"
)

// Class names what a pattern of function names holds.
type Class struct {
	Name  string
	Match *regexp.Regexp
}

// Replica are the classes the fleet benchmark reports for a replica.
var Replica = []Class{
	// The member informers' stores and indexes and the trimmed pods:
	// what grows with the pods a replica caches.
	{Name: "pod cache", Match: regexp.MustCompile(`k8s\.io/client-go/tools/cache\.|controller/worker\.(TrimPod|trimPod)`)},
	// Raft entries a follower received or the leader encoded, kept by
	// raft's LogCache, and the FSM's remembered results for retried
	// commands: bounded, whatever the fleet's size.
	{Name: "raft caches", Match: regexp.MustCompile(`hashicorp/raft\.\(\*NetworkTransport\)\.handleCommand|raftstore/fsm\.frame$|raftstore/fsm\.\(\*FSM\)\.(applyReserve|applyBatch)$|raftstore/fsm\.\(\*state\)\.rememberDedup$`)},
}

// Read parses a heap profile (gzipped or not) and sums its in-use bytes
// by class; a sample in two classes counts in both. The total is under
// "total".
func Read(r io.Reader, classes []Class) (map[string]int64, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the heap profile: %w", err)
	}
	return Sum(p, classes)
}

// Sum sums p's in-use bytes by class, and in all under "total".
func Sum(p *profile.Profile, classes []Class) (map[string]int64, error) {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return nil, fmt.Errorf("the profile has no inuse_space samples (a heap profile?)")
	}
	out := map[string]int64{"total": 0}
	for _, c := range classes {
		out[c.Name] = 0
	}
	for _, s := range p.Sample {
		v := s.Value[idx]
		out["total"] += v
		for _, c := range classes {
			if matches(s, c.Match) {
				out[c.Name] += v
			}
		}
	}
	return out, nil
}

// matches reports whether any frame of s is a function re matches.
func matches(s *profile.Sample, re *regexp.Regexp) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && re.MatchString(l.Function.Name) {
				return true
			}
		}
	}
	return false
}
