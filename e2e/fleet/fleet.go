package fleet

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/replicafed/replicafed/api/crds"
	"github.com/replicafed/replicafed/api/policy"
	"github.com/replicafed/replicafed/internal/kubescheme"
	"github.com/replicafed/replicafed/internal/test/faultproxy"
	"github.com/replicafed/replicafed/internal/test/hubpolicy"
	"github.com/replicafed/replicafed/internal/test/testcluster"
	"github.com/replicafed/replicafed/internal/test/testpki"
)

// Namespace is where replicafed runs in the hub.
const Namespace = "replicafed-system"

// Options describe a fleet.
type Options struct {
	// Members are the member names; default member-a, member-b.
	Members []string
	// MemberLabels are each member's labels, by name.
	MemberLabels map[string]map[string]string
	// Replicas is the number of replicafed processes; default 3.
	Replicas int
	// Nodes per member (default 2), each with NodeCPU/NodeMem/NodePods.
	Nodes            int
	NodeCPU, NodeMem string
	NodePods         int
	// Binary is the replicafed binary; empty builds it from this checkout.
	Binary string
	// Dir holds replica data, configs and logs; empty makes a temp dir.
	Dir string
	// Config overrides merged into every replica's configuration, as a nested map
	// (for example {"controller": {"memberRateLimit": false}}).
	Config map[string]any
	// Provider starts clusters; nil means ProviderFromEnv.
	Provider Provider
	// Log receives progress lines; nil discards them.
	Log func(format string, args ...any)
	// SecretMembers registers members as kubeconfig Secrets in the hub
	// (a ServiceAccount token each, renewable with RotateMemberCredentials)
	// instead of static config entries.
	SecretMembers bool
	// Proxied members are reached by replicafed through a fault proxy on
	// loopback (see Proxy); tests and the fleet's own clients go direct.
	Proxied []string
	// Metrics runs metrics-server in every member, so members serve
	// metrics.k8s.io (local provider only).
	Metrics bool
	// CustomMetrics names the members that also run a custom metrics
	// adapter (custom.metrics.k8s.io and external.metrics.k8s.io; local
	// provider only, with Metrics); SetCustomMetric feeds it.
	CustomMetrics []string
	// NoFinalizerPolicy leaves out the admission policy that adds the
	// cascade finalizer (the chart installs it on hubs of Kubernetes 1.36
	// and later), so replicafed adds the finalizer itself, as on older hubs.
	NoFinalizerPolicy bool
}

// Fleet is a running installation.
type Fleet struct {
	Hub      Cluster
	Members  []Cluster
	Replicas []*Replica
	// HubClient talks to the hub.
	HubClient client.Client
	// MemberClients talk to each member, by name.
	MemberClients map[string]client.Client
	Dir           string

	keepDir       bool
	secretMembers bool
	proxies       map[string]*faultproxy.Proxy
	// binary is the replicafed binary the replicas run; provider and
	// memberSpec start more members like the first ones (StartMember).
	binary     string
	provider   Provider
	memberSpec ClusterSpec
	// extra are the members StartMember started, stopped with the fleet.
	extraMu sync.Mutex
	extra   []Cluster
}

// New starts everything and returns once every replica is running and a raft
// leader is elected. Call Stop in every case after a successful New.
func New(ctx context.Context, o Options) (*Fleet, error) {
	if len(o.Members) == 0 {
		o.Members = []string{"member-a", "member-b"}
	}
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	if o.Provider == nil {
		p, err := ProviderFromEnv()
		if err != nil {
			return nil, err
		}
		o.Provider = p
	}
	f := &Fleet{MemberClients: map[string]client.Client{}, Dir: o.Dir, secretMembers: o.SecretMembers, proxies: map[string]*faultproxy.Proxy{}}
	if f.Dir == "" {
		d, err := os.MkdirTemp("", "replicafed-fleet-")
		if err != nil {
			return nil, fmt.Errorf("creating fleet directory: %w", err)
		}
		f.Dir = d
	} else {
		f.keepDir = true
	}
	if os.Getenv("REPLICAFED_KEEP_CLUSTERS") == "1" {
		f.keepDir = true
	}
	if err := f.start(ctx, o); err != nil {
		f.Stop()
		return nil, err
	}
	return f, nil
}

func (f *Fleet) start(ctx context.Context, o Options) error {
	binary := o.Binary
	if binary == "" {
		o.Log("building replicafed")
		var err error
		if binary, err = buildBinary(ctx, f.Dir); err != nil {
			return err
		}
	}
	f.binary, f.provider = binary, o.Provider
	f.memberSpec = ClusterSpec{Member: true, Nodes: o.Nodes, NodeCPU: o.NodeCPU, NodeMem: o.NodeMem, NodePods: o.NodePods, Metrics: o.Metrics}
	o.Log("starting hub and %d members", len(o.Members))
	specs := []ClusterSpec{{Name: "hub"}}
	for _, m := range o.Members {
		s := f.memberSpec
		s.Name = m
		s.CustomMetrics = slices.Contains(o.CustomMetrics, m)
		specs = append(specs, s)
	}
	clusters := make([]Cluster, len(specs))
	errs := make([]error, len(specs))
	var wg sync.WaitGroup
	for i, s := range specs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			clusters[i], errs[i] = o.Provider.Start(ctx, s)
		}()
	}
	wg.Wait()
	f.Hub = clusters[0]
	for _, c := range clusters[1:] {
		if c != nil {
			f.Members = append(f.Members, c)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	scheme, err := kubescheme.New()
	if err != nil {
		return err
	}
	if f.HubClient, err = client.New(f.Hub.Config(), client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("hub client: %w", err)
	}
	for _, m := range f.Members {
		c, err := client.New(m.Config(), client.Options{Scheme: scheme})
		if err != nil {
			return fmt.Errorf("member %s client: %w", m.Name(), err)
		}
		f.MemberClients[m.Name()] = c
	}
	if err := f.installHub(ctx, o); err != nil {
		return err
	}
	if err := f.startProxies(o); err != nil {
		return err
	}
	if o.SecretMembers {
		if err := f.registerSecrets(ctx, o); err != nil {
			return err
		}
	}
	o.Log("starting %d replicafed replicas", o.Replicas)
	if err := f.startReplicas(o, binary); err != nil {
		return err
	}
	// Every replica, not only the first leader: a test that disrupts the
	// leader before the others joined would leave no quorum.
	return f.WaitAllReady(ctx, 2*time.Minute)
}

// installHub installs the CRDs, the admission policies and the namespace.
func (f *Fleet) installHub(ctx context.Context, o Options) error {
	hubCRDs, err := crds.Hub()
	if err != nil {
		return err
	}
	if err := testcluster.InstallCRDs(ctx, f.Hub.Config(), hubCRDs); err != nil {
		return err
	}
	pol, bind, err := policy.Selector()
	if err != nil {
		return err
	}
	objs := []client.Object{pol, bind}
	if !o.NoFinalizerPolicy {
		fpol, fbind, err := policy.Finalizer()
		if err != nil {
			return err
		}
		objs = append(objs, fpol, fbind)
	}
	for _, obj := range append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}) {
		if err := f.HubClient.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T in hub: %w", obj, err)
		}
	}
	return hubpolicy.WaitFinalizer(ctx, f.HubClient, 2*time.Minute)
}

func (f *Fleet) startReplicas(o Options, binary string) error {
	token, err := randomHex(16)
	if err != nil {
		return err
	}
	// Mutual TLS on raft and the admin endpoint, as in production: one CA
	// for the fleet, a certificate per replica named for its raft ID.
	ca, err := testpki.NewCA("replicafed-raft")
	if err != nil {
		return err
	}
	type ports struct{ raft, admin, health, metrics int }
	ps := make([]ports, o.Replicas)
	var peers []map[string]any
	for i := range ps {
		for _, p := range []*int{&ps[i].raft, &ps[i].admin, &ps[i].health, &ps[i].metrics} {
			if *p, err = testcluster.FreePort(); err != nil {
				return err
			}
		}
		peers = append(peers, map[string]any{"id": replicaID(i), "address": loopback(ps[i].raft)})
	}
	static := []map[string]any{}
	for _, m := range f.Members {
		if o.SecretMembers {
			break
		}
		kc, err := f.staticKubeconfig(m)
		if err != nil {
			return err
		}
		static = append(static, map[string]any{"name": m.Name(), "kubeconfig": kc, "labels": o.MemberLabels[m.Name()]})
	}
	for i := range ps {
		id := replicaID(i)
		dir := replicaDir(f.Dir, id)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("creating replica directory: %w", err)
		}
		certs, err := ca.Issue(filepath.Join(dir, "tls"), id)
		if err != nil {
			return fmt.Errorf("issuing the certificate of %s: %w", id, err)
		}
		cfg := map[string]any{
			"logging": map[string]any{"level": "2", "format": "json"},
			"hub":     map[string]any{"kubeconfig": f.Hub.Kubeconfig(), "namespace": Namespace},
			"clusters": map[string]any{
				"secretNamespace": Namespace,
				"static":          static,
			},
			"raft": map[string]any{
				"id": id, "bindAddress": loopback(ps[i].raft), "advertiseAddress": loopback(ps[i].raft),
				"peers": peers, "dataDir": filepath.Join(dir, "raft"),
				"adminAddress": loopback(ps[i].admin), "adminToken": token,
				"tls": map[string]any{"certFile": certs.CertFile, "keyFile": certs.KeyFile, "caFile": certs.CAFile},
			},
			"failover": map[string]any{
				"healthProbe": map[string]any{"interval": "1s", "timeout": "1s", "failureThreshold": 2, "successThreshold": 1},
			},
			// As installed: HTTPS with the raft certificate, each scrape
			// authenticated and authorized by the hub API server.
			"metrics": map[string]any{"bindAddress": loopback(ps[i].metrics), "secure": true, "perFRS": "members"},
			"health":  map[string]any{"probeAddress": loopback(ps[i].health)},
		}
		MergeConfig(cfg, o.Config)
		raw, err := yaml.Marshal(cfg)
		if err != nil {
			return fmt.Errorf("encoding replica config: %w", err)
		}
		r, err := newReplica(id, loopback(ps[i].admin), token, binary, dir, certs)
		r.MetricsAddress = loopback(ps[i].metrics)
		if err != nil {
			return err
		}
		if err := os.WriteFile(r.ConfigPath, raw, 0o600); err != nil {
			return fmt.Errorf("writing replica config: %w", err)
		}
		if err := r.Start(); err != nil {
			return err
		}
		f.Replicas = append(f.Replicas, r)
	}
	return nil
}

// MergeConfig copies src into dst, descending into nested maps (a
// configuration overlay).
func MergeConfig(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				MergeConfig(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// Leader returns the replica that reports leading, or nil.
func (f *Fleet) Leader(ctx context.Context) *Replica {
	for _, r := range f.Replicas {
		if !r.Running() {
			continue
		}
		if st, err := r.Status(ctx); err == nil && st.Leading {
			return r
		}
	}
	return nil
}

// WaitLeader waits until some running replica leads.
func (f *Fleet) WaitLeader(ctx context.Context, timeout time.Duration) (*Replica, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if r := f.Leader(ctx); r != nil {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	msg := ""
	for _, r := range f.Replicas {
		msg += fmt.Sprintf("\n--- %s ---\n%s", r.ID, r.LogTail(2000))
	}
	return nil, fmt.Errorf("no raft leader within %s%s", timeout, msg)
}

// Statuses asks every running replica for its admin status at once; one
// that does not answer within a second is left out.
func (f *Fleet) Statuses(ctx context.Context) map[string]Status {
	out := map[string]Status{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, r := range f.Replicas {
		if !r.Running() {
			continue
		}
		wg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			if st, err := r.Status(sctx); err == nil {
				mu.Lock()
				out[r.ID] = st
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// WaitAllReady waits until every replica runs, answers, is ready and all
// agree on one leader.
func (f *Fleet) WaitAllReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		sts := f.Statuses(ctx)
		leaders, ids, all := 0, map[string]bool{}, true
		var seen strings.Builder
		for _, r := range f.Replicas {
			st, answered := sts[r.ID]
			fmt.Fprintf(&seen, " %s[running=%v answered=%v ready=%v leading=%v leader=%s term=%d]", r.ID, r.Running(), answered, st.Ready, st.Leading, st.LeaderID, st.Term)
			all = all && answered && st.Ready
			if st.Leading {
				leaders++
			}
			ids[st.LeaderID] = true
		}
		if all && leaders == 1 && len(ids) == 1 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("replicas not all ready under one leader within %s:%s", timeout, seen.String())
		case <-tick.C:
		}
	}
}

// Member returns a member cluster by name.
func (f *Fleet) Member(name string) Cluster {
	for _, m := range f.Members {
		if m.Name() == name {
			return m
		}
	}
	return nil
}

// Stop ends every replica and cluster and removes the fleet directory.
func (f *Fleet) Stop() {
	var wg sync.WaitGroup
	for _, r := range f.Replicas {
		wg.Add(1)
		go func() { defer wg.Done(); r.Stop() }()
	}
	wg.Wait()
	for _, p := range f.proxies {
		_ = p.Close()
	}
	clusters := append([]Cluster{}, f.Members...)
	f.extraMu.Lock()
	clusters = append(clusters, f.extra...)
	f.extraMu.Unlock()
	if f.Hub != nil {
		clusters = append(clusters, f.Hub)
	}
	for _, c := range clusters {
		wg.Add(1)
		go func() { defer wg.Done(); c.Stop() }()
	}
	wg.Wait()
	if !f.keepDir && f.Dir != "" {
		_ = os.RemoveAll(f.Dir)
	}
}

func replicaID(i int) string { return "replicafed-" + strconv.Itoa(i) }

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("generating token: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// buildBinary compiles cmd/replicafed of this checkout into dir.
func buildBinary(ctx context.Context, dir string) (string, error) {
	// Build the module the test runs in, not the one REPLICAFED_BIN_DIR
	// happens to sit in (a worktree may borrow another checkout's tools).
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("finding the module root: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	out := filepath.Join(dir, "replicafed")
	// The flags of `make image` (CGO_ENABLED=0, -trimpath): replicafed's
	// ~970 dependency packages then compile once for both on a cold machine.
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/replicafed")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building replicafed: %w\n%s", err, b)
	}
	return out, nil
}

// Binary is the path of the replicafed binary the replicas run, for tests
// that run its other commands (join, unjoin) as an operator would.
func (f *Fleet) Binary() string { return f.binary }

// StartMember starts one more member cluster like the fleet's own (same
// provider and nodes) and does not register it with replicafed: the caller
// joins it (replicafed join) and may Stop it; the fleet stops it otherwise.
// It is not in Members or MemberClients.
func (f *Fleet) StartMember(ctx context.Context, name string) (Cluster, client.Client, error) {
	if f.Member(name) != nil {
		return nil, nil, fmt.Errorf("member %s is already in the fleet", name)
	}
	spec := f.memberSpec
	spec.Name = name
	c, err := f.provider.Start(ctx, spec)
	if err != nil {
		return nil, nil, fmt.Errorf("starting member %s: %w", name, err)
	}
	f.extraMu.Lock()
	f.extra = append(f.extra, c)
	f.extraMu.Unlock()
	scheme, err := kubescheme.New()
	if err != nil {
		return nil, nil, err
	}
	cl, err := client.New(c.Config(), client.Options{Scheme: scheme})
	if err != nil {
		return nil, nil, fmt.Errorf("member %s client: %w", name, err)
	}
	return c, cl, nil
}

// SetCustomMetric sets the value member's custom metrics adapter reports
// for metric of the named object of resource (such as "pods") in
// namespace; the member must be one of Options.CustomMetrics.
func (f *Fleet) SetCustomMetric(ctx context.Context, member, namespace, resourceName, name, metric string, value resource.Quantity) error {
	type setter interface {
		SetCustomMetric(ctx context.Context, namespace, resourceName, name, metric string, value resource.Quantity) error
	}
	s, ok := f.Member(member).(setter)
	if !ok {
		return fmt.Errorf("member %s has no custom metrics adapter the fleet can feed", member)
	}
	return s.SetCustomMetric(ctx, namespace, resourceName, name, metric, value)
}
