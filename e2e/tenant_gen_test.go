package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
)

// specMutation is one generated change to a FederatedReplicaSet's spec: a
// JSON merge patch, which can carry any JSON type in any field (an integer
// where a string belongs), so the API server's schema is what refuses it.
type specMutation struct {
	// desc names each field set and its value class, for the failure message.
	desc string
	// patch is the JSON merge patch of the whole object ({"spec": {...}}).
	patch []byte
}

// valueClass says what a generated value is meant to be. The test does not
// trust it: the API server and the controller decide, and the test checks
// that whatever they decide loses nothing.
type valueClass string

const (
	classValid      valueClass = "valid"
	classBorderline valueClass = "borderline"
	classInvalid    valueClass = "invalid"
)

// fieldValue is one candidate value of one spec field.
type fieldValue struct {
	class valueClass
	value any
}

// fieldGen is one spec field (a path under spec) and its candidate values.
type fieldGen struct {
	path   []string
	values func(members []string) []fieldValue
}

func v(c valueClass, val any) fieldValue { return fieldValue{class: c, value: val} }

// durations are candidate values for every duration field.
func durations() []fieldValue {
	return []fieldValue{
		v(classValid, "30s"), v(classValid, "1h30m"), v(classBorderline, "0s"),
		v(classBorderline, "8760h"), v(classInvalid, "3d"), v(classInvalid, "-5s"),
		v(classInvalid, ""), v(classInvalid, 30), v(classInvalid, "99999999h"),
		v(classInvalid, "1 minute"),
	}
}

// int32s are candidate values for bounded integer fields.
func int32s() []fieldValue {
	return []fieldValue{
		v(classValid, 1), v(classValid, 5), v(classBorderline, 0), v(classInvalid, -1),
		v(classInvalid, math.MaxInt32), v(classInvalid, int64(math.MaxInt32)+1),
		v(classInvalid, "7"), v(classInvalid, 1.5),
	}
}

// tenantFields lists the spec fields the generator changes, every type the
// spec holds: integers, durations, enums, selectors, int-or-strings, lists
// of structs, booleans.
func tenantFields() []fieldGen {
	return []fieldGen{
		{[]string{"replicas"}, func([]string) []fieldValue {
			return []fieldValue{v(classValid, 3), v(classValid, 9), v(classBorderline, 0),
				v(classInvalid, -1), v(classInvalid, 1000001), v(classInvalid, "six"), v(classInvalid, 2.5)}
		}},
		{[]string{"minReadySeconds"}, func([]string) []fieldValue { return int32s() }},
		{[]string{"failover", "unreachableGracePeriod"}, func([]string) []fieldValue { return durations() }},
		{[]string{"failover", "unschedulableThreshold"}, func([]string) []fieldValue { return durations() }},
		{[]string{"failover", "moveBack"}, func([]string) []fieldValue {
			return []fieldValue{v(classValid, "Never"), v(classValid, "OnRecovery"), v(classInvalid, "never"), v(classInvalid, 1)}
		}},
		{[]string{"placement", "strategy"}, func([]string) []fieldValue {
			return []fieldValue{v(classValid, "Weighted"), v(classInvalid, "weighted"), v(classInvalid, "Random"), v(classInvalid, "")}
		}},
		{[]string{"placement", "mode"}, func([]string) []fieldValue {
			return []fieldValue{v(classInvalid, "divided"), v(classInvalid, "All"), v(classInvalid, 0)}
		}},
		{[]string{"placement", "clusterSelector"}, selectorValues},
		{[]string{"placement", "clusters"}, clusterValues},
		{[]string{"placement", "tolerations"}, func([]string) []fieldValue {
			tol := func(secs any) []any {
				return []any{map[string]any{"key": "e2e/t", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": secs}}
			}
			return []fieldValue{v(classValid, tol(60)), v(classBorderline, tol(0)),
				v(classInvalid, tol(int64(math.MaxInt64))), v(classInvalid, tol(-1)), v(classInvalid, tol("1h")),
				v(classInvalid, []any{map[string]any{"operator": "exists"}})}
		}},
		{[]string{"placement", "spreadConstraints"}, func([]string) []fieldValue {
			sc := func(key string, lo, hi any) []any {
				return []any{map[string]any{"topologyKey": key, "minGroups": lo, "maxGroups": hi}}
			}
			return []fieldValue{v(classBorderline, sc("topology.kubernetes.io/region", 1, 3)),
				v(classInvalid, sc("bad key!", 1, 2)), v(classInvalid, sc("region", 3, 1)),
				v(classInvalid, sc("region", -1, 2))}
		}},
		{[]string{"moveBudget", "maxSurge"}, intOrStrings},
		{[]string{"moveBudget", "maxUnavailable"}, intOrStrings},
		{[]string{"deletionPolicy"}, func([]string) []fieldValue {
			return []fieldValue{v(classValid, "Delete"), v(classInvalid, "delete"), v(classInvalid, "Cascade")}
		}},
		{[]string{"propagateDependencies"}, func([]string) []fieldValue {
			return []fieldValue{v(classValid, false), v(classInvalid, "yes")}
		}},
		{[]string{"selector"}, func([]string) []fieldValue {
			// The selector is immutable; every change must be refused.
			return []fieldValue{v(classInvalid, map[string]any{"matchLabels": map[string]any{"e2e-app": "other"}})}
		}},
		{[]string{"template", "metadata", "labels"}, func([]string) []fieldValue {
			// Labels that no longer match the selector must be refused.
			return []fieldValue{v(classInvalid, map[string]any{"e2e-app": nil, "other": "x"}),
				v(classInvalid, map[string]any{"e2e-app": strings.Repeat("x", 64)})}
		}},
	}
}

// selectorValues are cluster selectors, with operator typos among them (the
// lowercase `in` once deleted every running replica of its object).
func selectorValues([]string) []fieldValue {
	expr := func(key, op string, vals ...any) map[string]any {
		e := map[string]any{"key": key, "operator": op}
		if vals != nil {
			e["values"] = vals
		}
		return map[string]any{"matchExpressions": []any{e}}
	}
	return []fieldValue{
		v(classBorderline, expr("kubernetes.io/metadata.name", "Exists")),
		v(classInvalid, expr("region", "in", "eu")),
		v(classInvalid, expr("region", "Equals", "eu")),
		v(classInvalid, expr("region", "In")),
		v(classInvalid, expr("region", "Exists", "eu")),
		v(classInvalid, expr("bad key!", "Exists")),
		v(classInvalid, map[string]any{"matchLabels": map[string]any{"region": "not a label value!"}}),
		v(classInvalid, "region=eu"),
	}
}

// clusterValues are placement cluster lists built on the fleet's members.
func clusterValues(members []string) []fieldValue {
	pref := func(name string, extra map[string]any) map[string]any {
		p := map[string]any{"name": name}
		for k, x := range extra {
			p[k] = x
		}
		return p
	}
	all := func(extra map[string]any) []any {
		var out []any
		for _, m := range members {
			out = append(out, pref(m, extra))
		}
		return out
	}
	return []fieldValue{
		v(classValid, all(map[string]any{"weight": 2})),
		v(classInvalid, all(map[string]any{"weight": 0})),
		v(classInvalid, all(map[string]any{"weight": -3})),
		v(classInvalid, all(map[string]any{"weight": 100000})),
		v(classInvalid, all(map[string]any{"minReplicas": 4, "maxReplicas": 2})),
		v(classInvalid, all(map[string]any{"deletionCost": "cheap"})),
		v(classInvalid, []any{pref("Not_A_Cluster!", nil)}),
		v(classInvalid, []any{pref(strings.Repeat("m", 300), nil)}),
		v(classInvalid, []any{pref("", nil)}),
		v(classInvalid, "member-a"),
	}
}

// intOrStrings are move budget values.
func intOrStrings([]string) []fieldValue {
	return []fieldValue{v(classValid, "25%"), v(classValid, 1), v(classBorderline, "0%"),
		v(classInvalid, "abc"), v(classInvalid, -1), v(classInvalid, "200%"), v(classInvalid, "-5%"),
		v(classInvalid, 1.5)}
}

// generateMutation picks one to three distinct fields and a value for each.
func generateMutation(rng *rand.Rand, members []string) specMutation {
	fields := tenantFields()
	n := 1 + rng.IntN(3)
	picked := rng.Perm(len(fields))[:n]
	sort.Ints(picked)
	spec := map[string]any{}
	var desc []string
	for _, i := range picked {
		f := fields[i]
		vals := f.values(members)
		fv := vals[rng.IntN(len(vals))]
		setPath(spec, f.path, fv.value)
		desc = append(desc, fmt.Sprintf("%s=%s(%s)", strings.Join(f.path, "."), short(fv.value), fv.class))
	}
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		panic(fmt.Sprintf("generated values must marshal: %v", err))
	}
	return specMutation{desc: strings.Join(desc, " "), patch: patch}
}

// setPath sets m[path...] = val, creating the maps on the way.
func setPath(m map[string]any, path []string, val any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = val
}

// short renders a value in one bounded line for a failure message.
func short(val any) string {
	b, err := json.Marshal(val)
	if err != nil {
		return fmt.Sprintf("%v", val)
	}
	if s := string(b); len(s) <= 80 {
		return s
	}
	return string(b[:77]) + "..."
}

// TestGenerateMutationReproducible checks the generator is a pure function of
// its seed, which is what makes a printed seed reproduce a failure, and that
// it reaches every field.
func TestGenerateMutationReproducible(t *testing.T) {
	members := []string{"m1", "m2"}
	gen := func(seed uint64) []string {
		rng := rand.New(rand.NewPCG(seed, seed))
		var out []string
		for range 200 {
			out = append(out, string(generateMutation(rng, members).patch))
		}
		return out
	}
	a, b := gen(42), gen(42)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("mutation %d differs for the same seed:\n%s\n%s", i, a[i], b[i])
		}
	}
	if c := gen(43); strings.Join(a, "") == strings.Join(c, "") {
		t.Errorf("seeds 42 and 43 generated the same 200 mutations")
	}
	seen := map[string]bool{}
	rng := rand.New(rand.NewPCG(7, 7))
	for range 2000 {
		var spec map[string]map[string]any
		if err := json.Unmarshal(generateMutation(rng, members).patch, &spec); err != nil {
			t.Fatalf("generated patch is not JSON: %v", err)
		}
		for k := range spec["spec"] {
			seen[k] = true
		}
	}
	for _, f := range tenantFields() {
		if !seen[f.path[0]] {
			t.Errorf("field %s never generated in 2000 mutations", strings.Join(f.path, "."))
		}
	}
}
