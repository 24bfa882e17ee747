package fsm

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTypeNamesAreDistinct(t *testing.T) {
	cmds := []Command{&Reserve{}, &Settle{}, &ExpectDeletes{}, &Reconcile{}, &SetTargets{}, &DeleteTargets{},
		&SetHealth{}, &PruneMembers{}, &SetRollout{}, &DeleteRollout{}, &AssignOwners{}, &RenewOwnership{},
		&ReleaseOwnership{}, &SetMemberUsage{}}
	seen := map[string]Type{TypeBatch.String(): TypeBatch}
	for _, c := range cmds {
		name := c.Type().String()
		if strings.HasPrefix(name, "type-") {
			t.Errorf("command %T (type %d) has no name", c, c.Type())
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("types %d and %d are both called %q", prev, c.Type(), name)
		}
		seen[name] = c.Type()
	}
}

func TestTypeOf(t *testing.T) {
	tests := []struct {
		name    string
		encoded []byte
		want    string
	}{
		{"reserve", []byte{byte(TypeReserve), Version1}, "reserve"},
		{"batch", []byte{byte(TypeBatch), Version1}, "batch"},
		{"type only", []byte{byte(TypeSetTargets)}, "set-targets"},
		{"unknown", []byte{200, Version1}, "type-200"},
		{"empty", nil, "type-0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, TypeOf(tc.encoded).String()); diff != "" {
				t.Errorf("TypeOf(%v) (-want +got):\n%s", tc.encoded, diff)
			}
		})
	}
}
