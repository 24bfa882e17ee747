package promtext

import (
	"strings"
	"testing"
)

const apiserver = `# HELP apiserver_request_total Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 2500
apiserver_request_total{code="201",component="apiserver",group="",resource="pods",scope="resource",subresource="binding",verb="POST",version="v1"} 2500
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="resource",subresource="status",verb="PATCH",version="v1"} 5000
apiserver_request_total{code="409",component="apiserver",group="",resource="pods",scope="resource",subresource="",verb="POST",version="v1"} 3
apiserver_request_total{code="200",component="apiserver",group="",resource="pods",scope="namespace",subresource="",verb="LIST",version="v1"} 7
# HELP go_gc_heap_live_bytes Heap memory occupied by live objects.
# TYPE go_gc_heap_live_bytes gauge
go_gc_heap_live_bytes 1.2345e+07
# HELP raft_apply_seconds A histogram.
# TYPE raft_apply_seconds histogram
raft_apply_seconds_bucket{le="0.1"} 4
raft_apply_seconds_bucket{le="+Inf"} 5
raft_apply_seconds_sum 0.7
raft_apply_seconds_count 5
`

func TestParseAndSum(t *testing.T) {
	s, err := Parse(strings.NewReader(apiserver))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		metric string
		match  Match
		want   float64
	}{
		{"pod writes of controllers", "apiserver_request_total",
			All(In("resource", "pods"), In("subresource", ""), In("verb", "POST", "PUT", "PATCH", "DELETE")), 2503},
		{"bindings", "apiserver_request_total", All(In("resource", "pods"), In("subresource", "binding")), 2500},
		{"everything", "apiserver_request_total", nil, 10010},
		{"gauge", "go_gc_heap_live_bytes", nil, 12345000},
		{"histogram count", "raft_apply_seconds_count", nil, 5},
		{"histogram sum", "raft_apply_seconds_sum", nil, 0.7},
		{"absent", "nothing_here", nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := s.Sum(tc.metric, tc.match); got != tc.want {
				t.Fatalf("Sum = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseRefusesGarbage(t *testing.T) {
	if _, err := Parse(strings.NewReader("metric{label=\"unterminated 1\n")); err == nil {
		t.Fatal("want an error")
	}
}
