package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/e2e/fleet"
	"github.com/replicafed/replicafed/internal/test/serieslist"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testpki"
)

// seriesList names every series the chart's alerts and dashboard use
// (charts tests check the chart against it); this test checks it against a
// real scrape.
const seriesList = "../charts/testdata/series.txt"

// leaseName is the default hub.leaderLease.name.
const leaseName = "replicafed-leader"

// TestMetrics scrapes the replicas' metrics endpoints the way the chart's
// ServiceMonitor does: HTTPS verified against the raft CA, with the token of
// a ServiceAccount bound to a role allowing get on /metrics. The raft leader
// serves raft's own series and the per-member series of a
// FederatedReplicaSet this test creates (gone once it is deleted); a
// follower serves raft's series but no per-FRS ones; every name of the
// chart's series list is served. A scrape without a token, or with one the
// hub does not authorize, is refused. `kubectl get lease` names the raft
// leader.
func TestMetrics(t *testing.T) {
	e := newEnv(t, "e2e-metrics")
	f := e.f
	scraper, nobody := metricsTokens(t, f)

	for _, r := range f.Replicas {
		if !r.Running() {
			continue
		}
		for _, tc := range []struct {
			name, token string
			want        int
		}{{"no token", "", http.StatusUnauthorized}, {"unauthorized token", nobody, http.StatusForbidden}} {
			code, _, err := scrape(r, tc.token)
			if err != nil || code != tc.want {
				t.Errorf("%s: scrape with %s: got %d %v, want %d", r.ID, tc.name, code, err, tc.want)
			}
		}
	}

	e.create(frsSpec{name: "web", replicas: 4, clusters: []v1alpha1.ClusterPreference{pref(memberA, 1, -1), pref(memberB, 1, -1)}})
	e.waitSplit("web", split{memberA: 2, memberB: 2})

	want := map[string]float64{}
	for _, m := range []string{memberA, memberB} {
		l := fmt.Sprintf(`{cluster=%q,name="web",namespace=%q}`, m, e.ns)
		want["replicafed_frs_member_target_replicas"+l] = 2
		want["replicafed_frs_member_ready_replicas"+l] = 2
	}
	frsLabels := fmt.Sprintf(`{name="web",namespace=%q}`, e.ns)
	want["replicafed_frs_spec_replicas"+frsLabels] = 4
	want["replicafed_frs_available_replicas"+frsLabels] = 4
	names, err := serieslist.Read(seriesList)
	if err != nil {
		t.Fatal(err)
	}

	var leaderID string
	var leaderScrape map[string]*dto.MetricFamily
	e.poll("the leader's per-FRS series and every listed series", func(ctx context.Context) (bool, error) {
		l := f.Leader(ctx)
		if l == nil {
			return false, nil
		}
		fams, err := scrapeFamilies(l, scraper)
		if err != nil {
			t.Logf("scraping %s: %v", l.ID, err)
			return false, nil
		}
		got := values(fams, "replicafed_frs_")
		for k, v := range want {
			if got[k] != v {
				t.Logf("%s: %s = %v, want %v", l.ID, k, got[k], v)
				return false, nil
			}
		}
		if missing := missingFamilies(fams, names); len(missing) > 0 {
			t.Logf("%s lacks listed series %v", l.ID, missing)
			return false, nil
		}
		leaderID, leaderScrape = l.ID, fams
		return true, nil
	})
	logExcerpt(t, leaderID, leaderScrape, e.ns)

	for _, r := range f.Replicas {
		if r.ID == leaderID || !r.Running() {
			continue
		}
		fams, err := scrapeFamilies(r, scraper)
		if err != nil {
			t.Errorf("scraping follower %s: %v", r.ID, err)
			continue
		}
		if fams["raft_state_follower"] == nil || fams["raft_rpc_appendEntries"] == nil {
			t.Errorf("follower %s lacks raft_state_follower or raft_rpc_appendEntries", r.ID)
		}
		for name := range fams {
			if strings.HasPrefix(name, "replicafed_frs_") && len(fams[name].Metric) > 0 {
				t.Errorf("follower %s serves %s (only the leader exports per-FRS series)", r.ID, name)
			}
		}
	}

	// The Lease names the raft leader's server ID, as the real kubectl shows
	// it, and the leader keeps renewing it.
	kubectl := kubectlCmd(t, f)
	var out, leading string
	ok := tryPoll(waitTimeout, func(ctx context.Context) (bool, error) {
		l := f.Leader(ctx)
		if l == nil {
			return false, nil
		}
		// The raft server ID: the replica's raft.id and its data
		// directory's incarnation.
		st, err := l.Status(ctx)
		if err != nil || !st.Leading || !strings.HasPrefix(st.ID, l.ID+"-") {
			return false, nil
		}
		leading = st.ID
		b, err := kubectl(ctx, "get", "lease", "-n", fleet.Namespace)
		if err != nil {
			t.Logf("kubectl get lease: %v: %s", err, b)
			return false, nil
		}
		out = string(b)
		for _, line := range strings.Split(out, "\n") {
			if fs := strings.Fields(line); len(fs) >= 2 && fs[0] == leaseName && fs[1] == st.ID {
				return true, nil
			}
		}
		return false, nil
	})
	if !ok {
		t.Fatalf("kubectl get lease does not show the raft leader %s within %s; last output:\n%s", leading, waitTimeout, out)
	}
	t.Logf("$ kubectl get lease -n %s\n%s", fleet.Namespace, out)
	renewed := func(ctx context.Context) string {
		b, err := kubectl(ctx, "get", "lease", leaseName, "-n", fleet.Namespace, "-o", "jsonpath={.spec.renewTime}")
		if err != nil {
			return ""
		}
		return string(b)
	}
	if b, err := kubectl(context.Background(), "get", "lease", leaseName, "-n", fleet.Namespace, "-o", "yaml"); err == nil {
		t.Logf("$ kubectl get lease %s -n %s -o yaml\n%s", leaseName, fleet.Namespace, b)
	}
	first := renewed(context.Background())
	e.poll("the leader to renew the Lease", func(ctx context.Context) (bool, error) {
		r := renewed(ctx)
		return r != "" && r != first, nil
	})

	// Deleting the FederatedReplicaSet removes its series.
	e.deleteAndWait("web")
	e.poll("the per-FRS series of the deleted FederatedReplicaSet to go", func(ctx context.Context) (bool, error) {
		l := f.Leader(ctx)
		if l == nil {
			return false, nil
		}
		fams, err := scrapeFamilies(l, scraper)
		if err != nil {
			return false, nil
		}
		for k := range values(fams, "replicafed_frs_") {
			if strings.Contains(k, fmt.Sprintf("namespace=%q", e.ns)) {
				return false, nil
			}
		}
		return true, nil
	})
}

// metricsTokens returns the tokens of two ServiceAccounts in the hub: one
// bound to a role allowing get on /metrics (as the chart's
// <fullname>-metrics-reader), one with no role at all.
func metricsTokens(t *testing.T, f *fleet.Fleet) (scraper, nobody string) {
	t.Helper()
	ctx := context.Background()
	cs, err := kubernetes.NewForConfig(f.Hub.Config())
	if err != nil {
		t.Fatal(err)
	}
	const ns = fleet.Namespace
	token := func(sa string) string {
		t.Helper()
		_, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating ServiceAccount %s: %v", sa, err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("requesting a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}},
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "e2e-scraper", Namespace: ns}},
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return token("e2e-scraper"), token("e2e-nobody")
}

// scrape GETs a replica's /metrics, verifying its certificate against the
// raft CA, with token as bearer when set.
func scrape(r *fleet.Replica, token string) (int, []byte, error) {
	tlsCfg, err := testpki.ClientTLS(testpki.Files{CAFile: r.CAFile})
	if err != nil {
		return 0, nil, err
	}
	tlsCfg.ServerName = "127.0.0.1"
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsCfg}}
	req, err := http.NewRequest(http.MethodGet, "https://"+r.MetricsAddress+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// scrapeFamilies scrapes with token and parses the text format.
func scrapeFamilies(r *fleet.Replica, token string) (map[string]*dto.MetricFamily, error) {
	code, body, err := scrape(r, token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("scrape of %s: HTTP %d: %.200s", r.ID, code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		return nil, fmt.Errorf("parsing the scrape of %s: %w", r.ID, err)
	}
	return fams, nil
}

// values flattens the gauge and counter series of families named with
// prefix to `name{label="value",...}` -> value, labels sorted by name.
func values(fams map[string]*dto.MetricFamily, prefix string) map[string]float64 {
	out := map[string]float64{}
	for name, mf := range fams {
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		for _, m := range mf.Metric {
			var ls []string
			for _, l := range m.Label {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			slices.Sort(ls)
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[name+"{"+strings.Join(ls, ",")+"}"] = v
		}
	}
	return out
}

// missingFamilies returns the names not served with at least one observed
// (non-zero) series: some raft series are declared at zero from start-up.
func missingFamilies(fams map[string]*dto.MetricFamily, names []string) []string {
	var missing []string
	for _, n := range names {
		observed := false
		if mf := fams[n]; mf != nil {
			for _, m := range mf.Metric {
				if m.GetGauge().GetValue() != 0 || m.GetCounter().GetValue() > 0 ||
					m.GetSummary().GetSampleCount() > 0 || m.GetHistogram().GetSampleCount() > 0 {
					observed = true
				}
			}
		}
		if !observed {
			missing = append(missing, n)
		}
	}
	return missing
}

// logExcerpt logs a few lines of the leader's scrape for docs/observability.md.
func logExcerpt(t *testing.T, id string, fams map[string]*dto.MetricFamily, ns string) {
	var b strings.Builder
	for _, name := range []string{"replicafed_raft_leader", "raft_state_leader", "raft_commitTime", "raft_leader_lastContact", "raft_fsm_apply",
		"replicafed_member_healthy", "replicafed_frs_spec_replicas", "replicafed_frs_ready_replicas", "replicafed_frs_member_target_replicas", "replicafed_frs_member_ready_replicas"} {
		mf := fams[name]
		if mf == nil {
			continue
		}
		one := &dto.MetricFamily{Name: mf.Name, Help: mf.Help, Type: mf.Type}
		for _, m := range mf.Metric {
			keep := true
			for _, l := range m.Label {
				if l.GetName() == "namespace" && l.GetValue() != ns {
					keep = false
				}
			}
			if keep {
				one.Metric = append(one.Metric, m)
			}
		}
		if _, err := expfmt.MetricFamilyToText(&b, one); err != nil {
			t.Logf("formatting %s: %v", name, err)
		}
	}
	t.Logf("scrape of the leader %s (excerpt):\n%s", id, b.String())
	var raft []string
	for name := range fams {
		if strings.HasPrefix(name, "raft_") {
			raft = append(raft, name)
		}
	}
	slices.Sort(raft)
	t.Logf("raft families on the leader %s: %s", id, strings.Join(raft, " "))
}

// kubectlCmd returns a runner of bin/kubectl against the hub, with its own
// discovery cache, each call bounded by 30 seconds.
func kubectlCmd(t *testing.T, f *fleet.Fleet) func(ctx context.Context, args ...string) ([]byte, error) {
	t.Helper()
	dir, err := testcluster.FindBinDir()
	if err != nil {
		t.Fatalf("finding bin dir: %v", err)
	}
	cache := t.TempDir()
	return func(ctx context.Context, args ...string) ([]byte, error) {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(dir, "kubectl"), append([]string{"--kubeconfig", f.Hub.Kubeconfig()}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECACHEDIR="+cache)
		return cmd.CombinedOutput()
	}
}
