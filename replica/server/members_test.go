package server

import (
	"errors"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/worker"
	"github.com/replicafed/replicafed/federation/registry/credentials"
	"github.com/replicafed/replicafed/internal/metrics"
)

// A member that leaves takes its per-member series and map entries with
// it; another member's stay.
func TestForgetMember(t *testing.T) {
	metrics.MemberHealthy.WithLabelValues("gone").Set(1)
	metrics.MemberHealthy.WithLabelValues("stays").Set(1)
	metrics.PodOperations.WithLabelValues("gone", "create", "success").Inc()
	metrics.PodOperations.WithLabelValues("gone", "delete", "failure").Inc()
	metrics.PodOperations.WithLabelValues("stays", "create", "success").Inc()
	t.Cleanup(func() {
		metrics.MemberHealthy.DeleteLabelValues("stays")
		metrics.PodOperations.DeletePartialMatch(prometheus.Labels{"cluster": "stays"})
	})
	var problems sync.Map
	problems.Store("gone", "member not prepared: x")
	problems.Store("stays", "member not prepared: y")
	var forgotten []string

	forgetMember("gone", &problems, func(c string) { forgotten = append(forgotten, c) })

	if _, ok := problems.Load("gone"); ok {
		t.Error("problem of the member that left is kept")
	}
	if _, ok := problems.Load("stays"); !ok {
		t.Error("problem of another member dropped")
	}
	if len(forgotten) != 1 || forgotten[0] != "gone" {
		t.Errorf("health forgotten for %v, want [gone]", forgotten)
	}
	if metrics.MemberHealthy.DeleteLabelValues("gone") {
		t.Error("member_healthy series of the member that left is kept")
	}
	if testutil.ToFloat64(metrics.MemberHealthy.WithLabelValues("stays")) != 1 {
		t.Error("member_healthy series of another member dropped")
	}
	if metrics.PodOperations.DeleteLabelValues("gone", "create", "success") || metrics.PodOperations.DeleteLabelValues("gone", "delete", "failure") {
		t.Error("pod operation series of the member that left are kept")
	}
	if !metrics.PodOperations.DeleteLabelValues("stays", "create", "success") {
		t.Error("pod operation series of another member dropped")
	}
}

func TestCredentialPolicy(t *testing.T) {
	got := credentialPolicy(config.Credentials{AllowExec: true, AllowFiles: true, AllowAuthProvider: true, AllowInsecureTLS: true, AllowProxy: true})
	want := credentials.Policy{AllowExec: true, AllowFiles: true, AllowAuthProvider: true, AllowInsecureTLS: true, AllowProxy: true}
	if got != want {
		t.Errorf("credentialPolicy = %+v, want %+v", got, want)
	}
	if credentialPolicy(config.Credentials{}) != (credentials.Policy{}) {
		t.Error("default credentials allow something")
	}
}

// A member whose worker fails to start shows WorkerFailing beside its
// registration's conditions; the others show only theirs.
func TestMemberConditions(t *testing.T) {
	reg := func(c string) []metav1.Condition {
		return []metav1.Condition{{Type: "CredentialsExpiring", Status: metav1.ConditionFalse, Reason: "Valid"}}
	}
	failing := func(c string) error {
		if c == "bad" {
			return errors.New("no matches for kind MemberReplicaSet")
		}
		return nil
	}
	conds := memberConditions(reg, failing)
	if got := conds("good"); len(got) != 1 {
		t.Errorf("good member: %+v, want the registration's condition only", got)
	}
	got := conds("bad")
	if len(got) != 2 || got[1].Type != worker.ConditionWorkerFailing || got[1].Status != metav1.ConditionTrue ||
		!strings.Contains(got[1].Message, "MemberReplicaSet") {
		t.Errorf("failing member: %+v, want WorkerFailing True naming the error", got)
	}
}
