package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// TestStaticTaintsLoad reads clusters.static[].taints from a file (timeAdded
// unquoted, which YAML reads as a timestamp, and quoted, a string) and from
// the environment, and converts them to the API's taints.
func TestStaticTaintsLoad(t *testing.T) {
	kubeconfig := tempFile(t, "kubeconfig")
	added := time.Date(2026, 5, 1, 10, 0, 0, 0, time.UTC)
	want := []v1alpha1.ClusterTaint{
		{Key: "maintenance", Effect: v1alpha1.TaintNoExecute, TimeAdded: new(metav1.NewTime(added))},
		{Key: "example.com/tier", Value: "spot", Effect: v1alpha1.TaintNoSchedule},
	}
	for _, tc := range []struct {
		name, yaml string
		env        map[string]string
	}{
		{"file, timestamp", "clusters:\n  static:\n  - name: m1\n    kubeconfig: " + kubeconfig + "\n    taints:\n" +
			"    - {key: maintenance, effect: NoExecute, timeAdded: 2026-05-01T10:00:00Z}\n" +
			"    - {key: example.com/tier, value: spot, effect: NoSchedule}\n", nil},
		{"file, string", "clusters:\n  static:\n  - name: m1\n    kubeconfig: " + kubeconfig + "\n    taints:\n" +
			"    - key: maintenance\n      effect: NoExecute\n      timeAdded: \"2026-05-01T10:00:00Z\"\n" +
			"    - key: example.com/tier\n      value: spot\n      effect: NoSchedule\n", nil},
		{"environment", "", map[string]string{"REPLICAFED_CLUSTERS_STATIC": `[{name: m1, kubeconfig: "` + kubeconfig + `", taints: [` +
			`{key: maintenance, effect: NoExecute, timeAdded: "2026-05-01T10:00:00Z"}, {key: example.com/tier, value: spot, effect: NoSchedule}]}]`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{}
			for k, v := range podEnv {
				env[k] = v
			}
			for k, v := range tc.env {
				env[k] = v
			}
			cfg, err := load(t, tc.yaml, env)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfg.Clusters.Static) != 1 {
				t.Fatalf("static = %+v, want one member", cfg.Clusters.Static)
			}
			got := cfg.Clusters.Static[0].ClusterTaints()
			if len(got) != len(want) {
				t.Fatalf("taints = %+v, want %+v", got, want)
			}
			for i := range want {
				g, w := got[i], want[i]
				if g.Key != w.Key || g.Value != w.Value || g.Effect != w.Effect || (g.TimeAdded == nil) != (w.TimeAdded == nil) ||
					(w.TimeAdded != nil && !g.TimeAdded.Equal(w.TimeAdded)) {
					t.Errorf("taint %d = %+v, want %+v", i, g, w)
				}
			}
		})
	}
	if got := (StaticCluster{Name: "m"}).ClusterTaints(); got != nil {
		t.Errorf("no taints converted to %#v, want nil", got)
	}
}

// TestStaticTaintsRefused names every bad taint by its key.
func TestStaticTaintsRefused(t *testing.T) {
	ok := StaticTaint{Key: "maintenance", Effect: v1alpha1.TaintNoExecute}
	for _, tc := range []struct {
		name   string
		taints []StaticTaint
		keys   []string
		text   string
	}{
		{"key empty", []StaticTaint{{Effect: v1alpha1.TaintNoSchedule}}, []string{"clusters.static[0].taints[0].key"}, "must not be empty"},
		{"key invalid", []StaticTaint{ok, {Key: "a b", Effect: v1alpha1.TaintNoSchedule}}, []string{"clusters.static[0].taints[1].key"}, `label key, got "a b"`},
		{"value invalid", []StaticTaint{{Key: "k", Value: "x y", Effect: v1alpha1.TaintNoSchedule}}, []string{"clusters.static[0].taints[0].value"}, `label value, got "x y"`},
		{"effect empty", []StaticTaint{{Key: "k"}}, []string{"clusters.static[0].taints[0].effect"}, `NoSchedule or NoExecute, got ""`},
		{"effect unknown", []StaticTaint{{Key: "k", Effect: "PreferNoSchedule"}}, []string{"clusters.static[0].taints[0].effect"}, `got "PreferNoSchedule"`},
		{"duplicate", []StaticTaint{ok, {Key: "other", Effect: v1alpha1.TaintNoSchedule}, {Key: "maintenance", Value: "v", Effect: v1alpha1.TaintNoExecute}},
			[]string{"clusters.static[0].taints[2]"}, `duplicates clusters.static[0].taints[0] (key "maintenance", effect NoExecute)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validBase(t)
			cfg.Clusters.Static[0].Taints = tc.taints
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.text) {
				t.Errorf("error %q does not contain %q", err, tc.text)
			}
			var keys []string
			for _, fe := range FieldErrors(err) {
				keys = append(keys, fe.Key)
			}
			if !slices.Equal(keys, tc.keys) {
				t.Errorf("keys = %v, want %v (error: %v)", keys, tc.keys, err)
			}
		})
	}
	// The same key with both effects is two taints, as on a node.
	cfg := validBase(t)
	cfg.Clusters.Static[0].Taints = []StaticTaint{{Key: "k", Effect: v1alpha1.TaintNoSchedule}, {Key: "k", Effect: v1alpha1.TaintNoExecute}}
	if err := cfg.Validate(); err != nil {
		t.Errorf("one key with both effects refused: %v", err)
	}
}

// TestStaticTaintsBadTime refuses a timeAdded that is not RFC 3339, naming
// the setting.
func TestStaticTaintsBadTime(t *testing.T) {
	kubeconfig := tempFile(t, "kubeconfig")
	_, err := load(t, "clusters:\n  static:\n  - name: m1\n    kubeconfig: "+kubeconfig+"\n    taints:\n"+
		"    - {key: k, effect: NoExecute, timeAdded: \"yesterday\"}\n", podEnv)
	if err == nil {
		t.Fatal("accepted timeAdded \"yesterday\"")
	}
	var keys []string
	for _, fe := range FieldErrors(err) {
		keys = append(keys, fe.Key)
	}
	if diff := cmp.Diff([]string{"clusters.static"}, keys); diff != "" {
		t.Errorf("error %v: field error keys (-want +got):\n%s", err, diff)
	}
	if !strings.Contains(err.Error(), "yesterday") {
		t.Errorf("error %v does not name the value", err)
	}
}
