package dependencies

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func k(kind Kind, name string) Key { return Key{Kind: kind, Name: name} }

func TestDesired(t *testing.T) {
	got := Desired([]Want{
		{FRS: "web", Refs: []Ref{cm("conf"), opt(sec("tls"))}, Members: []string{"a", "b"}},
		{FRS: "api", Refs: []Ref{cm("conf"), sec("db")}, Members: []string{"b"}},
		{FRS: "idle", Refs: []Ref{cm("idle")}},
		{FRS: "gone", Refs: []Ref{cm("conf")}, Members: []string{"c"}, Release: true},
	})
	want := map[string]map[Key][]string{
		"a": {k(ConfigMap, "conf"): {"web"}, k(Secret, "tls"): {"web"}},
		"b": {k(ConfigMap, "conf"): {"api", "web"}, k(Secret, "tls"): {"web"}, k(Secret, "db"): {"api"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Desired (-want +got):\n%s", diff)
	}
}

func TestDecide(t *testing.T) {
	conf, db, tls, old, foreign := k(ConfigMap, "conf"), k(Secret, "db"), k(Secret, "tls"), k(ConfigMap, "old"), k(ServiceAccount, "x")
	cases := []struct {
		name     string
		desired  map[Key][]string
		existing map[Key]*Existing
		released map[string]bool
		want     []Step
	}{
		{"nothing", nil, nil, nil, nil},
		{"create missing, keep copies, never touch foreign", map[Key][]string{conf: {"web"}, db: {"api", "web"}, tls: {"web"}},
			map[Key]*Existing{db: {Copy: true, Owners: []string{"web"}}, tls: {}, conf: nil},
			nil,
			[]Step{{Key: conf, Action: Create, Owners: []string{"web"}}, {Key: db, Action: Keep, Owners: []string{"api", "web"}}, {Key: tls, Action: Conflict}}},
		{"copies nobody needs go, foreign objects stay", nil,
			map[Key]*Existing{old: {Copy: true, Owners: []string{"web"}}, foreign: {}},
			nil,
			[]Step{{Key: old, Action: Delete}, {Key: foreign, Action: Ignore}}},
		{"last owner deleted with orphan propagation: released", nil,
			map[Key]*Existing{old: {Copy: true, Owners: []string{"api", "web"}}},
			map[string]bool{"web": true},
			[]Step{{Key: old, Action: ReleaseCopy}}},
		{"shared copy outlives one owner", map[Key][]string{conf: {"api"}},
			map[Key]*Existing{conf: {Copy: true, Owners: []string{"api", "web"}}},
			nil,
			[]Step{{Key: conf, Action: Keep, Owners: []string{"api"}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, Decide(c.desired, c.existing, c.released)); diff != "" {
				t.Errorf("Decide (-want +got):\n%s", diff)
			}
		})
	}
}
