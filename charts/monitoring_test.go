package charts

import (
	"crypto/x509"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/internal/test/serieslist"
)

// seriesListPath lists the metric families the rules and the dashboard may
// use; e2e TestMetrics checks that a running fleet serves every one of them.
const seriesListPath = "testdata/series.txt"

func readSeriesList(t *testing.T) []string {
	t.Helper()
	names, err := serieslist.Read(seriesListPath)
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// metricName matches replicafed's and raft's series names in PromQL. Label
// names (namespace, name, cluster, peer_id, le, quantile, ...) never start
// with these prefixes.
var metricName = regexp.MustCompile(`\b(?:replicafed|raft)_[A-Za-z0-9_]+`)

// seriesIn returns the metric families an expression reads: histogram and
// summary series by their family name.
func seriesIn(expr string) []string {
	var out []string
	for _, n := range metricName.FindAllString(expr, -1) {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && !strings.HasSuffix(base, "_total") {
				n = base
				break
			}
		}
		out = append(out, n)
	}
	return out
}

// checkSeries fails for every series an expression reads that the list lacks.
func checkSeries(t *testing.T, where, expr string, known []string) {
	t.Helper()
	names := seriesIn(expr)
	if len(names) == 0 {
		t.Errorf("%s: expression reads no replicafed or raft series: %s", where, expr)
	}
	for _, n := range names {
		if !slices.Contains(known, n) {
			t.Errorf("%s: %s is not a served series (not in %s): %s", where, n, seriesListPath, expr)
		}
	}
}

// TestMonitoringOffByDefault: a default install renders no
// ServiceMonitor, PrometheusRule, dashboard or scraper binding (their CRDs
// may not exist), but the leader Lease role.
func TestMonitoringOffByDefault(t *testing.T) {
	m := template(t)
	if len(m.monitoring) != 0 || len(m.dashboards) != 0 {
		t.Errorf("default render has %d Prometheus Operator objects and %d dashboards", len(m.monitoring), len(m.dashboards))
	}
	for _, b := range m.clusterRoleBindings {
		if strings.HasSuffix(b.Name, "-metrics-scraper") {
			t.Errorf("default render binds a scraper: %s", b.Name)
		}
	}
	cfg, err := m.loadConfig(t, fullname+"-0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Metrics.PerFRS != config.PerFRSSummary || cfg.Hub.LeaderLease.Name != fullname+"-leader" {
		t.Errorf("perFRS %q, leader Lease %q; want summary and %s-leader", cfg.Metrics.PerFRS, cfg.Hub.LeaderLease.Name, fullname)
	}
}

func monitoringObject(t *testing.T, m *manifests, kind string) map[string]any {
	t.Helper()
	var found map[string]any
	for _, o := range m.monitoring {
		if o["kind"] == kind {
			if found != nil {
				t.Fatalf("two %s objects", kind)
			}
			found = o
		}
	}
	if found == nil {
		t.Fatalf("no %s rendered", kind)
	}
	return found
}

// field walks a rendered object: strings index maps, ints index lists.
func field(t *testing.T, obj any, path ...any) any {
	t.Helper()
	cur := obj
	for _, p := range path {
		switch k := p.(type) {
		case string:
			mp, ok := cur.(map[string]any)
			if !ok {
				t.Fatalf("%v: not a map at %q", path, k)
			}
			cur = mp[k]
		case int:
			l, ok := cur.([]any)
			if !ok || k >= len(l) {
				t.Fatalf("%v: no item %d", path, k)
			}
			cur = l[k]
		}
	}
	return cur
}

// TestServiceMonitor: the ServiceMonitor selects exactly the metrics
// Service, scrapes its metrics port over HTTPS verifying the raft CA for a
// name the certificate holds, with Prometheus' token, and keeps the
// FederatedReplicaSet's namespace label; the scraper binding grants the
// metrics-reader role. Without metrics.secure it scrapes plain HTTP.
func TestServiceMonitor(t *testing.T) {
	m := template(t, "--set", "metrics.serviceMonitor.enabled=true",
		"--set", "metrics.serviceMonitor.scraper.serviceAccountName=prometheus-k8s",
		"--set", "metrics.serviceMonitor.scraper.namespace=monitoring",
		"--set", "metrics.serviceMonitor.labels.release=kube-prometheus-stack")
	sm := monitoringObject(t, m, "ServiceMonitor")
	if ns := field(t, sm, "metadata", "namespace"); ns != namespace {
		t.Errorf("namespace %v", ns)
	}
	if l := field(t, sm, "metadata", "labels", "release"); l != "kube-prometheus-stack" {
		t.Errorf("extra label release = %v", l)
	}
	sel := field(t, sm, "spec", "selector", "matchLabels").(map[string]any)
	var selected []string
	for name, svc := range m.services {
		match := true
		for k, v := range sel {
			if svc.Labels[k] != v {
				match = false
			}
		}
		if match {
			selected = append(selected, name)
		}
	}
	if diff := cmp.Diff([]string{fullname + "-metrics"}, selected); diff != "" {
		t.Fatalf("Services the ServiceMonitor selects (-want +got):\n%s", diff)
	}
	ep := field(t, sm, "spec", "endpoints", 0)
	port := field(t, ep, "port")
	found := false
	for _, p := range m.services[fullname+"-metrics"].Spec.Ports {
		found = found || p.Name == port
	}
	if !found {
		t.Errorf("endpoint port %v is not a port of the metrics Service", port)
	}
	for k, want := range map[string]any{
		"scheme": "https", "honorLabels": true, "path": "/metrics",
		"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
	} {
		if got := field(t, ep, k); got != want {
			t.Errorf("endpoint %s = %v, want %v", k, got, want)
		}
	}
	if got := field(t, ep, "tlsConfig", "ca", "secret", "name"); got != fullname+"-raft-tls" {
		t.Errorf("tlsConfig CA Secret %v", got)
	}
	if got := field(t, ep, "tlsConfig", "ca", "secret", "key"); got != "ca.crt" {
		t.Errorf("tlsConfig CA key %v", got)
	}
	// The generated certificate is the one the metrics endpoint serves;
	// the ServiceMonitor's server name must be one of its names.
	if got, want := field(t, ep, "tlsConfig", "serverName"), fullname+"-0."+headless+"."+namespace+".svc"; got != want {
		t.Errorf("tlsConfig serverName %v, want %s", got, want)
	}
	if len(m.secrets) != 1 {
		t.Fatalf("want the generated raft TLS Secret, got %d Secrets", len(m.secrets))
	}
	ca, leaf := parseCert(t, m.secrets[0].Data["ca.crt"]), parseCert(t, m.secrets[0].Data["tls.crt"])
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: field(t, ep, "tlsConfig", "serverName").(string)}); err != nil {
		t.Errorf("Prometheus would refuse the metrics certificate: %v", err)
	}

	binding := findNamed(m.clusterRoleBindings, fullname+"-metrics-scraper")
	if binding == nil {
		t.Fatal("no scraper ClusterRoleBinding")
	}
	if binding.RoleRef.Name != m.metricsReader.Name {
		t.Errorf("scraper binding refers to %+v, want %s", binding.RoleRef, m.metricsReader.Name)
	}
	if diff := cmp.Diff([]rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus-k8s", Namespace: "monitoring"}}, binding.Subjects); diff != "" {
		t.Errorf("scraper binding subjects (-want +got):\n%s", diff)
	}

	plain := template(t, "--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.secure=false")
	ep = field(t, monitoringObject(t, plain, "ServiceMonitor"), "spec", "endpoints", 0)
	if field(t, ep, "scheme") != "http" || field(t, ep, "bearerTokenFile") != nil || field(t, ep, "tlsConfig") != nil {
		t.Errorf("insecure metrics: endpoint %v", ep)
	}

	if _, err := runHelm(t, "template", release, chartDir, "--namespace", namespace,
		"--set", "metrics.serviceMonitor.enabled=true", "--set", "metrics.service.enabled=false"); err == nil || !strings.Contains(err.Error(), "metrics.service.enabled") {
		t.Errorf("ServiceMonitor without the metrics Service: %v", err)
	}
}

// TestPrometheusRule: each metrics.perFRS mode renders its alerts, every
// expression selects this installation's job and reads only series a
// running fleet serves, and Prometheus' own templates survive Helm.
func TestPrometheusRule(t *testing.T) {
	known := readSeriesList(t)
	for _, tc := range []struct {
		mode   string
		alerts []string
		// overTarget is a series the over-target alert must read.
		overTarget string
	}{
		{"off", []string{"ReplicafedNoRaftLeader", "ReplicafedMemberUnreachable"}, ""},
		{"summary", []string{"ReplicafedNoRaftLeader", "ReplicafedMemberUnreachable", "ReplicafedFederatedReplicaSetNotAvailable", "ReplicafedReplicasOverTarget"}, "replicafed_frs_replicas"},
		{"members", []string{"ReplicafedNoRaftLeader", "ReplicafedMemberUnreachable", "ReplicafedFederatedReplicaSetNotAvailable", "ReplicafedReplicasOverTarget"}, "replicafed_frs_member_target_replicas"},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			m := template(t, "--set", "metrics.prometheusRule.enabled=true", "--set", "metrics.perFRS="+tc.mode,
				"--set", "metrics.prometheusRule.alertLabels.team=platform")
			cfg, err := m.loadConfig(t, fullname+"-0")
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Metrics.PerFRS != tc.mode {
				t.Errorf("config metrics.perFRS = %q, want %q", cfg.Metrics.PerFRS, tc.mode)
			}
			rules := field(t, monitoringObject(t, m, "PrometheusRule"), "spec", "groups", 0, "rules").([]any)
			var alerts []string
			for _, r := range rules {
				name := field(t, r, "alert").(string)
				alerts = append(alerts, name)
				expr := field(t, r, "expr").(string)
				checkSeries(t, name, expr, known)
				if n, sel := len(seriesIn(expr)), strings.Count(expr, `{job="`+fullname+`-metrics"}`); sel != n {
					t.Errorf("%s: %d series read, %d with the job selector: %s", name, n, sel, expr)
				}
				if field(t, r, "for") == nil || field(t, r, "labels", "severity") == nil || field(t, r, "labels", "team") != "platform" {
					t.Errorf("%s: for %v labels %v", name, field(t, r, "for"), field(t, r, "labels"))
				}
				if name == "ReplicafedReplicasOverTarget" && !slices.Contains(seriesIn(expr), tc.overTarget) {
					t.Errorf("over-target alert in mode %s does not read %s: %s", tc.mode, tc.overTarget, expr)
				}
				if name == "ReplicafedMemberUnreachable" && !strings.Contains(field(t, r, "annotations", "summary").(string), "{{ $labels.cluster }}") {
					t.Errorf("summary lost its Prometheus template: %v", field(t, r, "annotations", "summary"))
				}
			}
			if !slices.Equal(alerts, tc.alerts) {
				t.Errorf("alerts %v, want %v", alerts, tc.alerts)
			}
		})
	}
	m := template(t, "--set", "metrics.prometheusRule.enabled=true", "--set", `metrics.prometheusRule.selector=namespace="replicafed"\,service="rf"`)
	expr := field(t, monitoringObject(t, m, "PrometheusRule"), "spec", "groups", 0, "rules", 0, "expr").(string)
	if !strings.Contains(expr, `replicafed_raft_leader{namespace="replicafed",service="rf"}`) {
		t.Errorf("custom selector not used: %s", expr)
	}
	if _, err := runHelm(t, "template", release, chartDir, "--namespace", namespace, "--set", "config.metrics.perFRS=members"); err == nil || !strings.Contains(err.Error(), "set metrics.perFRS instead") {
		t.Errorf("config.metrics.perFRS override: %v", err)
	}
}

// TestDashboard: the dashboard ConfigMap carries the sidecar's label, holds
// valid dashboard JSON whose every query reads only served series, and
// can live in Grafana's namespace.
func TestDashboard(t *testing.T) {
	known := readSeriesList(t)
	m := template(t, "--set", "metrics.dashboard.enabled=true", "--set", "metrics.dashboard.namespace=grafana")
	if len(m.dashboards) != 1 {
		t.Fatalf("%d dashboard ConfigMaps", len(m.dashboards))
	}
	cm := m.dashboards[0]
	if cm.Namespace != "grafana" || cm.Labels["grafana_dashboard"] != "1" {
		t.Errorf("dashboard ConfigMap %s/%s labels %v", cm.Namespace, cm.Name, cm.Labels)
	}
	if m.configMap == nil || m.configMap.Name != fullname+"-config" {
		t.Errorf("the config ConfigMap is missing beside the dashboard")
	}
	var dash struct {
		UID    string `json:"uid"`
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name  string `json:"name"`
				Query any    `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal([]byte(cm.Data["replicafed.json"]), &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.UID == "" || dash.Title == "" {
		t.Errorf("uid %q title %q", dash.UID, dash.Title)
	}
	queries := 0
	used := map[string]bool{}
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			queries++
			checkSeries(t, "panel "+p.Title, tg.Expr, known)
			if !strings.Contains(tg.Expr, `job=~"$job"`) {
				t.Errorf("panel %q: query ignores the job variable: %s", p.Title, tg.Expr)
			}
			for _, n := range seriesIn(tg.Expr) {
				used[n] = true
			}
		}
	}
	for _, v := range dash.Templating.List {
		if q, ok := v.Query.(map[string]any); ok {
			for _, n := range seriesIn(q["query"].(string)) {
				if !slices.Contains(known, n) {
					t.Errorf("variable %s reads %s, not a served series", v.Name, n)
				}
			}
		}
	}
	if queries < 10 {
		t.Errorf("only %d queries", queries)
	}
	// The dashboard shows every listed series, so the list holds nothing
	// the chart does not use.
	for _, n := range known {
		if !used[n] {
			t.Errorf("series %s is listed but no panel shows it", n)
		}
	}
}

// TestLeaderLeaseRBAC: replicafed may get and update only its own leader
// Lease, create Leases only in the release namespace, and the config names
// the same Lease; with leaderLease off there is neither.
func TestLeaderLeaseRBAC(t *testing.T) {
	m := template(t, "--set", "leaderLease.renewInterval=10s")
	role := findNamed(m.roles, fullname+"-leader-lease")
	if role == nil {
		t.Fatal("no leader Lease Role")
	}
	if role.Namespace != namespace {
		t.Errorf("Role in %q, want the release namespace", role.Namespace)
	}
	lease := fullname + "-leader"
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{lease}, Verbs: []string{"get", "update"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
	}
	if diff := cmp.Diff(want, role.Rules); diff != "" {
		t.Errorf("leader Lease rules (-want +got):\n%s", diff)
	}
	var bound bool
	for _, b := range m.roleBindings {
		if b.RoleRef.Kind == "Role" && b.RoleRef.Name == role.Name && b.Namespace == namespace &&
			cmp.Equal(b.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: m.serviceAccount.Name, Namespace: namespace}}) {
			bound = true
		}
	}
	if !bound {
		t.Error("the leader Lease Role is not bound to replicafed's ServiceAccount")
	}
	cfg, err := m.loadConfig(t, fullname+"-1")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hub.LeaderLease.Name != lease || cfg.Hub.Namespace != namespace || cfg.Hub.LeaderLease.RenewInterval.String() != "10s" {
		t.Errorf("config leader Lease %s/%s every %s", cfg.Hub.Namespace, cfg.Hub.LeaderLease.Name, cfg.Hub.LeaderLease.RenewInterval)
	}

	off := template(t, "--set", "leaderLease.enabled=false")
	for _, r := range off.roles {
		if r.Name == fullname+"-leader-lease" {
			t.Error("leaderLease off still renders its Role")
		}
	}
	cfg, err = off.loadConfig(t, fullname+"-0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Hub.LeaderLease.Name != "" {
		t.Errorf("leaderLease off: config names Lease %q", cfg.Hub.LeaderLease.Name)
	}
}

// TestMonitoringSchema: the schema refuses bad monitoring values before
// anything renders.
func TestMonitoringSchema(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flags []string
	}{
		{"unknown perFRS", []string{"--set", "metrics.perFRS=all"}},
		{"bad scrape interval", []string{"--set", "metrics.serviceMonitor.interval=30 seconds"}},
		{"bad alert duration", []string{"--set", "metrics.prometheusRule.for.noLeader=1.5m"}},
		{"unknown rule key", []string{"--set", "metrics.prometheusRule.severity=page"}},
		{"bad renew interval", []string{"--set", "leaderLease.renewInterval=often"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runHelm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, tc.flags...)...)
			if err == nil || !strings.Contains(err.Error(), "schema") {
				t.Errorf("want a schema error, got %v", err)
			}
		})
	}
}

// findNamed is the rendered object called name, or nil when there is none.
func findNamed[T interface{ GetName() string }](objs []T, name string) T {
	var found T
	for _, o := range objs {
		if o.GetName() == name {
			found = o
		}
	}
	return found
}
