package heapclass

import (
	"bytes"
	"regexp"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/pprof/profile"
)

// heap builds a heap profile whose samples have the given stacks (leaf
// first) and in-use bytes.
func heap(samples map[string][]string, sizes map[string]int64) *profile.Profile {
	p := &profile.Profile{SampleType: []*profile.ValueType{
		{Type: "alloc_objects", Unit: "count"}, {Type: "alloc_space", Unit: "bytes"},
		{Type: "inuse_objects", Unit: "count"}, {Type: "inuse_space", Unit: "bytes"},
	}}
	funcs := map[string]*profile.Function{}
	for name, stack := range samples {
		s := &profile.Sample{Value: []int64{1, sizes[name] * 2, 1, sizes[name]}}
		for _, fn := range stack {
			f := funcs[fn]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: fn}
				funcs[fn] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	return p
}

func TestSum(t *testing.T) {
	p := heap(map[string][]string{
		"pod":      {"github.com/replicafed/replicafed/controller/worker.TrimPod", "k8s.io/client-go/tools/cache.(*sharedIndexInformer).HandleDeltas"},
		"index":    {"k8s.io/apimachinery/pkg/util/sets.Set[...].Insert", "k8s.io/client-go/tools/cache.(*storeIndex).addKeyToIndex"},
		"received": {"github.com/hashicorp/go-msgpack/v2/codec.decByteSlice", "github.com/hashicorp/raft.(*NetworkTransport).handleCommand"},
		"encoded":  {"github.com/replicafed/replicafed/raftstore/fsm.frame", "github.com/replicafed/replicafed/raftstore/fsm.Encode"},
		"results":  {"github.com/replicafed/replicafed/raftstore/fsm.PodName", "github.com/replicafed/replicafed/raftstore/fsm.(*FSM).applyReserve"},
		// Names that only look alike stay out.
		"framed":  {"github.com/replicafed/replicafed/raftstore/fsm.frameless"},
		"runtime": {"runtime.malg"},
	}, map[string]int64{"pod": 1000, "index": 100, "received": 40, "encoded": 20, "results": 5, "framed": 3, "runtime": 7})
	for _, tc := range []struct {
		name    string
		classes []Class
		want    map[string]int64
	}{
		{"replica classes", Replica, map[string]int64{"total": 1175, "pod cache": 1100, "raft caches": 65}},
		{"none", nil, map[string]int64{"total": 1175}},
		{"overlapping classes count a sample in both", []Class{
			{Name: "a", Match: regexp.MustCompile(`TrimPod`)}, {Name: "b", Match: regexp.MustCompile(`tools/cache`)},
		}, map[string]int64{"total": 1175, "a": 1000, "b": 1100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Sum(p, tc.classes)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Sum (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	if err := heap(map[string][]string{"pod": {"github.com/replicafed/replicafed/controller/worker.TrimPod"}}, map[string]int64{"pod": 4096}).Write(&buf); err != nil {
		t.Fatal(err)
	}
	got, err := Read(&buf, Replica)
	if err != nil {
		t.Fatal(err)
	}
	if got["pod cache"] != 4096 || got["total"] != 4096 {
		t.Errorf("Read = %v, want 4096 bytes of pod cache", got)
	}
}

func TestNotAHeapProfile(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples", Unit: "count"}, {Type: "cpu", Unit: "nanoseconds"}}}
	if _, err := Sum(p, Replica); err == nil {
		t.Error("a CPU profile was summed as a heap profile")
	}
	if _, err := Read(bytes.NewReader([]byte("not a profile")), Replica); err == nil {
		t.Error("garbage was read as a profile")
	}
}
