package config

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

const examplePath = "../examples/config.yaml"

// TestExampleConfig checks that examples/config.yaml names every key, holds
// only defaults (so it documents them truthfully) and validates.
func TestExampleConfig(t *testing.T) {
	fromExample, err := load(t, "", podEnv, "--config", examplePath)
	if err != nil {
		t.Fatalf("example refused: %v", err)
	}
	defaults, err := load(t, "", podEnv)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(defaults, fromExample); diff != "" {
		t.Errorf("example differs from defaults (-defaults +example):\n%s", diff)
	}

	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]any
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for _, key := range settingKeys() {
		if _, ok := lookupRaw(raw, key); !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		t.Errorf("example lacks keys: %v", missing)
	}
}

// TestExampleCommentedListsValidate uncomments the sample peers and static
// clusters and checks they load.
func TestExampleCommentedListsValidate(t *testing.T) {
	data, err := os.ReadFile(examplePath)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := tempFile(t, "eu-west-1.kubeconfig")
	var out []string
	inSample := false
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case trimmed == "static: []" || trimmed == "peers: []":
			continue
		case trimmed == "# static:" || trimmed == "# peers:":
			inSample = true
		case inSample && strings.HasPrefix(trimmed, "#   "):
		default:
			inSample = false
		}
		if inSample {
			line = strings.Replace(line, "# ", "", 1)
			line = strings.Replace(line, "/etc/replicafed/members/eu-west-1.kubeconfig", kubeconfig, 1)
		}
		out = append(out, line)
	}
	env := map[string]string{"POD_NAME": "replicafed-1"}
	cfg, err := load(t, strings.Join(out, "\n"), env)
	if err != nil {
		t.Fatalf("uncommented example refused: %v", err)
	}
	ids := []string{}
	for _, p := range cfg.Raft.Peers {
		ids = append(ids, p.ID)
	}
	if !slices.Equal(ids, []string{"replicafed-0", "replicafed-1", "replicafed-2"}) || len(cfg.Clusters.Static) != 1 {
		t.Fatalf("peers %v, static %+v: want the three sample peers and one static cluster", ids, cfg.Clusters.Static)
	}
	if want := "replicafed-1.replicafed-raft.replicafed-system.svc:7000"; cfg.Raft.AdvertiseAddress != want {
		t.Errorf("advertiseAddress = %q, want %q", cfg.Raft.AdvertiseAddress, want)
	}
	if got := cfg.Clusters.Static[0].Labels["topology.kubernetes.io/region"]; got != "eu-west-1" {
		t.Errorf("static label = %q, want eu-west-1", got)
	}
	if got := cfg.Clusters.Static[0].Taints; len(got) != 1 || got[0].Key != "example.com/maintenance" || got[0].Effect != "NoSchedule" {
		t.Errorf("static taints = %+v, want the sample NoSchedule taint", got)
	}
}
