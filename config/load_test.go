package config

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/replicafed/replicafed/api/v1alpha1"
)

// load runs Load with a YAML file (written to a temp dir unless empty), a
// fake environment and flags; it never touches the process environment.
func load(t *testing.T, yaml string, env map[string]string, args ...string) (*Config, error) {
	t.Helper()
	if yaml != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append([]string{"--config", path}, args...)
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	BindFlags(fs)
	return Load(fs, args, insecureUnlessSet(mapEnv(env)))
}

// insecureUnlessSet runs raft without TLS unless env says otherwise (an
// empty value counts as unset): mutual TLS is required by default, and
// these tests are not about it (validBase and TestDefaultsNeedTLS are).
func insecureUnlessSet(env func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env(k)
		if !ok && k == "REPLICAFED_RAFT_TLS_INSECURE" {
			return "true", true
		}
		return v, ok
	}
}

func mapEnv(env map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}
}

var podEnv = map[string]string{"POD_NAME": "replicafed-0"}

func TestDefaultsNeedTLS(t *testing.T) {
	_, err := load(t, "", map[string]string{"POD_NAME": "replicafed-0", "REPLICAFED_RAFT_TLS_INSECURE": ""})
	if err == nil {
		t.Fatal("defaults without certificates accepted")
	}
	for _, key := range []string{"raft.tls.certFile", "raft.tls.keyFile", "raft.tls.caFile", "raft.tls.insecure"} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("refusal does not name %s: %v", key, err)
		}
	}
}

func TestDefaultsAreValid(t *testing.T) {
	cfg, err := load(t, "", podEnv)
	if err != nil {
		t.Fatalf("defaults refused: %v", err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"raft.id from POD_NAME", cfg.Raft.ID, "replicafed-0"},
		{"raft.advertiseAddress from bind", cfg.Raft.AdvertiseAddress, "127.0.0.1:7000"},
		{"clusters.secretNamespace from hub", cfg.Clusters.SecretNamespace, "replicafed-system"},
		{"raft.heartbeatTimeout", cfg.Raft.HeartbeatTimeout, time.Second},
		{"raft.electionTimeout", cfg.Raft.ElectionTimeout, time.Second},
		{"raft.leaderLeaseTimeout", cfg.Raft.LeaderLeaseTimeout, 500 * time.Millisecond},
		{"raft.commitTimeout", cfg.Raft.CommitTimeout, 50 * time.Millisecond},
		{"raft.maxAppendEntries", cfg.Raft.MaxAppendEntries, 64},
		{"raft.snapshotThreshold", cfg.Raft.SnapshotThreshold, 1024},
		{"raft.snapshotInterval", cfg.Raft.SnapshotInterval, 60 * time.Second},
		{"raft.trailingLogs", cfg.Raft.TrailingLogs, 10240},
		{"controller.workers", cfg.Controller.Workers, 5},
		{"controller.hubWorkers", cfg.Controller.HubWorkers, 8},
		{"controller.burstReplicas", cfg.Controller.BurstReplicas, 500},
		{"controller.memberQPS", cfg.Controller.MemberQPS, float32(20)},
		{"controller.memberBurst", cfg.Controller.MemberBurst, 30},
		{"controller.memberRateLimit", cfg.Controller.MemberRateLimit, true},
		{"controller.expectationsTTL", cfg.Controller.ExpectationsTTL, 5 * time.Minute},
		{"failover.unreachableGracePeriod", cfg.Failover.UnreachableGracePeriod, 60 * time.Second},
		{"failover.healthProbe.timeout", cfg.Failover.HealthProbe.Timeout, 3 * time.Second},
		{"metrics.bindAddress", cfg.Metrics.BindAddress, ":8080"},
		{"metrics.perFRS", cfg.Metrics.PerFRS, "summary"},
		{"metrics.profiling", cfg.Metrics.Profiling, false},
		{"hub.leaderLease.name", cfg.Hub.LeaderLease.Name, "replicafed-leader"},
		{"hub.leaderLease.renewInterval", cfg.Hub.LeaderLease.RenewInterval, 5 * time.Second},
		{"health.probeAddress", cfg.Health.ProbeAddress, ":8081"},
		{"logging.format", cfg.Logging.Format, "json"},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestRaftIDFallsBackToHostname(t *testing.T) {
	cfg, err := load(t, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname:", err)
	}
	if cfg.Raft.ID != host {
		t.Errorf("raft.id = %q, want hostname %q", cfg.Raft.ID, host)
	}
}

// settingKeys returns every configuration key in table order.
func settingKeys() []string {
	out := make([]string, len(settings))
	for i, s := range settings {
		out[i] = s.key
	}
	return out
}

// TestSettingsCoverConfig keeps the settings table the single source of
// truth: one entry per Config leaf, with the leaf's type.
func TestSettingsCoverConfig(t *testing.T) {
	var leaves []string
	var walk func(t reflect.Type, prefix string)
	walk = func(typ reflect.Type, prefix string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key := prefix + f.Tag.Get("mapstructure")
			if f.Type.Kind() == reflect.Struct {
				walk(f.Type, key+".")
				continue
			}
			leaves = append(leaves, key)
		}
	}
	walk(reflect.TypeOf(Config{}), "")
	keys := settingKeys()
	slices.Sort(leaves)
	sorted := slices.Sorted(slices.Values(keys))
	if !slices.Equal(leaves, sorted) {
		t.Fatalf("settings table and Config differ:\n table:  %v\n struct: %v", sorted, leaves)
	}
	root := reflect.ValueOf(&Config{}).Elem()
	for _, s := range settings {
		if got, want := reflect.TypeOf(s.def), fieldByKey(root, s.key).Type(); got != want {
			t.Errorf("%s: default has type %v, field has %v", s.key, got, want)
		}
		if s.usage == "" {
			t.Errorf("%s: no usage text", s.key)
		}
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ key, env, flag string }{
		{"raft.bindAddress", "REPLICAFED_RAFT_BIND_ADDRESS", "raft-bind-address"},
		{"raft.id", "REPLICAFED_RAFT_ID", "raft-id"},
		{"raft.tls.caFile", "REPLICAFED_RAFT_TLS_CA_FILE", "raft-tls-ca-file"},
		{"controller.memberQPS", "REPLICAFED_CONTROLLER_MEMBER_QPS", "controller-member-qps"},
		{"controller.expectationsTTL", "REPLICAFED_CONTROLLER_EXPECTATIONS_TTL", "controller-expectations-ttl"},
		{"logging.level", "REPLICAFED_LOGGING_LEVEL", "log-level"},
		{"metrics.bindAddress", "REPLICAFED_METRICS_BIND_ADDRESS", "metrics-bind-address"},
		{"failover.healthProbe.failureThreshold", "REPLICAFED_FAILOVER_HEALTH_PROBE_FAILURE_THRESHOLD", "failover-health-probe-failure-threshold"},
	}
	for _, tt := range tests {
		if got := EnvName(tt.key); got != tt.env {
			t.Errorf("EnvName(%q) = %q, want %q", tt.key, got, tt.env)
		}
		if got := FlagName(tt.key); got != tt.flag {
			t.Errorf("FlagName(%q) = %q, want %q", tt.key, got, tt.flag)
		}
	}
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	BindFlags(fs)
	for _, name := range []string{"config", "log-level", "raft-id", "metrics-bind-address", "raft-peers"} {
		if fs.Lookup(name) == nil {
			t.Errorf("flag --%s not registered", name)
		}
	}
}

func TestPrecedence(t *testing.T) {
	const file = "raft:\n  heartbeatTimeout: 2s\n  electionTimeout: 10s\n"
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		want time.Duration
	}{
		{"default", "", nil, nil, time.Second},
		{"file beats default", file, nil, nil, 2 * time.Second},
		{"env beats file", file, map[string]string{"REPLICAFED_RAFT_HEARTBEAT_TIMEOUT": "3s"}, nil, 3 * time.Second},
		{"flag beats env", file, map[string]string{"REPLICAFED_RAFT_HEARTBEAT_TIMEOUT": "3s"}, []string{"--raft-heartbeat-timeout=4s"}, 4 * time.Second},
		{"flag beats file", file, nil, []string{"--raft-heartbeat-timeout=4s"}, 4 * time.Second},
		{"empty env is unset", file, map[string]string{"REPLICAFED_RAFT_HEARTBEAT_TIMEOUT": ""}, nil, 2 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"POD_NAME": "p"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := load(t, tt.yaml, env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Raft.HeartbeatTimeout != tt.want {
				t.Errorf("raft.heartbeatTimeout = %v, want %v", cfg.Raft.HeartbeatTimeout, tt.want)
			}
		})
	}
}

// TestEnvOverridesKeysMissingFromFile sets keys of each type through the
// environment while the file holds none of them.
func TestEnvOverridesKeysMissingFromFile(t *testing.T) {
	kubeconfig := tempFile(t, "kubeconfig")
	env := map[string]string{
		"POD_NAME":                                  "b",
		"REPLICAFED_CONTROLLER_WORKERS":             "9",
		"REPLICAFED_CONTROLLER_MEMBER_QPS":          "12.5",
		"REPLICAFED_CONTROLLER_MEMBER_RATE_LIMIT":   "false",
		"REPLICAFED_RAFT_BIND_ADDRESS":              "10.0.0.2:7100",
		"REPLICAFED_RAFT_PEERS":                     "a=10.0.0.1:7100, b=10.0.0.2:7100",
		"REPLICAFED_FAILOVER_MOVE_BACK":             "OnRecovery",
		"REPLICAFED_CLUSTERS_STATIC":                `[{name: m1, kubeconfig: "` + kubeconfig + `", labels: {Region: eu}}]`,
		"REPLICAFED_FAILOVER_HEALTH_PROBE_INTERVAL": "7s",
	}
	cfg, err := load(t, "logging:\n  level: debug\n", env)
	if err != nil {
		t.Fatal(err)
	}
	want := []Peer{{ID: "a", Address: "10.0.0.1:7100"}, {ID: "b", Address: "10.0.0.2:7100"}}
	checks := []struct {
		name      string
		got, want any
	}{
		{"workers", cfg.Controller.Workers, 9},
		{"memberQPS", cfg.Controller.MemberQPS, float32(12.5)},
		{"memberRateLimit", cfg.Controller.MemberRateLimit, false},
		{"bindAddress", cfg.Raft.BindAddress, "10.0.0.2:7100"},
		{"peers", cfg.Raft.Peers, want},
		{"advertise from peers", cfg.Raft.AdvertiseAddress, "10.0.0.2:7100"},
		{"moveBack", string(cfg.Failover.MoveBack), "OnRecovery"},
		{"static", cfg.Clusters.Static, []StaticCluster{{Name: "m1", Kubeconfig: kubeconfig, Labels: map[string]string{"Region": "eu"}}}},
		{"probe interval", cfg.Failover.HealthProbe.Interval, 7 * time.Second},
		{"file still applies", cfg.Logging.Level, "debug"},
	}
	for _, c := range checks {
		if diff := cmp.Diff(c.want, c.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", c.name, diff)
		}
	}
}

func TestPeersForms(t *testing.T) {
	want := []Peer{{ID: "r-0", Address: "r-0.r.ns.svc:7000"}, {ID: "r-1", Address: "r-1.r.ns.svc:7000"}}
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
	}{
		{"file", "raft:\n  peers:\n  - id: r-0\n    address: r-0.r.ns.svc:7000\n  - {id: r-1, address: \"r-1.r.ns.svc:7000\"}\n", nil, nil},
		{"flag", "", nil, []string{"--raft-peers=r-0=r-0.r.ns.svc:7000,r-1=r-1.r.ns.svc:7000"}},
		{"env flow list", "", map[string]string{"REPLICAFED_RAFT_PEERS": `[{id: r-0, address: "r-0.r.ns.svc:7000"}, {id: r-1, address: "r-1.r.ns.svc:7000"}]`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"POD_NAME": "r-1"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := load(t, tt.yaml, env, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, cfg.Raft.Peers); diff != "" {
				t.Errorf("peers (-want +got):\n%s", diff)
			}
			if cfg.Raft.AdvertiseAddress != "r-1.r.ns.svc:7000" {
				t.Errorf("advertiseAddress = %q, want this server's peer address", cfg.Raft.AdvertiseAddress)
			}
		})
	}
}

func TestFileKeepsLabelCase(t *testing.T) {
	kubeconfig := tempFile(t, "kubeconfig")
	yaml := "clusters:\n  static:\n  - name: m1\n    kubeconfig: " + kubeconfig + "\n    labels:\n      Region: eu\n      tier: \"1\"\n"
	cfg, err := load(t, yaml, podEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Region": "eu", "tier": "1"}
	if len(cfg.Clusters.Static) != 1 {
		t.Fatalf("static = %#v, want one cluster", cfg.Clusters.Static)
	}
	if diff := cmp.Diff(want, cfg.Clusters.Static[0].Labels); diff != "" {
		t.Errorf("static labels (-want +got):\n%s", diff)
	}
}

func TestConfigFileFromEnv(t *testing.T) {
	dir := t.TempDir()
	fromEnv := filepath.Join(dir, "env.yaml")
	fromFlag := filepath.Join(dir, "flag.yaml")
	if err := os.WriteFile(fromEnv, []byte("controller:\n  workers: 2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fromFlag, []byte("controller:\n  workers: 3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"POD_NAME": "p", ConfigEnv: fromEnv}
	for _, tt := range []struct {
		args []string
		want int
	}{{nil, 2}, {[]string{"--config", fromFlag}, 3}} {
		cfg, err := load(t, "", env, tt.args...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Controller.Workers != tt.want {
			t.Errorf("args %v: workers = %d, want %d", tt.args, cfg.Controller.Workers, tt.want)
		}
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name string
		yaml string
		env  map[string]string
		args []string
		keys []string // every FieldError key expected, in order
		text string   // substring of the message
	}{
		{name: "unknown top-level key", yaml: "bogus: 1\n", keys: []string{"bogus"}, text: "bogus: unknown key"},
		{name: "unknown nested key keeps case", yaml: "raft:\n  heartbeatTimout: 1s\n", keys: []string{"raft.heartbeatTimout"}, text: "unknown key"},
		{name: "unknown key in list item", yaml: "raft:\n  id: a\n  peers:\n  - {id: a, adress: \"h:1\"}\n",
			keys: []string{"raft.peers[0].adress"}, text: "raft.peers[0].adress: unknown key"},
		{name: "section not a mapping", yaml: "hub: 5\n", keys: []string{"hub"}, text: "must be a mapping"},
		{name: "bad duration in file", yaml: "raft:\n  electionTimeout: banana\n", keys: []string{"raft.electionTimeout"}, text: `cannot use "banana"`},
		{name: "bad int in env", env: map[string]string{"REPLICAFED_CONTROLLER_WORKERS": "many"}, keys: []string{"controller.workers"}, text: `controller.workers: cannot use "many"`},
		{name: "bad peers flag", args: []string{"--raft-peers=a"}, keys: []string{"raft.peers"}, text: "want id=host:port"},
		{name: "bad value in file", yaml: "raft:\n  heartbeatTimeout: -1s\n", keys: []string{"raft.heartbeatTimeout"}, text: `raft.heartbeatTimeout: must be > 0, got "-1s"`},
		{name: "decode and validation errors together",
			yaml: "controller:\n  workers: x\n  burstReplicas: 0\nfailover:\n  moveBack: Later\n",
			keys: []string{"controller.workers", "controller.burstReplicas", "failover.moveBack"}, text: "Later"},
		{name: "unknown flag", args: []string{"--no-such-flag"}, text: "parsing flags"},
		{name: "pod cache cap not a number", env: map[string]string{"REPLICAFED_CONTROLLER_MAX_CACHED_PODS_PER_MEMBER": "lots"},
			keys: []string{"controller.maxCachedPodsPerMember"}, text: `controller.maxCachedPodsPerMember: cannot use "lots"`},
		{name: "pod cache cap negative flag", args: []string{"--controller-max-cached-pods-per-member=-3"},
			keys: []string{"controller.maxCachedPodsPerMember"}, text: "must be >= 0 (0 means unbounded), got -3"},
		{name: "credential switch not a bool", yaml: "clusters:\n  credentials:\n    allowExec: sometimes\n",
			keys: []string{"clusters.credentials.allowExec"}, text: `cannot use "sometimes"`},
		{name: "unknown credential switch", yaml: "clusters:\n  credentials:\n    allowEverything: true\n",
			keys: []string{"clusters.credentials.allowEverything"}, text: "unknown key"},
		{name: "expiry warning zero", yaml: "clusters:\n  credentials:\n    expiryWarning: 0s\n",
			keys: []string{"clusters.credentials.expiryWarning"}, text: "must be > 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"POD_NAME": "a"}
			for k, v := range tt.env {
				env[k] = v
			}
			cfg, err := load(t, tt.yaml, env, tt.args...)
			if err == nil {
				t.Fatalf("accepted: %+v", cfg)
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not contain %q", err, tt.text)
			}
			var keys []string
			for _, fe := range FieldErrors(err) {
				keys = append(keys, fe.Key)
			}
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("keys = %v, want %v (error: %v)", keys, tt.keys, err)
			}
		})
	}
}

func TestMissingFileRefused(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := load(t, "", podEnv, "--config", missing)
	if err == nil || !strings.Contains(err.Error(), missing) || !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error = %v, want not-exist naming %s", err, missing)
	}
}

func TestMalformedYAMLRefused(t *testing.T) {
	_, err := load(t, "raft: [unclosed\n", podEnv)
	if err == nil || !strings.Contains(err.Error(), "config file") {
		t.Fatalf("error = %v, want a config file parse error", err)
	}
}

// tempFile creates an empty file standing in for a kubeconfig or PEM file.
func tempFile(t *testing.T, name string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestYAMLNumbersForStringAndFloatKeys(t *testing.T) {
	cfg, err := load(t, "logging:\n  level: 2\nhub:\n  qps: 12.5\n  burst: 20\n", podEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logging.Level != "2" || cfg.Logging.Verbosity() != 2 || cfg.Hub.QPS != 12.5 || cfg.Hub.Burst != 20 {
		t.Errorf("got level %q (verbosity %d), qps %v, burst %d; want 2, 2, 12.5, 20",
			cfg.Logging.Level, cfg.Logging.Verbosity(), cfg.Hub.QPS, cfg.Hub.Burst)
	}
}

func TestLoadNodeCost(t *testing.T) {
	want := &v1alpha1.NodeCost{Key: "karpenter.sh/capacity-type", Values: []string{"spot", "on-demand", "reserved"}}
	for name, c := range map[string]struct {
		yaml string
		env  map[string]string
		args []string
	}{
		"file": {yaml: "controller:\n  nodeCost:\n    key: karpenter.sh/capacity-type\n    values: [spot, on-demand, reserved]\n"},
		"env": {env: map[string]string{
			"REPLICAFED_CONTROLLER_NODE_COST_KEY": "karpenter.sh/capacity-type", "REPLICAFED_CONTROLLER_NODE_COST_VALUES": "spot,on-demand,reserved"}},
		"flags": {args: []string{"--controller-node-cost-key=karpenter.sh/capacity-type", "--controller-node-cost-values=spot,on-demand,reserved"}},
	} {
		t.Run(name, func(t *testing.T) {
			env := map[string]string{}
			maps.Copy(env, podEnv)
			maps.Copy(env, c.env)
			cfg, err := load(t, c.yaml, env, c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, cfg.Controller.NodeCost.Spec()); diff != "" {
				t.Fatalf("nodeCost (-want +got):\n%s", diff)
			}
		})
	}
	cfg, err := load(t, "", podEnv)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Controller.NodeCost.Spec(); got != nil {
		t.Fatalf("default nodeCost = %+v, want none", got)
	}
}
