package server

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/client-go/rest"

	"github.com/replicafed/replicafed/api/v1alpha1"
	"github.com/replicafed/replicafed/config"
	"github.com/replicafed/replicafed/controller/engine"
	"github.com/replicafed/replicafed/federation/health"
	"github.com/replicafed/replicafed/federation/registry"
)

func TestHealthOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   config.HealthProbe
		want health.Options
	}{
		{"zero", config.HealthProbe{}, health.Options{}},
		{"every field", config.HealthProbe{Interval: 10 * time.Second, Timeout: 3 * time.Second, FailureThreshold: 4, SuccessThreshold: 2},
			health.Options{Interval: 10 * time.Second, Timeout: 3 * time.Second, Thresholds: health.Thresholds{Failure: 4, Success: 2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, healthOptions(tc.in)); diff != "" {
				t.Errorf("healthOptions(%+v) (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestMetricsWarnings: the plain-HTTP endpoint is warned about at start,
// and profiles on it once more; a secure or disabled endpoint is not.
func TestMetricsWarnings(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in       config.Metrics
		warnings int
		handlers bool
	}{
		{"secure", config.Metrics{BindAddress: ":8080", Secure: true}, 0, false},
		{"secure with profiles", config.Metrics{BindAddress: ":8080", Secure: true, Profiling: true}, 0, true},
		{"plain", config.Metrics{BindAddress: ":8080"}, 1, false},
		{"plain with profiles", config.Metrics{BindAddress: ":8080", Profiling: true}, 2, true},
		{"disabled", config.Metrics{BindAddress: "0"}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := metricsWarnings(tc.in); len(got) != tc.warnings {
				t.Errorf("metricsWarnings(%+v) = %q, want %d warnings", tc.in, got, tc.warnings)
			}
			o := metricsOptions(&config.Config{Metrics: tc.in})
			if _, ok := o.ExtraHandlers["/debug/pprof/"]; ok != tc.handlers {
				t.Errorf("profile handlers served: %t, want %t", ok, tc.handlers)
			}
		})
	}
}

// roundTripFunc answers every request that reaches the transport.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// recordingLease refuses every write and records the deadlines it was
// asked for.
type recordingLease struct{ askedFor []time.Duration }

func (l *recordingLease) WriteLease(d time.Duration) bool {
	l.askedFor = append(l.askedFor, d)
	return false
}

func (l *recordingLease) LeaseCovers(time.Duration) bool { return false }

func TestRegistryOptions(t *testing.T) {
	monitor := health.NewMonitor(health.Options{})
	taint := config.StaticCluster{Name: "b", Kubeconfig: "/b", Taints: []config.StaticTaint{{Key: "k", Value: "v", Effect: v1alpha1.TaintNoSchedule}}}
	for _, tc := range []struct {
		name       string
		cfg        config.Config
		wantStatic []registry.Static
		wantQPS    float32
	}{
		{
			name: "secrets only, no member rate limit",
			cfg: config.Config{
				Clusters: config.Clusters{SecretNamespace: "ns", SecretSelector: "member=true", SecretKey: "kubeconfig",
					Credentials: config.Credentials{AllowExec: true, ExpiryWarning: time.Hour}},
				Controller: config.Controller{MaxCachedPodsPerMember: 100, MemberWriteTimeout: 5 * time.Second},
			},
			wantQPS: -1,
		},
		{
			name: "static members and a member rate limit",
			cfg: config.Config{
				Clusters:   config.Clusters{Static: []config.StaticCluster{{Name: "a", Kubeconfig: "/a", Labels: map[string]string{"zone": "x"}}, taint}},
				Controller: config.Controller{MemberRateLimit: true, MemberQPS: 50, MemberBurst: 100, MemberWriteTimeout: 7 * time.Second},
			},
			wantStatic: []registry.Static{
				{Name: "a", Kubeconfig: "/a", Labels: map[string]string{"zone": "x"}},
				{Name: "b", Kubeconfig: "/b", Taints: taint.ClusterTaints()},
			},
			wantQPS: 50,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lease := &recordingLease{}
			got := registryOptions(&tc.cfg, nil, monitor, lease)

			c := tc.cfg.Clusters
			if got.SecretNamespace != c.SecretNamespace || got.SecretSelector != c.SecretSelector || got.SecretKey != c.SecretKey {
				t.Errorf("secret options = %q %q %q, want %q %q %q", got.SecretNamespace, got.SecretSelector, got.SecretKey, c.SecretNamespace, c.SecretSelector, c.SecretKey)
			}
			if got.Health != monitor {
				t.Error("health monitor not passed on")
			}
			if want := credentialPolicy(c.Credentials); got.Credentials != want || got.ExpiryWarning != c.Credentials.ExpiryWarning {
				t.Errorf("credentials = %+v, %v; want %+v, %v", got.Credentials, got.ExpiryWarning, want, c.Credentials.ExpiryWarning)
			}
			if got.MaxCachedPods != tc.cfg.Controller.MaxCachedPodsPerMember {
				t.Errorf("MaxCachedPods = %d, want %d", got.MaxCachedPods, tc.cfg.Controller.MaxCachedPodsPerMember)
			}
			if diff := cmp.Diff(tc.wantStatic, got.Static); diff != "" {
				t.Errorf("static (-want +got):\n%s", diff)
			}

			// The REST options set the member rate limit and fence pod
			// writes on the write lease, asked with the write timeout.
			rc := &rest.Config{}
			for _, o := range got.RESTOptions {
				if err := o(rc); err != nil {
					t.Fatal(err)
				}
			}
			if rc.QPS != tc.wantQPS || rc.UserAgent != "replicafed" {
				t.Errorf("member client QPS %v, user agent %q; want %v, replicafed", rc.QPS, rc.UserAgent, tc.wantQPS)
			}
			if rc.WrapTransport == nil {
				t.Fatal("no write fence on the member transport")
			}
			sent := false
			rt := rc.WrapTransport(roundTripFunc(func(*http.Request) (*http.Response, error) { sent = true; return nil, errors.New("unreachable") }))
			req, _ := http.NewRequest(http.MethodPost, "https://member/api/v1/namespaces/x/pods", nil)
			if _, err := rt.RoundTrip(req); !errors.Is(err, engine.ErrNotSent) || sent {
				t.Errorf("pod create without the write lease: err %v, sent %v; want engine.ErrNotSent, not sent", err, sent)
			}
			if diff := cmp.Diff([]time.Duration{tc.cfg.Controller.MemberWriteTimeout}, lease.askedFor); diff != "" {
				t.Errorf("write lease asked for (-want +got):\n%s", diff)
			}
		})
	}
}

// coveringLease permits every write and covers renewals, recording the
// steps it was asked to cover; after answerAfter renewals it lets the
// member answer.
type coveringLease struct {
	mu          sync.Mutex
	asked       []time.Duration
	answerAfter int
	answer      chan struct{}
}

func (l *coveringLease) WriteLease(time.Duration) bool { return true }

func (l *coveringLease) LeaseCovers(d time.Duration) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.asked = append(l.asked, d)
	if len(l.asked) == l.answerAfter {
		close(l.answer)
	}
	return true
}

// TestMemberWriteFenceRenews: a member write unanswered at
// controller.memberWriteTimeout asks the raft lease to cover a quarter of
// it at a time, and is answered, not cut.
func TestMemberWriteFenceRenews(t *testing.T) {
	ctl := config.Controller{MemberWriteTimeout: 40 * time.Millisecond, MemberWriteMaxDuration: time.Minute}
	lease := &coveringLease{answerAfter: 3, answer: make(chan struct{})}
	rc := &rest.Config{}
	if err := memberWriteFence(ctl, lease)(rc); err != nil {
		t.Fatal(err)
	}
	rt := rc.WrapTransport(roundTripFunc(func(r *http.Request) (*http.Response, error) {
		select {
		case <-lease.answer:
			return &http.Response{StatusCode: http.StatusCreated, Body: http.NoBody}, nil
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "https://member/api/v1/namespaces/x/pods", nil)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatalf("write renewed while the lease covers it: %v", err)
	}
	resp.Body.Close()
	lease.mu.Lock()
	defer lease.mu.Unlock()
	if diff := cmp.Diff([]time.Duration{10 * time.Millisecond, 10 * time.Millisecond, 10 * time.Millisecond}, lease.asked); diff != "" {
		t.Errorf("lease asked to cover (-want +got):\n%s", diff)
	}
}
