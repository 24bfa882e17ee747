package propagation

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/controller/dependencies"
	"github.com/replicafed/replicafed/federation/aggregate"
)

func TestCondition(t *testing.T) {
	conf := dependencies.Key{Kind: dependencies.ConfigMap, Name: "conf"}
	db := dependencies.Key{Kind: dependencies.Secret, Name: "db"}
	cases := []struct {
		name           string
		problems       []problem
		copies, member int
		status         metav1.ConditionStatus
		reason, msg    string
	}{
		{"nothing referenced", nil, 0, 2, metav1.ConditionTrue, v1alpha1.ReasonDependenciesPropagated, "references no ConfigMap"},
		{"no member", nil, 2, 0, metav1.ConditionTrue, v1alpha1.ReasonDependenciesPropagated, "no member runs replicas"},
		{"copied", nil, 2, 3, metav1.ConditionTrue, v1alpha1.ReasonDependenciesPropagated, "2 object(s) copied to 3 member(s)"},
		{"conflict first, then sorted, duplicates once", []problem{
			{Member: "b", Key: db, Reason: v1alpha1.ReasonDependencyCopyFailed, Message: "timeout"},
			{Key: conf, Reason: v1alpha1.ReasonDependencyNotFound, Message: "not found in the hub namespace"},
			{Member: "a", Key: db, Reason: v1alpha1.ReasonDependencyConflict, Message: "exists"},
			{Member: "a", Key: db, Reason: v1alpha1.ReasonDependencyConflict, Message: "exists"},
		}, 2, 2, metav1.ConditionFalse, v1alpha1.ReasonDependencyConflict,
			"Secret/db in a: exists; ConfigMap/conf: not found in the hub namespace; Secret/db in b: timeout"},
		{"invalid reference first", []problem{
			{Member: "a", Key: db, Reason: v1alpha1.ReasonDependencyConflict, Message: "exists"},
			{Key: dependencies.Key{Kind: dependencies.Secret, Name: "kube-system/db"}, Reason: ReasonDependencyInvalidReference, Message: "not an object name"},
		}, 1, 1, metav1.ConditionFalse, ReasonDependencyInvalidReference, "Secret/kube-system/db: not an object name; Secret/db in a: exists"},
		{"a 100 KiB member error is cut", []problem{
			{Member: "a", Key: db, Reason: v1alpha1.ReasonDependencyCopyFailed, Message: strings.Repeat("e", 100<<10)},
		}, 1, 1, metav1.ConditionFalse, v1alpha1.ReasonDependencyCopyFailed, aggregate.TruncatedMarker},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := condition(c.problems, c.copies, c.member, 7)
			if got.Type != v1alpha1.ConditionDependenciesPropagated || got.Status != c.status || got.Reason != c.reason ||
				!strings.Contains(got.Message, c.msg) || got.ObservedGeneration != 7 {
				t.Errorf("condition = %+v, want %s %s %q", got, c.status, c.reason, c.msg)
			}
		})
	}
	long := make([]problem, 2000)
	for i := range long {
		long[i] = problem{Member: strings.Repeat("m", 20), Key: dependencies.Key{Kind: dependencies.Secret, Name: strings.Repeat("x", i%50+1)},
			Reason: v1alpha1.ReasonDependencyCopyFailed, Message: strings.Repeat("e", 40)}
	}
	if got := condition(long, 1, 1, 1); len(got.Message) > maxConditionMessage {
		t.Errorf("message of %d bytes exceeds the condition limit", len(got.Message))
	}
}

func TestExplain(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "db", errors.New("no"))
	if got := explain(forbidden, "hint"); !strings.HasSuffix(got, "(hint)") {
		t.Errorf("forbidden: %q", got)
	}
	if got := explain(errors.New("timeout"), "hint"); got != "timeout" {
		t.Errorf("other: %q", got)
	}
}
