package config

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// validBase returns a loaded default Config for one server of three, with
// TLS and a static cluster whose files exist.
func validBase(t *testing.T) *Config {
	t.Helper()
	cfg, err := load(t, "", podEnv)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Raft.Peers = []Peer{
		{ID: "replicafed-0", Address: "replicafed-0.replicafed.ns.svc:7000"},
		{ID: "replicafed-1", Address: "replicafed-1.replicafed.ns.svc:7000"},
		{ID: "replicafed-2", Address: "10.0.0.3:7000"},
	}
	cfg.Raft.AdvertiseAddress = "replicafed-0.replicafed.ns.svc:7000"
	cfg.Raft.TLS = TLS{CertFile: tempFile(t, "tls.crt"), KeyFile: tempFile(t, "tls.key"), CAFile: tempFile(t, "ca.crt")}
	cfg.Clusters.Static = []StaticCluster{{Name: "m1", Kubeconfig: tempFile(t, "m1.kubeconfig"), Labels: map[string]string{"topology.kubernetes.io/region": "eu-west-1"}}}
	return cfg
}

func TestValidBaseAccepted(t *testing.T) {
	for _, mod := range []struct {
		name string
		fn   func(c *Config)
	}{
		{"base", func(c *Config) {}},
		{"verbosity level", func(c *Config) { c.Logging.Level = "4" }},
		{"metrics and health disabled", func(c *Config) { c.Metrics.BindAddress = "0"; c.Health.ProbeAddress = "0" }},
		{"same port on different hosts", func(c *Config) { c.Metrics.BindAddress = "127.0.0.1:9000"; c.Health.ProbeAddress = "127.0.0.2:9000" }},
		{"rate limit off", func(c *Config) { c.Controller.MemberRateLimit = false }},
		{"no peers", func(c *Config) { c.Raft.Peers = nil }},
		{"IPv6 peer", func(c *Config) { c.Raft.Peers[2].Address = "[fd00::3]:7000" }},
		{"hub kubeconfig file", func(c *Config) { c.Hub.Kubeconfig = c.Clusters.Static[0].Kubeconfig }},
		{"leader lease off", func(c *Config) { c.Hub.LeaderLease = LeaderLease{} }},
		{"per-FRS metrics off", func(c *Config) { c.Metrics.PerFRS = PerFRSOff }},
		{"per-FRS metrics per member", func(c *Config) { c.Metrics.PerFRS = PerFRSMembers }},
		{"profiling on the metrics endpoint", func(c *Config) { c.Metrics.Profiling = true }},
		{"pod cache unbounded", func(c *Config) { c.Controller.MaxCachedPodsPerMember = 0 }},
		{"write deadline above a short lease", func(c *Config) {
			c.Raft.LeaderLeaseTimeout, c.Controller.MemberWriteTimeout = 300*time.Millisecond, 650*time.Millisecond
		}},
		{"write deadline above the default lease", func(c *Config) { c.Controller.MemberWriteTimeout = 650 * time.Millisecond }},
		{"sharding on, shortest lease, margin = lease", func(c *Config) {
			c.Sharding = Sharding{Enabled: true, Lease: 3 * time.Second, Margin: 3 * time.Second, OwnedPodsOnly: true, UsageInterval: 500 * time.Millisecond}
		}},
		{"sharding on, every pod cached, longest usage interval", func(c *Config) {
			c.Sharding = Sharding{Enabled: true, Lease: 5 * time.Second, Margin: time.Second, UsageInterval: time.Minute}
		}},
		{"every credential kind allowed", func(c *Config) {
			c.Clusters.Credentials = Credentials{AllowExec: true, AllowFiles: true, AllowAuthProvider: true, AllowInsecureTLS: true, AllowProxy: true, ExpiryWarning: time.Hour}
		}},
	} {
		t.Run(mod.name, func(t *testing.T) {
			cfg := validBase(t)
			mod.fn(cfg)
			if err := cfg.Validate(); err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func TestValidateRefuses(t *testing.T) {
	tests := []struct {
		name string
		fn   func(c *Config)
		keys []string // FieldError keys expected, in order
		text string   // substring of the message
	}{
		{"level unknown", func(c *Config) { c.Logging.Level = "loud" }, []string{"logging.level"}, `got "loud"`},
		{"sharding lease too short", func(c *Config) { c.Sharding.Lease = 2 * time.Second }, []string{"sharding.lease"}, "at least 3s"},
		{"sharding lease not above the write timeout", func(c *Config) {
			c.Sharding.Lease = 3 * time.Second
			c.Controller.MemberWriteTimeout = 3 * time.Second
			c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout, c.Raft.LeaderLeaseTimeout = 5*time.Second, 5*time.Second, time.Second
		}, []string{"sharding.lease"}, "above controller.memberWriteTimeout"},
		{"sharding margin zero", func(c *Config) { c.Sharding.Margin = 0 }, []string{"sharding.margin"}, "must be > 0"},
		{"sharding margin too small", func(c *Config) { c.Sharding.Margin = 10 * time.Millisecond }, []string{"sharding.margin"}, "at least 100ms"},
		{"sharding margin above the lease", func(c *Config) { c.Sharding.Margin = 6 * time.Second }, []string{"sharding.margin"}, "at most sharding.lease"},
		{"usage interval too short", func(c *Config) { c.Sharding.UsageInterval = 100 * time.Millisecond }, []string{"sharding.usageInterval"}, "at least 500ms"},
		{"usage interval too long", func(c *Config) { c.Sharding.UsageInterval = 2 * time.Minute }, []string{"sharding.usageInterval"}, "at most 1m"},
		{"level verbosity too high", func(c *Config) { c.Logging.Level = "11" }, []string{"logging.level"}, "0-10"},
		{"level negative", func(c *Config) { c.Logging.Level = "-1" }, []string{"logging.level"}, "0-10"},
		{"format unknown", func(c *Config) { c.Logging.Format = "xml" }, []string{"logging.format"}, `got "xml"`},

		{"hub kubeconfig missing", func(c *Config) { c.Hub.Kubeconfig = "/no/such/kubeconfig" }, []string{"hub.kubeconfig"}, "no such file"},
		{"hub kubeconfig is a dir", func(c *Config) { c.Hub.Kubeconfig = t.TempDir() }, []string{"hub.kubeconfig"}, "directory"},
		{"hub namespace invalid", func(c *Config) { c.Hub.Namespace = "Bad_NS" }, []string{"hub.namespace"}, "Bad_NS"},
		{"hub qps zero", func(c *Config) { c.Hub.QPS = 0 }, []string{"hub.qps"}, "must be > 0"},
		{"hub qps negative", func(c *Config) { c.Hub.QPS = -1 }, []string{"hub.qps"}, "got -1"},
		{"hub burst zero", func(c *Config) { c.Hub.Burst = 0 }, []string{"hub.burst"}, ">= 1"},
		{"leader lease name invalid", func(c *Config) { c.Hub.LeaderLease.Name = "Leader_Lease" }, []string{"hub.leaderLease.name"}, "Leader_Lease"},
		{"leader lease renewed too often", func(c *Config) { c.Hub.LeaderLease.RenewInterval = 100 * time.Millisecond }, []string{"hub.leaderLease.renewInterval"}, "at least 1s"},
		{"leader lease renew zero", func(c *Config) { c.Hub.LeaderLease.RenewInterval = 0 }, []string{"hub.leaderLease.renewInterval"}, "must be > 0"},
		{"hub burst below qps", func(c *Config) { c.Hub.Burst = 10 }, []string{"hub.burst"}, "must be >= hub.qps (50), got 10"},

		{"secret namespace invalid", func(c *Config) { c.Clusters.SecretNamespace = "-x" }, []string{"clusters.secretNamespace"}, "namespace"},
		{"secret selector invalid", func(c *Config) { c.Clusters.SecretSelector = "a in (" }, []string{"clusters.secretSelector"}, "invalid label selector"},
		{"secret selector empty", func(c *Config) { c.Clusters.SecretSelector = "" }, []string{"clusters.secretSelector"}, "every Secret"},
		{"secret key invalid", func(c *Config) { c.Clusters.SecretKey = "a/b" }, []string{"clusters.secretKey"}, "a/b"},
		{"static name empty", func(c *Config) { c.Clusters.Static[0].Name = "" }, []string{"clusters.static[0].name"}, "must not be empty"},
		{"static name invalid", func(c *Config) { c.Clusters.Static[0].Name = "M_1" }, []string{"clusters.static[0].name"}, "DNS subdomain"},
		{"static name duplicate", func(c *Config) { c.Clusters.Static = append(c.Clusters.Static, c.Clusters.Static[0]) },
			[]string{"clusters.static[1].name"}, `duplicates clusters.static[0].name "m1"`},
		{"static kubeconfig empty", func(c *Config) { c.Clusters.Static[0].Kubeconfig = "" }, []string{"clusters.static[0].kubeconfig"}, "must not be empty"},
		{"static kubeconfig missing", func(c *Config) { c.Clusters.Static[0].Kubeconfig = "/no/such" }, []string{"clusters.static[0].kubeconfig"}, "no such file"},
		{"static label key invalid", func(c *Config) { c.Clusters.Static[0].Labels = map[string]string{"a b": "x"} }, []string{"clusters.static[0].labels"}, `label key "a b"`},
		{"expiry warning zero", func(c *Config) { c.Clusters.Credentials.ExpiryWarning = 0 }, []string{"clusters.credentials.expiryWarning"}, `must be > 0, got "0s"`},
		{"expiry warning negative", func(c *Config) { c.Clusters.Credentials.ExpiryWarning = -time.Hour }, []string{"clusters.credentials.expiryWarning"}, "must be > 0"},
		{"static label value invalid", func(c *Config) { c.Clusters.Static[0].Labels = map[string]string{"a": "x y"} }, []string{"clusters.static[0].labels"}, `value "x y"`},

		{"raft id empty", func(c *Config) { c.Raft.ID = ""; c.Raft.Peers = nil }, []string{"raft.id"}, "must not be empty"},
		{"bind not host:port", func(c *Config) { c.Raft.BindAddress = "7000" }, []string{"raft.bindAddress"}, "host:port"},
		{"bind port out of range", func(c *Config) { c.Raft.BindAddress = ":99999" }, []string{"raft.bindAddress"}, "1-65535"},
		{"bind port zero", func(c *Config) { c.Raft.BindAddress = ":0" }, []string{"raft.bindAddress"}, "1-65535"},
		{"bind host invalid", func(c *Config) { c.Raft.BindAddress = "bad_host!:7000" }, []string{"raft.bindAddress"}, "neither an IP nor a DNS name"},
		{"advertise unspecified", func(c *Config) { c.Raft.Peers = nil; c.Raft.AdvertiseAddress = "0.0.0.0:7000" }, []string{"raft.advertiseAddress"}, "peers can dial"},
		{"advertise without host", func(c *Config) { c.Raft.Peers = nil; c.Raft.AdvertiseAddress = ":7000" }, []string{"raft.advertiseAddress"}, "peers can dial"},
		{"advertise differs from own peer entry", func(c *Config) { c.Raft.AdvertiseAddress = "10.9.9.9:7000" }, []string{"raft.advertiseAddress"}, "raft.peers[0].address"},
		{"peer id empty", func(c *Config) { c.Raft.Peers[1].ID = "" }, []string{"raft.peers[1].id"}, "must not be empty"},
		{"peer id duplicate", func(c *Config) { c.Raft.Peers[2].ID = "replicafed-1" }, []string{"raft.peers[2].id"}, `duplicates raft.peers[1].id "replicafed-1"`},
		{"peer address duplicate", func(c *Config) { c.Raft.Peers[2].Address = c.Raft.Peers[1].Address }, []string{"raft.peers[2].address"}, "duplicates raft.peers[1].address"},
		{"peer address malformed", func(c *Config) { c.Raft.Peers[2].Address = "10.0.0.3" }, []string{"raft.peers[2].address"}, "host:port"},
		{"peer address port range", func(c *Config) { c.Raft.Peers[2].Address = "10.0.0.3:70000" }, []string{"raft.peers[2].address"}, "1-65535"},
		{"self not in peers", func(c *Config) { c.Raft.ID = "other" }, []string{"raft.peers"}, `raft.id "other"`},
		{"data dir empty", func(c *Config) { c.Raft.DataDir = "" }, []string{"raft.dataDir"}, "must not be empty"},
		{"data dir is a file", func(c *Config) { c.Raft.DataDir = c.Raft.TLS.CAFile }, []string{"raft.dataDir"}, "not a directory"},
		{"tls half set", func(c *Config) { c.Raft.TLS.KeyFile = "" }, []string{"raft.tls.keyFile"}, "must be set"},
		{"tls with insecure", func(c *Config) { c.Raft.TLS.Insecure = true }, []string{"raft.tls.certFile", "raft.tls.keyFile", "raft.tls.caFile"}, "insecure"},
		{"tls only ca", func(c *Config) { c.Raft.TLS.CertFile = ""; c.Raft.TLS.KeyFile = "" }, []string{"raft.tls.certFile", "raft.tls.keyFile"}, "must be set"},
		{"tls file missing", func(c *Config) { c.Raft.TLS.CAFile = "/no/ca.crt" }, []string{"raft.tls.caFile"}, "no such file"},
		{"heartbeat zero", func(c *Config) { c.Raft.HeartbeatTimeout = 0 }, []string{"raft.heartbeatTimeout"}, `must be > 0, got "0s"`},
		{"heartbeat negative", func(c *Config) { c.Raft.HeartbeatTimeout = -time.Second }, []string{"raft.heartbeatTimeout"}, `raft.heartbeatTimeout: must be > 0, got "-1s"`},
		{"heartbeat below raft minimum", func(c *Config) {
			c.Raft.HeartbeatTimeout = 2 * time.Millisecond
			c.Raft.LeaderLeaseTimeout = time.Millisecond
			c.Controller.MemberWriteTimeout = time.Microsecond
		},
			[]string{"raft.heartbeatTimeout", "raft.leaderLeaseTimeout"}, "at least 5ms"},
		{"election below heartbeat", func(c *Config) { c.Raft.ElectionTimeout = 800 * time.Millisecond }, []string{"raft.electionTimeout"}, "must be >= raft.heartbeatTimeout (1s)"},
		{"election negative", func(c *Config) { c.Raft.ElectionTimeout = -1 }, []string{"raft.electionTimeout"}, "must be > 0"},
		{"lease above heartbeat", func(c *Config) { c.Raft.LeaderLeaseTimeout = 2 * time.Second }, []string{"raft.leaderLeaseTimeout"}, "must be < raft.heartbeatTimeout"},
		{"lease equal to heartbeat", func(c *Config) { c.Raft.LeaderLeaseTimeout = c.Raft.HeartbeatTimeout }, []string{"raft.leaderLeaseTimeout"}, "must be < raft.heartbeatTimeout"},
		{"member write timeout leaves no room for contact rounds", func(c *Config) { c.Controller.MemberWriteTimeout = 700 * time.Millisecond },
			[]string{"controller.memberWriteTimeout"}, `must be < raft.heartbeatTimeout - raft.leaderLeaseTimeout/2 - margin (1s - 250ms - 50ms = 700ms), got "700ms"`},
		// A long lease means rare rounds: a deadline that fit before them
		// would stall writes between them.
		{"member write timeout with a long lease", func(c *Config) {
			c.Raft.LeaderLeaseTimeout, c.Controller.MemberWriteTimeout = 950*time.Millisecond, 900*time.Millisecond
		}, []string{"controller.memberWriteTimeout"}, "(1s - 475ms - 50ms = 475ms)"},
		{"member write timeout past a short heartbeat timeout", func(c *Config) {
			c.Raft.HeartbeatTimeout, c.Raft.ElectionTimeout, c.Raft.LeaderLeaseTimeout = 100*time.Millisecond, 100*time.Millisecond, 40*time.Millisecond
			c.Controller.MemberWriteTimeout = 70 * time.Millisecond
		}, []string{"controller.memberWriteTimeout"}, "(100ms - 20ms - 10ms = 70ms)"},
		{"member write timeout zero", func(c *Config) { c.Controller.MemberWriteTimeout = 0 }, []string{"controller.memberWriteTimeout"}, "must be > 0"},
		{"member write max duration below the timeout", func(c *Config) { c.Controller.MemberWriteMaxDuration = 500 * time.Millisecond },
			[]string{"controller.memberWriteMaxDuration"}, `must be >= controller.memberWriteTimeout (650ms; equal turns renewal off), got "500ms"`},
		{"burst replicas above the raft command limit", func(c *Config) { c.Controller.BurstReplicas = 10001 }, []string{"controller.burstReplicas"}, "must be <= 10000"},
		{"lease zero", func(c *Config) { c.Raft.LeaderLeaseTimeout = 0 }, []string{"raft.leaderLeaseTimeout"}, "must be > 0"},
		{"commit zero", func(c *Config) { c.Raft.CommitTimeout = 0 }, []string{"raft.commitTimeout"}, "must be > 0"},
		{"snapshot interval negative", func(c *Config) { c.Raft.SnapshotInterval = -time.Minute }, []string{"raft.snapshotInterval"}, "must be > 0"},
		{"snapshot threshold zero", func(c *Config) { c.Raft.SnapshotThreshold = 0 }, []string{"raft.snapshotThreshold"}, ">= 1"},
		{"trailing logs negative", func(c *Config) { c.Raft.TrailingLogs = -1 }, []string{"raft.trailingLogs"}, ">= 0, got -1"},
		{"max append zero", func(c *Config) { c.Raft.MaxAppendEntries = 0 }, []string{"raft.maxAppendEntries"}, "1-1024"},
		{"max append too big", func(c *Config) { c.Raft.MaxAppendEntries = 2048 }, []string{"raft.maxAppendEntries"}, "got 2048"},
		{"apply timeout zero", func(c *Config) { c.Raft.ApplyTimeout = 0 }, []string{"raft.applyTimeout"}, "must be > 0"},
		{"observation batch zero", func(c *Config) { c.Raft.ObservationBatchSize = 0 }, []string{"raft.observationBatchSize"}, ">= 1"},
		{"observation flush negative", func(c *Config) { c.Raft.ObservationFlushInterval = -time.Millisecond }, []string{"raft.observationFlushInterval"}, "must be > 0"},
		{"admin address malformed", func(c *Config) { c.Raft.AdminAddress = "admin" }, []string{"raft.adminAddress"}, "host:port"},

		{"workers zero", func(c *Config) { c.Controller.Workers = 0 }, []string{"controller.workers"}, ">= 1, got 0"},
		{"hub workers zero", func(c *Config) { c.Controller.HubWorkers = 0 }, []string{"controller.hubWorkers"}, "must be 1 to 1024 (more only wait at the hub's client limit), got 0"},
		{"hub workers above the bound", func(c *Config) { c.Controller.HubWorkers = 1025 }, []string{"controller.hubWorkers"}, "got 1025"},
		{"burst replicas negative", func(c *Config) { c.Controller.BurstReplicas = -5 }, []string{"controller.burstReplicas"}, "got -5"},
		{"member qps zero", func(c *Config) { c.Controller.MemberQPS = 0 }, []string{"controller.memberQPS"}, "must be > 0"},
		{"member qps zero even with limits off", func(c *Config) { c.Controller.MemberRateLimit = false; c.Controller.MemberQPS = 0 }, []string{"controller.memberQPS"}, "must be > 0"},
		{"member burst zero", func(c *Config) { c.Controller.MemberBurst = 0 }, []string{"controller.memberBurst"}, ">= 1"},
		{"member burst below qps", func(c *Config) { c.Controller.MemberBurst = 10 }, []string{"controller.memberBurst"}, "controller.memberQPS (20)"},
		{"expectations ttl zero", func(c *Config) { c.Controller.ExpectationsTTL = 0 }, []string{"controller.expectationsTTL"}, "must be > 0"},
		{"resync negative", func(c *Config) { c.Controller.ResyncPeriod = -time.Hour }, []string{"controller.resyncPeriod"}, `got "-1h0m0s"`},
		{"pod cache cap negative", func(c *Config) { c.Controller.MaxCachedPodsPerMember = -1 }, []string{"controller.maxCachedPodsPerMember"}, "must be >= 0 (0 means unbounded), got -1"},
		{"status interval zero", func(c *Config) { c.Controller.StatusUpdateInterval = 0 }, []string{"controller.statusUpdateInterval"}, "must be > 0"},
		{"node cost values without key", func(c *Config) { c.Controller.NodeCost.Values = []string{"spot"} }, []string{"controller.nodeCost.key"}, "must be set"},
		{"node cost key without form", func(c *Config) { c.Controller.NodeCost.Key = "karpenter.sh/capacity-type" }, []string{"controller.nodeCost"}, "exactly one of values or integer"},
		{"node cost both forms", func(c *Config) {
			c.Controller.NodeCost = NodeCost{Key: "k", Values: []string{"spot"}, Integer: true}
		}, []string{"controller.nodeCost"}, "exactly one of values or integer"},
		{"node cost bad key", func(c *Config) { c.Controller.NodeCost = NodeCost{Key: "bad key", Integer: true} }, []string{"controller.nodeCost.key"}, "must be a label key"},
		{"node cost bad value", func(c *Config) {
			c.Controller.NodeCost = NodeCost{Key: "k", Values: []string{"spot", "not ok!"}}
		}, []string{"controller.nodeCost.values[1]"}, "label value"},

		{"grace zero", func(c *Config) { c.Failover.UnreachableGracePeriod = 0 }, []string{"failover.unreachableGracePeriod"}, "must be > 0"},
		{"unschedulable negative", func(c *Config) { c.Failover.UnschedulableThreshold = -time.Second }, []string{"failover.unschedulableThreshold"}, "must be > 0"},
		{"move back unknown", func(c *Config) { c.Failover.MoveBack = "Sometimes" }, []string{"failover.moveBack"}, `must be Never or OnRecovery, got "Sometimes"`},
		{"probe interval zero", func(c *Config) { c.Failover.HealthProbe.Interval = 0 }, []string{"failover.healthProbe.interval"}, "must be > 0"},
		{"probe timeout zero", func(c *Config) { c.Failover.HealthProbe.Timeout = 0 }, []string{"failover.healthProbe.timeout"}, "must be > 0"},
		{"probe timeout above interval", func(c *Config) { c.Failover.HealthProbe.Timeout = 10 * time.Second }, []string{"failover.healthProbe.timeout"}, "<= failover.healthProbe.interval"},
		{"failure threshold zero", func(c *Config) { c.Failover.HealthProbe.FailureThreshold = 0 }, []string{"failover.healthProbe.failureThreshold"}, ">= 1"},
		{"success threshold negative", func(c *Config) { c.Failover.HealthProbe.SuccessThreshold = -1 }, []string{"failover.healthProbe.successThreshold"}, ">= 1"},

		{"metrics malformed", func(c *Config) { c.Metrics.BindAddress = "metrics" }, []string{"metrics.bindAddress"}, "host:port"},
		{"per-FRS metrics unknown", func(c *Config) { c.Metrics.PerFRS = "all" }, []string{"metrics.perFRS"}, `must be off, summary or members, got "all"`},
		{"profiling without metrics", func(c *Config) { c.Metrics.Profiling = true; c.Metrics.BindAddress = "0" }, []string{"metrics.profiling"}, `which metrics.bindAddress "0" disables`},
		{"health port out of range", func(c *Config) { c.Health.ProbeAddress = ":65536" }, []string{"health.probeAddress"}, "1-65535"},
		{"health shares metrics port", func(c *Config) { c.Health.ProbeAddress = ":8080" }, []string{"health.probeAddress"}, "port 8080 is also used by metrics.bindAddress"},
		{"admin shares raft port", func(c *Config) { c.Raft.AdminAddress = "10.0.0.1:7000" }, []string{"raft.adminAddress"}, "also used by raft.bindAddress"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := validBase(t)
			tt.fn(cfg)
			err := cfg.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tt.text) {
				t.Errorf("error %q does not contain %q", err, tt.text)
			}
			var keys []string
			for _, fe := range FieldErrors(err) {
				keys = append(keys, fe.Key)
				if !strings.HasPrefix(fe.Error(), fe.Key+": ") {
					t.Errorf("message %q does not start with its key", fe.Error())
				}
			}
			if !slices.Equal(keys, tt.keys) {
				t.Errorf("keys = %v, want %v (error: %v)", keys, tt.keys, err)
			}
		})
	}
}

func TestValidateListsEveryProblem(t *testing.T) {
	cfg := validBase(t)
	cfg.Logging.Format = "xml"
	cfg.Raft.HeartbeatTimeout = -time.Second
	cfg.Controller.Workers = 0
	cfg.Failover.MoveBack = "Later"
	got := len(FieldErrors(cfg.Validate()))
	if got != 4 {
		t.Errorf("%d problems reported, want 4: %v", got, cfg.Validate())
	}
}

func TestParseLevel(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"debug", -1, false}, {"info", 0, false}, {"warn", 1, false}, {"error", 2, false},
		{"0", 0, false}, {"4", -4, false}, {"10", -10, false},
		{"11", 0, true}, {"-2", 0, true}, {"verbose", 0, true}, {"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseLevel(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseLevel(%q) = %d, %v; want %d, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}
