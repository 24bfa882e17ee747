package rolloutctl

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/federation/rollout"
)

func tmpl(image string) *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: image}}}}
}

func frsWith(typ v1alpha1.UpdateStrategyType, r *v1alpha1.RolloutStatus) *v1alpha1.FederatedReplicaSet {
	f := &v1alpha1.FederatedReplicaSet{}
	f.Namespace, f.Name = "shop", "web"
	f.Spec.UpdateStrategy = &v1alpha1.UpdateStrategy{Type: typ, Stages: []v1alpha1.RolloutStage{{Name: "canary"}, {Name: "rest"}}}
	f.Status.Rollout = r
	return f
}

func TestPromoteStage(t *testing.T) {
	awaiting := &v1alpha1.RolloutStatus{Phase: v1alpha1.PhaseAwaitingPromotion, StageName: "canary"}
	baking := &v1alpha1.RolloutStatus{Phase: v1alpha1.PhaseBaking, StageName: "canary"}
	cases := []struct {
		name    string
		frs     *v1alpha1.FederatedReplicaSet
		stage   string
		want    string
		wantErr string
	}{
		{name: "the stage awaiting", frs: frsWith(v1alpha1.UpdateRolling, awaiting), want: "canary"},
		{name: "a named stage ahead of time", frs: frsWith(v1alpha1.UpdateRolling, baking), stage: "rest", want: "rest"},
		{name: "nothing awaits", frs: frsWith(v1alpha1.UpdateRolling, baking), wantErr: `phase "Baking"`},
		{name: "no rollout yet", frs: frsWith(v1alpha1.UpdateRolling, nil), wantErr: `phase "none"`},
		{name: "unknown stage", frs: frsWith(v1alpha1.UpdateRolling, awaiting), stage: "eu", wantErr: "stages: canary, rest"},
		{name: "not rolling", frs: frsWith(v1alpha1.UpdateReplicaSet, awaiting), wantErr: ErrNotRolling.Error()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := PromoteStage(tc.frs, tc.stage)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("PromoteStage = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if _, err := PromoteStage(frsWith(v1alpha1.UpdateReplicaSet, nil), ""); !errors.Is(err, ErrNotRolling) {
		t.Errorf("err = %v, want ErrNotRolling", err)
	}
}

func TestUndoTarget(t *testing.T) {
	revs := []rollout.Revision{
		{Name: "web-a", Number: 1, Template: tmpl("web:1")},
		{Name: "web-b", Number: 2, Template: tmpl("web:2")},
		{Name: "web-c", Number: 4, Template: tmpl("web:3")},
	}
	cases := []struct {
		name    string
		current *corev1.PodTemplateSpec
		to      int64
		want    string
		wantErr string
	}{
		{name: "previous of the newest", current: tmpl("web:3"), want: "web-b"},
		{name: "previous after an earlier undo", current: tmpl("web:2"), want: "web-c"},
		{name: "template not in history yet", current: tmpl("web:9"), want: "web-c"},
		{name: "to a number", current: tmpl("web:3"), to: 1, want: "web-a"},
		{name: "to the current template", current: tmpl("web:3"), to: 4, wantErr: "is the current template"},
		{name: "to a pruned number", current: tmpl("web:3"), to: 3, wantErr: "kept: 1, 2, 4"},
		{name: "negative", current: tmpl("web:3"), to: -1, wantErr: "must be 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UndoTarget(revs, tc.current, tc.to)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got.Name); diff != "" {
				t.Errorf("UndoTarget (-want +got):\n%s", diff)
			}
		})
	}
	if _, err := UndoTarget(revs[:1], tmpl("web:1"), 0); err == nil || !strings.Contains(err.Error(), "no earlier revision") {
		t.Errorf("single revision: err = %v, want no earlier revision", err)
	}
}
