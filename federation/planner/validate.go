package planner

import (
	"reflect"
	"strings"
	"unicode/utf8"

	v1alpha1 "github.com/replicafed/replicafed/api/v1alpha1"
)

// Reasons of a Problem, CamelCase for conditions and events.
const (
	ReasonInvalidReplicas        = "InvalidReplicas"
	ReasonInvalidClusterSelector = "InvalidClusterSelector"
	ReasonInvalidPlacement       = "InvalidPlacement"
	ReasonInvalidToleration      = "InvalidToleration"
	ReasonInvalidDuration        = "InvalidDuration"
	ReasonInvalidFailover        = "InvalidFailover"
	ReasonInvalidMoveBudget      = "InvalidMoveBudget"
)

// Problem is a spec field Plan cannot take as written. Plan itself never
// fails: it reads an invalid selector as matching nothing, an unknown
// operator as tolerating nothing and a bad budget or duration as its
// default, and each of those can move or delete replicas the user never
// meant to touch. A caller must not commit a plan for a spec with problems.
type Problem struct {
	// Field is the path of the offending field, such as
	// spec.placement.clusterSelector.matchExpressions[0].operator.
	Field string
	// Reason names the kind of problem (the Reason* constants).
	Reason string
	// Message says what is wrong with the value.
	Message string
}

// String renders the problem as "field: message".
func (p Problem) String() string { return p.Field + ": " + p.Message }

// planned maps the spec fields Plan reads to the reason of a problem there,
// most specific prefix first.
var planned = []struct{ prefix, reason string }{
	{"spec.replicas", ReasonInvalidReplicas},
	{"spec.placement.clusterSelector", ReasonInvalidClusterSelector},
	{"spec.placement.tolerations", ReasonInvalidToleration},
	{"spec.placement", ReasonInvalidPlacement},
	{"spec.failover.moveBack", ReasonInvalidFailover},
	{"spec.failover", ReasonInvalidDuration},
	{"spec.moveBudget", ReasonInvalidMoveBudget},
}

// ReasonFor names the kind of problem at a field path Plan reads, and
// reports whether Plan reads it at all.
func ReasonFor(path string) (string, bool) {
	for _, r := range planned {
		if path == r.prefix || strings.HasPrefix(path, r.prefix+".") || strings.HasPrefix(path, r.prefix+"[") {
			return r.reason, true
		}
	}
	return "", false
}

// Check returns the problems of the spec fields Plan reads (replicas,
// placement, failover and moveBudget), in field order, one per field; nil
// when Plan can take every one as written. The rules are the CRD schema's
// (FederatedReplicaSetSpec.Validate), so an object that reached the
// controller past an older schema is reported instead of planned.
func Check(spec *v1alpha1.FederatedReplicaSetSpec) []Problem {
	var out []Problem
	seen := map[string]bool{}
	for _, e := range spec.Validate() {
		reason, ok := ReasonFor(e.Field)
		if !ok || seen[e.Field] {
			continue
		}
		seen[e.Field] = true
		// Typed strings (operators, enums) too: the value is quoted as given.
		if v := reflect.ValueOf(e.BadValue); v.Kind() == reflect.String {
			e.BadValue = short(v.String())
		}
		out = append(out, Problem{Field: e.Field, Reason: reason, Message: e.ErrorBody()})
	}
	return out
}

// maxQuoted bounds a user's value quoted in a message: a stored object may
// hold values of any length, and a message must stay short.
const maxQuoted = 64

// short returns s, cut to maxQuoted bytes at a rune boundary and marked.
func short(s string) string {
	if len(s) <= maxQuoted {
		return s
	}
	n := maxQuoted - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}
