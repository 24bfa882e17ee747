package registry

import (
	"context"
	"strings"
	"testing"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

func TestSecretLabel(t *testing.T) {
	tests := []struct {
		sel, want, err string
	}{
		{"sigs.k8s.io/multicluster-runtime-kubeconfig=true", "sigs.k8s.io/multicluster-runtime-kubeconfig", ""},
		{"replicafed.io/member==true", "replicafed.io/member", ""},
		{"a=b", "", "must have the form"},
		{"a=true,b=true", "", "must have the form"},
		{"a!=true", "", "must have the form"},
		{"a in (true)", "", "must have the form"},
		{"!!bad", "", "parsing"},
	}
	for _, tc := range tests {
		got, err := SecretLabel(tc.sel)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SecretLabel(%q) error = %v, want %q", tc.sel, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("SecretLabel(%q) = %q, %v; want %q", tc.sel, got, err, tc.want)
		}
	}
}

func TestRegisteredStatic(t *testing.T) {
	taint := v1alpha1.ClusterTaint{Key: "maintenance", Effect: v1alpha1.TaintNoExecute}
	r := New(Options{Static: []Static{{Name: "b", Labels: map[string]string{"zone": "x"}, Taints: []v1alpha1.ClusterTaint{taint}}, {Name: "a"}, {Name: "b"}}}, nil)
	got, err := r.Registered(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Name != "a" || got[1].Name != "b" || got[1].Labels["zone"] != "x" {
		t.Fatalf("Registered = %+v, want a and b (first entry's labels), sorted", got)
	}
	if len(got[0].Taints) != 0 || len(got[1].Taints) != 1 || got[1].Taints[0] != taint || got[1].TaintsError != "" {
		t.Errorf("taints = a %+v, b %+v %q; want b's static taint only", got[0].Taints, got[1].Taints, got[1].TaintsError)
	}
}
