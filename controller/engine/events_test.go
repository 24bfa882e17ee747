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
		n     int
	}{
		{name: "none", verb: "Created", names: nil, n: 0},
		{name: "only failures", verb: "Created", names: []string{"", ""}, n: 0},
		{name: "one is upstream's note", verb: "Created", names: []string{"", "web-a"}, want: "Created pod: web-a", n: 1},
		{name: "several", verb: "Deleted", names: []string{"a", "", "b", "c"}, want: "Deleted 3 pods: a, b, c", n: 3},
		{name: "cut after the limit", verb: "Created", names: many, want: "Created 12 pods: p0, p1, p2, p3, p4, p5, p6, p7, p8, p9 and 2 more", n: 12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, n := podsNote(tt.verb, tt.names)
			if got != tt.want || n != tt.n {
				t.Fatalf("podsNote(%q, %v) = %q, %d; want %q, %d", tt.verb, tt.names, got, n, tt.want, tt.n)
			}
		})
	}
}
