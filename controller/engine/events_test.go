package engine

import (
	"fmt"
	"testing"
)

func TestPodsNote(t *testing.T) {
	many := make([]string, 12)
	for i := range many {
		many[i] = fmt.Sprintf("p%d", i)
	}
	tests := []struct {
		name  string
		verb  string
		names []string
		want  string
		ok    bool
	}{
		{name: "none", verb: "Created", names: nil, ok: false},
		{name: "only failures", verb: "Created", names: []string{"", ""}, ok: false},
		{name: "one is upstream's note", verb: "Created", names: []string{"", "web-a"}, want: "Created pod: web-a", ok: true},
		{name: "several", verb: "Deleted", names: []string{"a", "", "b", "c"}, want: "Deleted 3 pods: a, b, c", ok: true},
		{name: "cut after the limit", verb: "Created", names: many, want: "Created 12 pods: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 2 more", ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := podsNote(tt.verb, tt.names)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("podsNote(%q, %v) = %q, %v; want %q, %v", tt.verb, tt.names, got, ok, tt.want, tt.ok)
			}
		})
	}
}
