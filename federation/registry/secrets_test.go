package registry

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cluster"

	"github.com/replicafed/replicafed/federation/registry/credentials"
)

// testJWT returns an unsigned JWT expiring at exp.
func testJWT(exp time.Time) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"none"}`)) + "." + enc([]byte(`{"exp":`+strconv.FormatInt(exp.Unix(), 10)+`}`)) + ".c2ln"
}

// kubeconfigYAML returns a kubeconfig for server with the given user.
func kubeconfigYAML(t *testing.T, server string, user *clientcmdapi.AuthInfo) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["m"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: []byte("CA")}
	kc.AuthInfos["u"] = user
	kc.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "u"}
	kc.CurrentContext = "m"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestJudge(t *testing.T) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 0, time.UTC)
	p, err := NewProvider(Options{SecretNamespace: "fleet", SecretSelector: "member=true", SecretKey: "kubeconfig",
		Static:      []Static{{Name: "static-a"}},
		RESTOptions: []func(*rest.Config) error{func(c *rest.Config) error { c.UserAgent = "replicafed"; return nil }}})
	if err != nil {
		t.Fatal(err)
	}
	good := kubeconfigYAML(t, "https://m:6443", &clientcmdapi.AuthInfo{Token: testJWT(exp)})
	for _, tc := range []struct {
		name, secret string
		data         []byte
		condition    string
		reason       string
		message      string
	}{
		{"inline token", "a", good, "", "", ""},
		{"static name", "static-a", good, ConditionNameConflict, ReasonStaticMember,
			"kubeconfig Secret fleet/static-a has the name of a static member (clusters.static); the static entry is used and the Secret is ignored: rename the Secret"},
		{"no data", "a", nil, ConditionCredentialsRefused, ReasonInvalidKubeconfig, `kubeconfig Secret fleet/a has no data key "kubeconfig"`},
		{"not a kubeconfig", "a", []byte("{{{"), ConditionCredentialsRefused, ReasonInvalidKubeconfig, "kubeconfig Secret fleet/a: "},
		{"no current context", "a", []byte("apiVersion: v1\nkind: Config\n"), ConditionCredentialsRefused, ReasonInvalidKubeconfig, "kubeconfig Secret fleet/a: "},
		{"exec", "a", kubeconfigYAML(t, "https://m:6443", &clientcmdapi.AuthInfo{Exec: &clientcmdapi.ExecConfig{Command: "/bin/sh", APIVersion: "client.authentication.k8s.io/v1"}}),
			ConditionCredentialsRefused, ReasonFieldNotAllowed, "users[u].exec is not allowed: set clusters.credentials.allowExec to permit it"},
		{"token file", "a", kubeconfigYAML(t, "https://m:6443", &clientcmdapi.AuthInfo{TokenFile: "/etc/hostname"}),
			ConditionCredentialsRefused, ReasonFieldNotAllowed, "users[u].tokenFile is not allowed: set clusters.credentials.allowFiles to permit it"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, rc := p.judge(tc.secret, tc.data)
			if tc.condition == "" {
				if st.refused != nil || rc == nil {
					t.Fatalf("refused: %+v", st.refused)
				}
				if rc.BearerToken == "" || rc.Host != "https://m:6443" || rc.UserAgent != "replicafed" {
					t.Errorf("client configuration %+v: want the token, the server and the REST options applied", rc)
				}
				if !st.hasExpiry || !st.expiry.At.Equal(exp) || st.expiry.Source != credentials.SourceToken {
					t.Errorf("expiry %+v (%v), want %v from the token", st.expiry, st.hasExpiry, exp)
				}
				return
			}
			if rc != nil || st.refused == nil {
				t.Fatalf("accepted: %+v", rc)
			}
			if st.refused.condition != tc.condition || st.refused.reason != tc.reason || !strings.HasPrefix(st.refused.message, tc.message) {
				t.Errorf("refusal %+v, want %s/%s %q", st.refused, tc.condition, tc.reason, tc.message)
			}
		})
	}
}

func TestConditions(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	p, err := NewProvider(Options{SecretSelector: "member=true"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Static: []Static{{Name: "static-a"}}, Clock: clk, ExpiryWarning: 30 * 24 * time.Hour}, p)
	p.states["refused"] = secretState{refused: &refusal{ConditionCredentialsRefused, ReasonFieldNotAllowed, "users[u].exec is not allowed: set clusters.credentials.allowExec to permit it"}}
	p.states["static-a"] = secretState{refused: &refusal{ConditionNameConflict, ReasonStaticMember, "kubeconfig Secret fleet/static-a has the name of a static member"}}
	p.states["fresh"] = secretState{hasExpiry: true, expiry: credentials.Expiration{At: now.Add(365 * 24 * time.Hour), Source: credentials.SourceToken}}
	p.states["soon"] = secretState{hasExpiry: true, expiry: credentials.Expiration{At: now.Add(10 * 24 * time.Hour), Source: credentials.SourceToken}}
	p.states["opaque"] = secretState{}
	r.staticExpiry["static-a"] = credentials.Expiration{At: now.Add(-time.Hour), Source: credentials.SourceCertificate}

	for _, tc := range []struct {
		name    string
		want    []metav1.Condition
		problem string
	}{
		{"refused", []metav1.Condition{{Type: ConditionCredentialsRefused, Status: metav1.ConditionTrue, Reason: ReasonFieldNotAllowed,
			Message: "users[u].exec is not allowed: set clusters.credentials.allowExec to permit it"}},
			"CredentialsRefused: users[u].exec is not allowed: set clusters.credentials.allowExec to permit it"},
		{"static-a", []metav1.Condition{
			{Type: ConditionNameConflict, Status: metav1.ConditionTrue, Reason: ReasonStaticMember, Message: "kubeconfig Secret fleet/static-a has the name of a static member"},
			{Type: ConditionCredentialsExpiring, Status: metav1.ConditionTrue, Reason: credentials.ReasonExpired,
				Message: "the client certificate expired at 2026-11-25T11:00:00Z; rotate it (replicafed join --rotate)"}},
			"NameConflict: kubeconfig Secret fleet/static-a has the name of a static member"},
		{"fresh", []metav1.Condition{{Type: ConditionCredentialsExpiring, Status: metav1.ConditionFalse, Reason: credentials.ReasonValid,
			Message: "the token expires at 2027-11-25T12:00:00Z"}}, ""},
		{"soon", []metav1.Condition{{Type: ConditionCredentialsExpiring, Status: metav1.ConditionTrue, Reason: credentials.ReasonExpiresSoon,
			Message: "the token expires at 2026-12-05T12:00:00Z, in 10 days; rotate it (replicafed join --rotate)"}},
			"CredentialsExpiring: the token expires at 2026-12-05T12:00:00Z, in 10 days; rotate it (replicafed join --rotate)"},
		{"opaque", nil, ""},
		{"unknown", nil, ""},
	} {
		got := r.Conditions(tc.name)
		if len(got) != len(tc.want) {
			t.Errorf("%s: conditions %+v, want %+v", tc.name, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: condition %d = %+v, want %+v", tc.name, i, got[i], tc.want[i])
			}
		}
		if p := r.SecretProblem(context.Background(), tc.name); p != tc.problem {
			t.Errorf("%s: problem %q, want %q", tc.name, p, tc.problem)
		}
	}

	// The warning follows the clock: ten days later "fresh" is still fine,
	// and 340 days later it warns.
	clk.SetTime(now.Add(340 * 24 * time.Hour))
	if c := r.Conditions("fresh"); len(c) != 1 || c[0].Status != metav1.ConditionTrue || c[0].Reason != credentials.ReasonExpiresSoon {
		t.Errorf("fresh after 340 days: %+v", c)
	}
}

func TestExpiryCollector(t *testing.T) {
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	p, err := NewProvider(Options{SecretSelector: "member=true"})
	if err != nil {
		t.Fatal(err)
	}
	r := New(Options{Static: []Static{{Name: "static-a"}}, Clock: clocktesting.NewFakePassiveClock(now)}, p)
	p.states["a"] = secretState{hasExpiry: true, expiry: credentials.Expiration{At: now.Add(time.Hour)}}
	p.states["refused"] = secretState{hasExpiry: true, refused: &refusal{}}
	p.states["opaque"] = secretState{}
	r.staticExpiry["static-a"] = credentials.Expiration{At: now.Add(-90 * time.Second)}

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(ExpiryCollector{Registry: r})
	const head = `# HELP replicafed_member_credentials_expiry_seconds Seconds until a member's inline token or client certificate expires (negative once expired), by cluster. Absent for members whose credentials do not say (opaque tokens, files, plugins) and for members that are gone.
# TYPE replicafed_member_credentials_expiry_seconds gauge
`
	want := head + `replicafed_member_credentials_expiry_seconds{cluster="a"} 3600
replicafed_member_credentials_expiry_seconds{cluster="static-a"} -90
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	// The Secret goes: so does its series.
	p.forget("a")
	want = head + `replicafed_member_credentials_expiry_seconds{cluster="static-a"} -90
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// stubCluster stands in for a member's cluster where no method is called.
type stubCluster struct{ cluster.Cluster }

// A member that leaves takes its entries in every map of the registry with
// it, refreshed engagements included.
func TestMemberLeavesNothingBehind(t *testing.T) {
	r := New(Options{}, nil)
	left := make(chan string, 4)
	r.OnChange(func(name string, joined bool) {
		if !joined {
			left <- name
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	first := &stubCluster{}
	if err := r.Engage(ctx, "a", first); err != nil {
		t.Fatal(err)
	}
	// A refreshed engagement (Refresh's bookkeeping) under the first one.
	refreshed := &stubCluster{}
	rctx, rcancel := context.WithCancel(ctx)
	r.mu.Lock()
	r.refreshing["a"] = refreshed
	r.mu.Unlock()
	if err := r.Engage(rctx, "a", refreshed); err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	delete(r.refreshing, "a")
	r.current["a"] = rcancel
	r.mu.Unlock()
	if m, ok := r.Get("a"); !ok || m.Cluster != refreshed {
		t.Fatalf("member a = %+v, %v; want the refreshed cluster", m, ok)
	}

	cancel()
	select {
	case name := <-left:
		if name != "a" {
			t.Fatalf("left: %s", name)
		}
	case <-time.After(time.Minute):
		t.Fatal("no leave notification")
	}
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		r.mu.RLock()
		defer r.mu.RUnlock()
		return len(r.members)+len(r.roots)+len(r.current)+len(r.refreshing)+len(r.staticStop) == 0, nil
	})
	if err != nil {
		r.mu.RLock()
		defer r.mu.RUnlock()
		t.Fatalf("left behind: members %v, roots %v, current %v, refreshing %v, staticStop %v", r.members, r.roots, r.current, r.refreshing, r.staticStop)
	}
	if rctx.Err() == nil {
		t.Error("the refreshed engagement's context outlived the member")
	}
}
